# SPDX-License-Identifier: MIT OR Apache-2.0
"""How sizing figures are worded: bytes in units, counted nouns, ratios, report sections.

The engines' units (:mod:`.engines`) word their own rows and startup lines
with these; :mod:`.presentation` lays the sections out as text or Markdown.
"""

from __future__ import annotations

__all__ = ["Row", "Section", "count", "human", "ratio", "short"]

#: A report row: its label and its value.
Row = tuple[str, str]
#: A report section: a heading and its rows.
Section = tuple[str, list[Row]]


def human(size: int, /) -> str:
    """Exact bytes with a binary unit beside them."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{size:,} B" if unit == "B" else f"{size:,} B ({value:.1f} {unit})"
        value /= 1024
    raise AssertionError  # pragma: no cover - the loop always returns


def short(size: int, /) -> str:
    """Bytes in a binary unit, one decimal."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:,.1f} TiB"


def count(number: int, noun: str, /) -> str:
    """A number and its noun, plural unless one."""
    return f"{number:,} {noun}" if number == 1 else f"{number:,} {noun}s"


def ratio(value: float | None, /) -> str:
    """A ratio as ``N.Nx``; a dash when there is none."""
    return "-" if value is None else f"{value:,.1f}x"
