# SPDX-License-Identifier: MIT OR Apache-2.0
"""The kernels tier's venv, made or refreshed once a session (adapters.engines.environment).

Every adapter the tier starts remembers its kernel launches in one folder of
the clone's (adapters/engines/kernel_memo.py): the engine mutants and the
controls run most launches of the unchanged engine's runs again, on the same
inputs. The folder is the clone's, not the user's cache: each clone's runs
compute every launch they meet at least once. And every adapter starts as a
fork of a process that has imported torch already
(adapters/engines/forkserver.py), not as a process of its own: the tier and
its mutants start one for every run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from adapters.engines.forkserver import SOCKET_VARIABLE
from adapters.engines.kernel_memo import MEMO_VARIABLE
from tests.child import ROOT
from tests.kernels.engines import fork_server
from tests.once import once_per_run

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

#: The tier's kernel memo; set to empty beforehand, no launch is remembered.
os.environ.setdefault(MEMO_VARIABLE, str(ROOT / ".pytest_cache" / "kernel-memo"))


@pytest.fixture(scope="session")
def kernels_python(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The venv's Python (torch 2.13.0 CPU, triton 3.9.0, numpy, this clone's package).

    Made or refreshed once per run: under ``-n`` the first worker does it under
    a lock, and the others wait and reuse it, since a refresh reinstalls the
    package that a running adapter imports. Each test process also starts the
    venv's fork server (adapters/engines/forkserver.py), which the adapters'
    commands (tests/kernels/engines.py) are run through, and stops it at its end.
    """
    python = (once_per_run(tmp_path_factory, "kernels-venv", _prepare) / "python").read_text(
        encoding="utf-8"
    )
    with fork_server(python) as (_, socket):
        os.environ[SOCKET_VARIABLE] = socket
        try:
            yield python
        finally:
            os.environ.pop(SOCKET_VARIABLE, None)


def _prepare(folder: Path, /) -> None:
    finished = subprocess.run(
        [sys.executable, "-m", "adapters.engines.environment"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if finished.returncode != 0:
        pytest.fail(finished.stderr.strip(), pytrace=False)
    (folder / "python").write_text(finished.stdout.strip(), encoding="utf-8")
