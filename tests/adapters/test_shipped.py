# SPDX-License-Identifier: MIT OR Apache-2.0
"""The shipped adapters: the Python one passes the whole suite, the Rust one its own tests.

The Rust adapter's whole-suite run is ``check``'s, in ``tests/scenarios/test_strength.py``.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import pytest

from tests.child import run_cargo, run_module

if TYPE_CHECKING:
    import subprocess


def _suite_through(command: str) -> subprocess.CompletedProcess[str]:
    profile = os.environ.get("HYPOTHESIS_PROFILE", "ci")
    # One second of fresh-process races: the budget runs, at a quarter of its cost.
    suite = ("tests/properties", "-q", "-p", "no:cacheprovider", f"--impl-cmd={command}")
    return run_module("pytest", *suite, "--race-budget=1", profile=profile)


def _require_pass(finished: subprocess.CompletedProcess[str]) -> None:
    summary = finished.stdout.strip().splitlines()[-1]
    assert finished.returncode == 0, finished.stdout[-5000:] + finished.stderr[-2000:]
    assert " passed" in summary
    assert " failed" not in summary


# A slow tier of its own: an interpreter started afresh for every example of
# the published-mode properties. The compiled adapter's whole run is
# tests/scenarios/test_strength.py's agreement of check with the vectors.
@pytest.mark.slow
def test_the_python_adapter_passes_the_whole_suite() -> None:
    _require_pass(_suite_through(f"{sys.executable} -m ssm_rollback_spec.harness.adapter"))


def test_the_rust_crate_passes_its_own_unit_tests(cargo: str) -> None:
    tested = run_cargo(cargo, "test")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    # Its lib: parse and sizes, two of the replay port, two of the tiny model.
    assert "test result: ok. 6 passed" in tested.stdout


def test_a_compiled_check_then_set_is_caught_by_racing_fresh_cells(racy_rust_adapter: str) -> None:
    # The racy build passes every other property: only the race can catch it,
    # and a narrow window loses only now and then, so this runs the race alone.
    finished = run_module(
        "pytest",
        "tests/properties",
        "-q",
        "-p",
        "no:cacheprovider",
        f"--impl-cmd={racy_rust_adapter}",
        "-k",
        "fresh_cells",
    )
    assert finished.returncode == 1, finished.stdout[-3000:]
    assert "in every round, one winner's mode for all calls" in finished.stdout
