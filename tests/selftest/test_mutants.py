# SPDX-License-Identifier: MIT OR Apache-2.0
"""The suite's self-test: every deliberately wrong implementation is rejected."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import pytest

from tests.child import run_module
from tests.selftest.mutants import MUTANTS

if TYPE_CHECKING:
    import subprocess


def _run_family(family: str, *impl_options: str) -> subprocess.CompletedProcess[str]:
    test_file = f"tests/properties/test_{family}.py"
    return run_module("pytest", test_file, "-x", "-q", "-p", "no:cacheprovider", *impl_options)


def _require_rejection(finished: subprocess.CompletedProcess[str], name: str) -> None:
    summary = finished.stdout.strip().splitlines()[-1] if finished.stdout.strip() else ""
    # Exit code 1 is "tests failed"; anything else (usage, collection,
    # internal error) would be the suite breaking, not the mutant losing.
    assert finished.returncode == 1, (
        f"mutant {name} was not rejected (exit {finished.returncode}): {summary}\n"
        f"{finished.stdout[-3000:]}\n{finished.stderr[-2000:]}"
    )
    assert " failed" in summary, summary


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_every_wrong_implementation_is_rejected_in_process(name: str) -> None:
    finished = _run_family(MUTANTS[name].family, "--impl-mutant", name)
    _require_rejection(finished, name)


@pytest.mark.parametrize(
    "name", sorted(name for name, mutant in MUTANTS.items() if not mutant.python_only)
)
def test_every_wrong_implementation_is_rejected_through_the_protocol(name: str) -> None:
    command = f"{sys.executable} -m tests.selftest.mutant_adapter {name}"
    finished = _run_family(MUTANTS[name].family, "--impl-cmd", command)
    _require_rejection(finished, name)


def test_the_reference_passes_every_family_the_mutants_are_judged_by() -> None:
    for family in sorted({mutant.family for mutant in MUTANTS.values()}):
        finished = _run_family(family)
        assert finished.returncode == 0, finished.stdout[-3000:]
