# SPDX-License-Identifier: MIT OR Apache-2.0
"""Where the property suite and the vector corpus are, installed or in a clone.

The wheel carries them inside the package (``suite``, ``vectors`` and
``examples``); a clone keeps them at ``tests/properties``, ``vectors/`` and
``examples/``, which the wheel's copies are built from; the replay corpus is
``replay/`` inside the vector corpus's directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

__all__ = [
    "EXAMPLE_SUFFIX",
    "REPLAY_SUBDIRECTORY",
    "corpus_directory",
    "example_config",
    "examples_directory",
    "replay_corpus_directory",
    "suite_directory",
]

#: How the name of a shipped example config ends.
EXAMPLE_SUFFIX: Final = ".config.json"

#: Where the replay corpus sits inside the protocol corpus's directory.
REPLAY_SUBDIRECTORY: Final = "replay"

_PACKAGE: Final = Path(__file__).resolve().parent.parent
_CLONE: Final = _PACKAGE.parent


def _first_existing(*candidates: Path) -> Path:
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return candidates[0]


def suite_directory() -> Path:
    """The directory of the property suite's modules."""
    return _first_existing(_PACKAGE / "suite", _CLONE / "tests" / "properties")


def corpus_directory() -> Path:
    """The directory of the shipped vector corpus, with its schema and manifest."""
    return _first_existing(_PACKAGE / "vectors", _CLONE / "vectors")


def replay_corpus_directory() -> Path:
    """The directory of the shipped replay corpus (``replay/`` in the vector corpus's)."""
    return corpus_directory() / REPLAY_SUBDIRECTORY


def examples_directory() -> Path:
    """The directory of the example model configs (``examples/`` in a clone)."""
    return _first_existing(_PACKAGE / "examples", _CLONE / "examples")


def example_config(name: str, /) -> Path | None:
    """The shipped example config called ``name`` (with or without its suffix), if any."""
    if "/" in name or name in {"", ".", ".."}:
        return None
    stem = name.removesuffix(EXAMPLE_SUFFIX)
    found = examples_directory() / f"{stem}{EXAMPLE_SUFFIX}"
    return found if found.is_file() else None
