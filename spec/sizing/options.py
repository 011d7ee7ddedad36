# SPDX-License-Identifier: MIT OR Apache-2.0
"""How ``size`` reads each flag's value, and the engines' own names for its flags.

Every reader takes the text as typed and returns the value, or raises
:class:`.units.SizeTextError` with the one line the flag's error says; the
command line only declares which flag takes which reader. Byte and token
counts are read by :mod:`.units`, the same for every flag that takes one.
"""

from __future__ import annotations

import enum
import sys
from typing import TYPE_CHECKING, Final

from . import units
from .dtypes import Dtype

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "DIMENSION_FLAGS",
    "ENGINE_ALIASES",
    "MAX_SWEEP_VALUES",
    "READERS",
    "SPELLING",
    "OutputFormat",
    "draft_counts",
    "engine_dtype",
    "fraction",
    "positive",
    "ratio",
    "whole_number",
]

#: The most draft counts one sweep prints.
MAX_SWEEP_VALUES: Final = 1024


class OutputFormat(enum.Enum):
    """How the figures are printed."""

    TEXT = "text"
    JSON = "json"
    MARKDOWN = "markdown"


#: Each dimension flag and the GdnDimensions field it sets.
DIMENSION_FLAGS: Final = {
    "gdn_layers": "num_gdn_layers",
    "key_heads": "num_key_heads",
    "key_head_dim": "key_head_dim",
    "value_heads": "num_value_heads",
    "value_head_dim": "value_head_dim",
    "conv_kernel": "conv_kernel",
}

#: The attribute of the parsed flags that records how each flag was spelt, so errors name what
#: was typed.
SPELLING: Final = "spelling"

#: The engines' own names for flags of ours that mean the same, by our flag's dest.
ENGINE_ALIASES: Final = {
    "tp": ("--tensor-parallel-size", "--tp-size"),
    "num_drafts": ("--num-speculative-tokens", "--speculative-num-steps"),
    "state_dtype": ("--mamba-ssm-cache-dtype", "--mamba-ssm-dtype"),
    "conv_dtype": ("--mamba-cache-dtype",),
}

#: The dtypes as the engines' flags spell them, and ours; ``auto`` leaves the choice to the config.
_ENGINE_DTYPES: Final = {
    "auto": None,
    "float32": Dtype.FP32.value,
    "bfloat16": Dtype.BF16.value,
    "float16": Dtype.FP16.value,
}


def whole_number(text: str, /) -> int:
    """A whole number of at least 0.

    Raises:
        SizeTextError: not a whole number, or a negative one.
    """
    try:
        value = int(text)
    except ValueError:
        raise units.SizeTextError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise units.SizeTextError(f"must not be negative: {value}")
    return value


def positive(text: str, /) -> int:
    """A whole number of at least 1.

    Raises:
        SizeTextError: not a whole number, or below 1.
    """
    value = whole_number(text)
    if value == 0:
        raise units.SizeTextError("must be at least 1, got 0")
    return value


def draft_counts(text: str, /) -> tuple[int, ...]:
    """The draft counts ``N``, ``A,B,C`` or a range ``A-B`` (or a mix) say, sorted, each once.

    Raises:
        SizeTextError: a part that is no whole number or range, a range that
            runs downward, or more than :data:`MAX_SWEEP_VALUES` values.
    """
    spans = []
    for part in text.split(","):
        # A leading minus is a negative number, refused as such, not a range.
        if "-" not in part[1:]:
            value = whole_number(part)
            spans.append((value, value))
            continue
        first, _, last = part.partition("-")
        try:
            low, high = whole_number(first), whole_number(last)
        except units.SizeTextError:
            raise units.SizeTextError(f"not a whole number or range: {part!r}") from None
        if low > high:
            raise units.SizeTextError(f"a range runs upward, got {part!r}")
        spans.append((low, high))
    # Counted before any list is built, so a huge range fails at once.
    if sum(high - low + 1 for low, high in spans) > MAX_SWEEP_VALUES:
        raise units.SizeTextError(f"at most {MAX_SWEEP_VALUES} values, got {text!r}")
    return tuple(sorted({value for low, high in spans for value in range(low, high + 1)}))


def fraction(text: str, /, *, most: float = 1.0) -> float:
    """A fraction above 0 and at most 1 (or ``most``).

    Raises:
        SizeTextError: not a number, or out of that range.
    """
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value <= most:
        bound = "a fraction above 0 and at most 1" if most == 1 else "a number above 0"
        raise units.SizeTextError(f"{bound}, got {text!r}")
    return value


def ratio(text: str, /) -> float:
    """A number above 0.

    Raises:
        SizeTextError: not a number, or not above 0.
    """
    return fraction(text, most=sys.float_info.max)


def engine_dtype(text: str, /) -> str | None:
    """A dtype as the engines spell it (``float32``) or as ours do, by our name; None for ``auto``.

    Raises:
        SizeTextError: a dtype no engine names.
    """
    if text in _ENGINE_DTYPES:
        return _ENGINE_DTYPES[text]
    if text in {dtype.value for dtype in Dtype}:
        return text
    offered = ", ".join(repr(name) for name in _ENGINE_DTYPES)
    raise units.SizeTextError(f"invalid choice: {text!r} (choose from {offered})")


#: How a memory flag's value is read, by its metavar (any other: :func:`positive`).
READERS: Final[dict[str, Callable[[str], float]]] = {
    "FRACTION": fraction,
    "BYTES": units.byte_count,
    "RATIO": ratio,
    "TOKENS": units.token_count,
}
