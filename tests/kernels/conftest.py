# SPDX-License-Identifier: MIT OR Apache-2.0
"""The kernels tier's venv, made or refreshed once a session (adapters/engines/environment.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.child import ROOT


@pytest.fixture(scope="session")
def kernels_python() -> str:
    """The venv's Python (torch 2.13.0 CPU, triton 3.9.0, numpy, this clone's package)."""
    finished = subprocess.run(
        [sys.executable, str(ROOT / "adapters" / "engines" / "environment.py")],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if finished.returncode != 0:
        pytest.fail(finished.stderr.strip(), pytrace=False)
    return finished.stdout.strip()
