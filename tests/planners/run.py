# SPDX-License-Identifier: MIT OR Apache-2.0
"""Run an engine's planner in the planners venv, and ``size`` in this one, for the tier's tests."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.child import ROOT, run_module

__all__ = ["run_planner", "size_report"]


def _python() -> str:
    python = os.environ.get("PLANNERS_PYTHON", str(ROOT / ".planners" / "venv" / "bin" / "python"))
    if not Path(python).is_file():
        pytest.fail(f"no planners venv at {python}: run tests/planners/install.sh first")
    return python


def run_planner(
    planner: Path, cases: list[dict[str, Any]], directory: Path, *, timeout: float
) -> list[dict[str, Any]]:
    """What the planner script prints for each of ``cases``, written to ``directory``."""
    path = directory / "cases.json"
    path.write_text(json.dumps(cases), encoding="utf-8")
    finished = subprocess.run(
        [_python(), str(planner), str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr[-4000:]
    return [json.loads(line) for line in finished.stdout.splitlines()]


def size_report(arguments: list[str]) -> dict[str, Any]:
    """The JSON report of ``ssm-rollback-spec ARGUMENTS``, which must succeed."""
    finished = run_module("ssm_rollback_spec.tools.cli", *arguments, timeout=120)
    assert finished.returncode == 0, finished.stderr
    report: dict[str, Any] = json.loads(finished.stdout)
    return report
