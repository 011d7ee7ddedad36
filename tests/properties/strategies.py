# SPDX-License-Identifier: MIT OR Apache-2.0
"""Hypothesis strategies that reach the contract's edges."""

from __future__ import annotations

from itertools import product
from math import prod
from typing import Final

from hypothesis import settings
from hypothesis import strategies as st

from ssm_rollback_spec import model

USIZE_MAX: Final = model.USIZE_MAX
MODE_NAMES: Final = model.MODE_NAMES

# 2**64 - 1 factors into these primes, so products of exactly USIZE_MAX can be
# built from them (Fermat: 2**64 - 1 = 3 * 5 * 17 * 257 * 641 * 65537 * 6700417).
USIZE_MAX_PRIMES: Final = (3, 5, 17, 257, 641, 65537, 6700417)
assert prod(USIZE_MAX_PRIMES) == USIZE_MAX

_BOUNDARY_NUMBERS: Final = sorted(
    {0, 1, 2, 3, 7, 8, 9}
    | {2**bits + delta for bits, delta in product((8, 16, 31, 32, 33, 62, 63), (-1, 0, 1))}
    | {USIZE_MAX - delta for delta in range(9)}
    | {USIZE_MAX // divisor for divisor in (2, 3, 4, 8, 255, 256)}
    | set(USIZE_MAX_PRIMES)
)


def scaled(examples: int, /) -> settings:
    """Settings for ``examples`` examples under ``ci``, scaled with the profile.

    A property that needs many tries (a race) or few (one interpreter per
    example) says so; ``thorough`` still multiplies it like every other.
    """
    factor = settings().max_examples / 100
    return settings(max_examples=max(examples, round(examples * factor)))


#: Every character UTF-8 encodes: all but the surrogates, as ``st.text()``
#: draws by default. Named by category because Hypothesis finds a codec's
#: characters by encoding each code point, a second and a half in every
#: process (every ``check``), where a category is read from its table.
TEXT_CHARACTERS: Final = st.characters(exclude_categories=["Cs"])


def texts(*, max_size: int | None = None) -> st.SearchStrategy[str]:
    """Any text UTF-8 can carry, at most ``max_size`` characters long."""
    return st.text(TEXT_CHARACTERS, max_size=max_size)


#: Any usize, biased towards zero, powers of two and the top of the range.
usizes: Final = st.one_of(
    st.sampled_from(_BOUNDARY_NUMBERS),
    st.integers(0, 2**16),
    st.integers(0, USIZE_MAX),
)

#: Sizes a real model has: no overflow in sight.
small_usizes: Final = st.integers(0, 2**20)


@st.composite
def usize_max_factorizations(draw: st.DrawFn, parts: int) -> tuple[int, ...]:
    """``parts`` factors whose product is exactly ``USIZE_MAX``."""
    groups = [draw(st.integers(0, parts - 1)) for _ in USIZE_MAX_PRIMES]
    return tuple(
        prod(p for p, g in zip(USIZE_MAX_PRIMES, groups, strict=True) if g == i)
        for i in range(parts)
    )


# Characters a careless parse might fold into a valid name.
_WHITESPACE: Final = " \t\n\r\x0b\x0c\x00\u00a0\u1680\u2003\u2028\u200b\u3000\ufeff"
_LOOKALIKES: Final = {
    "a": "\u0430\u00e0\u0251\uff41",
    "e": "\u0435\u00e9\u0117\uff45",
    "l": "\u04cf\u0031\u0049\uff4c",
    "n": "\u0578\u00f1\uff4e",
    "o": "\u043e\u03bf\u00f6\u0030",
    "p": "\u0440\u03c1\uff50",
    "r": "\u0433\u0280\uff52",
    "s": "\u0455\u015f\uff53",
    "t": "\u0442\u0165\uff54",
    "h": "\u04bb\uff48",
    "y": "\u0443\u00fd\uff59",
}
_QUOTING: Final = ("'", '"', "\\", "\\'", "\\n", "`", "{", "}", "{other}", "%s")
# Characters an escaping or echoing error text would mangle.
_CONTROL: Final = ("\x00", "\x01", "\x1b", "\x7f", "\x85", "\u2028", "\U0001f600", "\U0010fffd")


def _compatibility_form(name: str, block: int, /) -> str:
    # Fullwidth (U+FF41...) or mathematical bold (U+1D41A..., beyond the BMP)
    # letters: NFKC folds either to plain ASCII.
    return "".join(chr(ord(c) - ord("a") + block) for c in name)


#: The first lower-case letter of the compatibility blocks NFKC folds to ASCII.
COMPATIBILITY_BLOCKS: Final = (0xFF41, 0x1D41A, 0x1D5EE)

#: A text as long as a command line carries (thousands of characters).
LONG_TEXT_LENGTHS: Final = st.integers(1_000, 8_000)


@st.composite
def near_miss_texts(draw: st.DrawFn) -> str:  # noqa: C901, PLR0911 - one return per kind of miss
    """Texts one careless step away from a mode name."""
    name = draw(st.sampled_from(MODE_NAMES))
    kind = draw(
        st.sampled_from(
            (
                "case",
                "whitespace",
                "lookalike",
                "prefix",
                "suffix",
                "quoting",
                "repeat",
                "combining",
                "compatibility",
                "control",
                "long",
            )
        )
    )
    if kind == "case":
        flips = draw(st.lists(st.booleans(), min_size=len(name), max_size=len(name)))
        text = "".join(c.upper() if f else c for c, f in zip(name, flips, strict=True))
        return text if text != name else name.upper()
    if kind == "whitespace":
        space = draw(st.text(st.sampled_from(_WHITESPACE), min_size=1, max_size=3))
        at = draw(st.sampled_from(("before", "after", "inside")))
        if at == "before":
            return space + name
        if at == "after":
            return name + space
        cut = draw(st.integers(1, len(name) - 1))
        return name[:cut] + space + name[cut:]
    if kind == "lookalike":
        index = draw(st.sampled_from([i for i, c in enumerate(name) if c in _LOOKALIKES]))
        swap = draw(st.sampled_from(_LOOKALIKES[name[index]]))
        return name[:index] + swap + name[index + 1 :]
    if kind == "prefix":
        return name[: draw(st.integers(0, len(name) - 1))]
    if kind == "suffix":
        return name[draw(st.integers(1, len(name))) :] or name + "s"
    if kind == "quoting":
        quote = draw(st.sampled_from(_QUOTING))
        cut = draw(st.integers(0, len(name)))
        return name[:cut] + quote + name[cut:]
    if kind == "repeat":
        return name + draw(st.sampled_from(("", ",", "=", "|"))) + draw(st.sampled_from(MODE_NAMES))
    if kind == "compatibility":
        return _compatibility_form(name, draw(st.sampled_from(COMPATIBILITY_BLOCKS)))
    if kind == "control":
        cut = draw(st.integers(0, len(name)))
        return name[:cut] + draw(st.sampled_from(_CONTROL)) + name[cut:]
    if kind == "long":
        padding = draw(st.sampled_from((" ", "'", "\\", "x", "\u00e9", "\U0001f600")))
        return name + padding * draw(LONG_TEXT_LENGTHS)
    return name + draw(st.sampled_from(("\u0301", "\u0308", "\u200d", "\ufe0f")))


#: Any text a command line could carry, weighted towards near misses.
mode_texts: Final = st.one_of(
    st.sampled_from(MODE_NAMES),
    near_miss_texts(),
    st.just(""),
    texts(max_size=20),
    st.text(st.sampled_from("snapshotreplay '\"\\ SNAPSHOTREPLAY"), max_size=12),
)

modes: Final = st.sampled_from(MODE_NAMES)

#: One call on the published mode, as a protocol event.
events: Final = st.one_of(
    st.builds(lambda mode: {"op": "set", "mode": mode}, modes),
    st.just({"op": "get"}),
)


def as_calls(event_list: list[dict[str, str]], /) -> list[model.Call]:
    """Protocol events as the model's calls."""
    return [("set", e["mode"]) if e["op"] == "set" else ("get", None) for e in event_list]
