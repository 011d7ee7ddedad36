# SPDX-License-Identifier: MIT OR Apache-2.0
"""The fakes: adapters and implementations wrong on purpose, which the suite must tell apart.

The adapters run as programs (``python tests/fakes/wrong_adapter.py MISTAKE``,
``python -m tests.fakes.replay_batch_adapter``); the Python implementations
(``wrong.py``, ``wrong_batch.py``, ``wrong_replay.py``) are imported by the
self-tests; ``c-racy/`` is a C adapter whose cell races.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

__all__ = ["FAKES"]

#: This folder: where the tests find the fake adapters they start by path.
FAKES: Final = Path(__file__).resolve().parent
