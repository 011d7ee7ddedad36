# SPDX-License-Identifier: MIT OR Apache-2.0
"""A thread-safe cell that keeps the first value written to it."""

from __future__ import annotations

import enum
import threading
from typing import Generic, Literal, TypeVar

__all__ = ["FirstWriteWins"]

_T = TypeVar("_T")


class _Empty(enum.Enum):
    # A private sentinel, so that any value of _T (None included) can be stored.
    EMPTY = enum.auto()


_EMPTY: Literal[_Empty.EMPTY] = _Empty.EMPTY


class FirstWriteWins(Generic[_T]):
    """A cell written at most once; every later write returns what is already there.

    The runtime uses this shape for process-wide flags set from the command
    line. Implements RB-CELL-1 to RB-CELL-4.
    """

    __slots__ = ("_lock", "_value")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._value: _T | Literal[_Empty.EMPTY] = _EMPTY

    def set(self, value: _T, /) -> _T:
        """Write ``value`` if the cell is empty, and return the value in force.

        Implements RB-CELL-1.
        """
        with self._lock:
            if self._value is _EMPTY:
                self._value = value
                return value
            return self._value

    def get_or_init(self, default: _T, /) -> _T:
        """Return the value in force, pinning ``default`` when nothing was written.

        Implements RB-CELL-2.
        """
        # Reading one attribute is atomic, so the common case takes no lock.
        current = self._value
        if current is _EMPTY:
            return self.set(default)
        return current

    def get(self) -> _T | None:
        """Return the value in force without pinning anything, or None when empty.

        Implements RB-CELL-3.
        """
        current = self._value
        return None if current is _EMPTY else current

    def __repr__(self) -> str:
        current = self._value
        return f"FirstWriteWins({'<empty>' if current is _EMPTY else repr(current)})"
