# SPDX-License-Identifier: MIT OR Apache-2.0
"""The suite's self-test: every deliberately wrong implementation is rejected.

Each wrong implementation runs its family's property module in a pytest
session of its own, with ``-x``, and must end it with a failed test and no
error (exit 1; an error in a fixture, or any other exit, is the suite
breaking, not the implementation losing). The
sessions of one family share one child process (``tests/selftest/batch.py``).

Its control, that the reference passes every property these families hold, is
``tests/tools/test_cli.py``'s run of ``check`` against the reference.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.child import run_module
from tests.fakes import wrong
from tests.fakes.wrong import WRONG, Family, WrongImplementation, import_path

if TYPE_CHECKING:
    from tests.selftest.batch import Outcome, Request


def _run_family(module: Family | Path, runs: dict[str, list[str]], /) -> dict[str, Outcome]:
    """Each run's session of a family's property module (or of any module), in one child."""
    common = ["-x", "-q", "-p", "no:cacheprovider"]
    request: Request = {
        "module": str(module) if isinstance(module, Path) else f"tests/properties/{module.value}",
        "runs": {name: [*common, *options] for name, options in runs.items()},
    }
    finished = run_module("tests.selftest.batch", stdin=json.dumps(request))
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    outcomes: dict[str, Outcome] = json.loads(finished.stdout.splitlines()[-1])
    assert outcomes.keys() == runs.keys()
    return outcomes


def _assert_every_one_rejected(outcomes: dict[str, Outcome], /) -> None:
    """Each session ended with a failed test and no error: exit 1, a failure counted."""
    kept = {
        name: f"exit {outcome['status']}, {outcome['failed']} failed, {outcome['errors']} "
        f"errors:\n{outcome['output']}"
        for name, outcome in outcomes.items()
        if outcome["status"] != 1 or outcome["failed"] == 0 or outcome["errors"]
    }
    if kept:
        shown = "\n".join(f"{name}: {why}" for name, why in kept.items())
        raise AssertionError(f"wrong implementations not rejected:\n{shown}")


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


@pytest.mark.parametrize("family", list(Family), ids=lambda family: family.name.lower())
def test_every_wrong_implementation_is_rejected_in_process(family: Family) -> None:
    runs = {
        name: ["--impl-module", import_path(name)]
        for name, expected in sorted(WRONG.items())
        if expected.family is family
    }
    assert runs
    _assert_every_one_rejected(_run_family(family, runs))


def _through_the_protocol(name: str, /) -> list[str]:
    command = (
        f"{sys.executable} -m ssm_rollback_spec.harness.adapter --impl-module {import_path(name)}"
    )
    caught_by = WRONG[name].caught_by
    return ["--impl-cmd", command, *(("-k", caught_by) if caught_by else ())]


@pytest.mark.slow
@pytest.mark.parametrize(
    "family",
    [family for family in Family if any(
        expected.family is family and not expected.python_only for expected in WRONG.values()
    )],
    ids=lambda family: family.name.lower(),
)  # fmt: skip
def test_every_wrong_implementation_is_rejected_through_the_protocol(family: Family) -> None:
    runs = {
        name: _through_the_protocol(name)
        for name, expected in sorted(WRONG.items())
        if expected.family is family and not expected.python_only
    }
    _assert_every_one_rejected(_run_family(family, runs))


def test_a_session_that_passes_is_not_counted_as_a_rejection() -> None:
    # The control of the batch itself: the reference, after a wrong one in the
    # same child, passes its session, and the self-test says so by name.
    outcomes = _run_family(
        Family.VERIFY,
        {
            "ReplayVerifyEnters": ["--impl-module", import_path("ReplayVerifyEnters")],
            "reference": ["--impl-module", "ssm_rollback_spec.rollback"],
        },
    )
    assert {name: outcome["status"] for name, outcome in outcomes.items()} == {
        "ReplayVerifyEnters": 1,
        "reference": 0,
    }
    shown = r"^wrong implementations not rejected:\nreference: exit 0, 0 failed, 0 errors:\n"
    with pytest.raises(AssertionError, match=shown + r"[^\n]*\n3 passed in "):
        _assert_every_one_rejected(outcomes)


def test_a_session_that_errors_is_not_counted_as_a_rejection(tmp_path: Path) -> None:
    # A fixture that breaks is the suite failing, not the implementation.
    module = tmp_path / "test_a_broken_fixture.py"
    module.write_text(
        "import pytest\n\n\n@pytest.fixture\ndef broken():\n    raise RuntimeError('broken')\n"
        "\n\ndef test_uses_it(broken):\n    assert broken\n",
        encoding="utf-8",
    )
    outcomes = _run_family(module, {"broken": []})
    assert (outcomes["broken"]["status"], outcomes["broken"]["failed"]) == (1, 0)
    assert outcomes["broken"]["errors"] == 1
    with pytest.raises(AssertionError, match=r"^wrong implementations not rejected:\n"
                       r"broken: exit 1, 0 failed, 1 errors:\n"):  # fmt: skip
        _assert_every_one_rejected(outcomes)
