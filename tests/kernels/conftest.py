# SPDX-License-Identifier: MIT OR Apache-2.0
"""The kernels tier's venv, made or refreshed once a session (adapters.engines.environment)."""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from tests.child import ROOT
from tests.once import once_per_run

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture(scope="session")
def kernels_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The venv's Python (torch 2.13.0 CPU, triton 3.9.0, numpy, this clone's package).

    Made or refreshed once per run: under ``-n`` the first worker does it under
    a lock, and the others wait and reuse it, since a refresh reinstalls the
    package that a running adapter imports.
    """
    return (once_per_run(tmp_path_factory, "kernels-venv", _prepare) / "python").read_text(
        encoding="utf-8"
    )


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
