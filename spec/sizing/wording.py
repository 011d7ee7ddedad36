# SPDX-License-Identifier: MIT OR Apache-2.0
"""How sizing figures are worded: bytes in units, counted nouns, ratios, report sections.

The engines' units (:mod:`.engines`) word their own rows and startup lines
with these; :mod:`.presentation` lays the sections out as text or Markdown.
"""

from __future__ import annotations

from typing import Final

__all__ = ["Row", "Section", "count", "human", "ratio", "short"]

#: A report row: its label and its value.
Row = tuple[str, str]
#: A report section: a heading and its rows.
Section = tuple[str, list[Row]]


#: The binary units a figure is shown in, the largest taking whatever is beyond it.
_UNITS: Final = ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def short(size: int, /) -> str:
    """Bytes in the largest binary unit under 1,024 of it (EiB past that), one decimal."""
    if size < 1024:
        return f"{size} B"
    value = float(size)
    for unit in _UNITS:
        value /= 1024
        if value < 1024 or unit == _UNITS[-1]:
            return f"{value:,.1f} {unit}"
    raise AssertionError  # pragma: no cover - the loop always returns


def human(size: int, /) -> str:
    """Exact bytes with a binary unit beside them."""
    return f"{size:,} B" if size < 1024 else f"{size:,} B ({short(size)})"


def count(number: int, noun: str, /) -> str:
    """A number and its noun, plural unless one."""
    return f"{number:,} {noun}" if number == 1 else f"{number:,} {noun}s"


def ratio(value: float | None, /) -> str:
    """A ratio as ``N.Nx``; a dash when there is none."""
    return "-" if value is None else f"{value:,.1f}x"
