# SPDX-License-Identifier: MIT OR Apache-2.0
"""How ``size`` reads a byte count or a token count, the same for every flag that takes one.

A byte flag takes plain digits, vLLM's suffixes (``10G`` is 10 x 2^30, ``10g``
10 x 10^9; :func:`human_readable_int`) and the unit names with their
meanings (``10GiB`` is 10 x 2^30, ``10GB`` 10 x 10^9). A token flag takes
plain digits and vLLM's suffixes (``128K`` is 131,072, ``128k`` 128,000). Both
read what vLLM reads as vLLM reads it, so a value pasted from a ``vllm serve``
command line means here what it meant there.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Final

__all__ = [
    "BYTE_SPELLINGS",
    "LARGEST",
    "LENGTH_SPELLINGS",
    "SizeTextError",
    "byte_count",
    "human_readable_int",
    "token_count",
]

#: How a byte count may be typed, as the errors and --help say it.
BYTE_SPELLINGS: Final = "digits, 10G or 10GiB (x 2^30), 10g or 10GB (x 10^9)"
#: How a token count may be typed.
LENGTH_SPELLINGS: Final = "digits, 128K (x 1024) or 128k (x 1000)"

#: The unit names a byte count may end in, and what each multiplies by.
_BYTE_UNITS: Final = {
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
}
_UNIT_NUMBER: Final = re.compile(r"(\d+(?:\.\d+)?)(" + "|".join(_BYTE_UNITS) + ")")

_DECIMAL_SUFFIXES: Final = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY_SUFFIXES: Final = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_HUMAN_INT: Final = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")


def human_readable_int(text: str, /) -> int | None:
    """A number with a suffix as vLLM reads its integer flags; None for one without.

    ``10G`` is 10 x 2^30 and ``128K`` 131,072; ``25.6k`` is 25,600, truncated as
    vLLM truncates ``float(number) x 1000`` (the vLLM view's
    ``SOURCES["human-readable integers"]``).

    Raises:
        ValueError: a decimal with a binary suffix, which vLLM refuses.
    """
    found = _HUMAN_INT.fullmatch(text.strip())
    if found is None:
        return None
    number, suffix = found.groups()
    if suffix in _DECIMAL_SUFFIXES:
        return int(float(number) * _DECIMAL_SUFFIXES[suffix])
    if "." in number:
        raise ValueError(f"vLLM takes no decimals with {suffix} (did you mean {suffix.lower()}?)")
    return int(number) * _BINARY_SUFFIXES[suffix]


class SizeTextError(ValueError):
    """A flag's value typed in a form it does not read (a byte or token count, or any other).

    The message is the flag's one-line error (:mod:`.options` reads the others).
    """


#: The largest count read: what a 64-bit machine can address (bytes) or index (tokens).
LARGEST: Final = 2**64 - 1


def _bounded(value: int, text: str, /, *, unit: str) -> int:
    if value > LARGEST:
        raise SizeTextError(
            f"{text!r} is past 2^64 - 1 {unit}, more than a 64-bit machine addresses"
        )
    return value


def _count(text: str, /, *, what: str, spellings: str) -> int:
    stripped = text.strip()
    if stripped.isascii() and stripped.isdigit():
        value: int | None = int(stripped)
    else:
        try:
            value = human_readable_int(stripped)
        except ValueError as error:
            raise SizeTextError(f"{error}: {text!r}") from None
    if value is None:
        raise SizeTextError(f"not {what}: {text!r} (give {spellings})")
    if value == 0:
        raise SizeTextError(f"must be at least 1, got {text!r}")
    return _bounded(value, text, unit="bytes" if what == "a byte count" else "tokens")


def byte_count(text: str, /) -> int:
    """The bytes ``text`` says: digits, ``10G``, ``10g``, ``10GiB`` or ``10GB``; at least 1.

    A unit name may follow a decimal (``40.5GiB``) when the bytes come out whole.

    Raises:
        SizeTextError: no such spelling, a decimal vLLM refuses (``1.5G``), a
            part of a byte, zero, or more than :data:`LARGEST`.
    """
    found = _UNIT_NUMBER.fullmatch(text.strip())
    if found is None:
        return _count(text, what="a byte count", spellings=BYTE_SPELLINGS)
    number, unit = found.groups()
    value = Fraction(number) * _BYTE_UNITS[unit]
    if value.denominator != 1:
        raise SizeTextError(f"not a whole number of bytes: {text!r} is {float(value):,.1f} B")
    if value == 0:
        raise SizeTextError(f"must be at least 1, got {text!r}")
    return _bounded(int(value), text, unit="bytes")


def token_count(text: str, /) -> int:
    """The tokens ``text`` says: digits, ``128K`` or ``128k`` (and vLLM's M, G, T); at least 1.

    Raises:
        SizeTextError: no such spelling, a decimal vLLM refuses (``1.5K``), zero, or more
            than :data:`LARGEST`.
    """
    return _count(text, what="a token count", spellings=LENGTH_SPELLINGS)
