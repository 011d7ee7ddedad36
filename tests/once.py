# SPDX-License-Identifier: MIT OR Apache-2.0
"""What a run makes once and every xdist worker reuses: a built wheel, a venv, a failed check."""

from __future__ import annotations

import fcntl
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    import pytest

__all__ = ["once_per_run"]


def _shared_folder(tmp_path_factory: pytest.TempPathFactory, /) -> Path:
    # xdist gives each worker a folder of its own inside the run's, which is
    # the one every worker sees and no other run does.
    base = tmp_path_factory.getbasetemp()
    return base.parent if "PYTEST_XDIST_WORKER" in os.environ else base


def once_per_run(
    tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None], /
) -> Path:
    """The folder ``name`` of this run, which ``make`` fills the first time it is asked for.

    The first caller, in whichever worker, makes it under a lock; later
    callers wait for the lock and reuse it. A ``make`` that raises leaves it
    unmade, for the next caller to try again.
    """
    folder = _shared_folder(tmp_path_factory) / name
    folder.mkdir(exist_ok=True)
    made = folder / ".made"
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not made.exists():
            make(folder)
            made.touch()
    return folder
