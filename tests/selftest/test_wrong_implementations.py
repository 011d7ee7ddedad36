# SPDX-License-Identifier: MIT OR Apache-2.0
"""The suite's self-test: every deliberately wrong implementation is rejected.

Its control, that the reference passes every property these families hold, is
``tests/test_cli.py``'s run of ``check`` against the reference.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import pytest

from tests.child import run_module
from tests.selftest import wrong
from tests.selftest.wrong import WRONG, WrongImplementation, import_path

if TYPE_CHECKING:
    import subprocess


def _run_family(family: wrong.Family, *impl_options: str) -> subprocess.CompletedProcess[str]:
    test_file = f"tests/properties/{family.value}"
    return run_module("pytest", test_file, "-x", "-q", "-p", "no:cacheprovider", *impl_options)


def _require_rejection(finished: subprocess.CompletedProcess[str], name: str) -> None:
    summary = finished.stdout.strip().splitlines()[-1] if finished.stdout.strip() else ""
    # Exit code 1 is "tests failed"; anything else (usage, collection,
    # internal error) would be the suite breaking, not the implementation losing.
    assert finished.returncode == 1, (
        f"wrong implementation {name} was not rejected (exit {finished.returncode}): {summary}\n"
        f"{finished.stdout[-3000:]}\n{finished.stderr[-2000:]}"
    )
    assert " failed" in summary, summary


def _subclasses(cls: type) -> set[type]:
    direct: set[type] = set(cls.__subclasses__())
    return direct.union(*(_subclasses(sub) for sub in direct))


def test_every_wrong_implementation_is_registered() -> None:
    # Other test modules build on WrongImplementation too; only this one's count.
    defined = {
        cls.__name__ for cls in _subclasses(WrongImplementation) if cls.__module__ == wrong.__name__
    }
    assert defined == set(WRONG)
    assert all(isinstance(getattr(wrong, name), type) for name in WRONG)


@pytest.mark.parametrize("name", sorted(WRONG))
def test_every_wrong_implementation_is_rejected_in_process(name: str) -> None:
    finished = _run_family(WRONG[name].family, "--impl-module", import_path(name))
    _require_rejection(finished, name)


@pytest.mark.parametrize(
    "name", sorted(name for name, expected in WRONG.items() if not expected.python_only)
)
def test_every_wrong_implementation_is_rejected_through_the_protocol(name: str) -> None:
    command = (
        f"{sys.executable} -m ssm_rollback_spec.harness.adapter --impl-module {import_path(name)}"
    )
    expected = WRONG[name]
    alone = ("-k", expected.caught_by) if expected.caught_by else ()
    finished = _run_family(expected.family, "--impl-cmd", command, *alone)
    _require_rejection(finished, name)
