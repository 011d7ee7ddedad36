# SPDX-License-Identifier: MIT OR Apache-2.0
"""Where the property suite and the vector corpus are, installed or in a clone.

The wheel carries both inside the package (``spec/suite`` and
``spec/vectors``); a clone keeps them at ``tests/properties`` and
``vectors/``, which the wheel's copies are built from; the replay corpus is
``replay/`` inside the vector corpus's directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

__all__ = ["REPLAY_SUBDIRECTORY", "corpus_directory", "replay_corpus_directory", "suite_directory"]

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
