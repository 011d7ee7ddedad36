# SPDX-License-Identifier: MIT OR Apache-2.0
"""Where an engine fact comes from: a file and lines in one released version."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Source"]


@dataclass(frozen=True)
class Source:
    """A cited place in an engine's released package.

    ``path`` is relative to the package root inside the wheel (as
    ``vllm/config/cache.py``), ``lines`` the line or range, ``says`` what the
    code there does, in a sentence.
    """

    path: str
    lines: str
    says: str

    def __str__(self) -> str:
        return f"{self.path}:{self.lines}"
