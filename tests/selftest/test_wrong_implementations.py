# SPDX-License-Identifier: MIT OR Apache-2.0
"""The suite's self-test: every deliberately wrong implementation is rejected.

Each wrong implementation runs its family's property module in a pytest
session of its own, with ``-x``, and must end it with a failed test (exit 1;
anything else is the suite breaking, not the implementation losing). The
sessions of one family share one child process (``tests/selftest/batch.py``).

Its control, that the reference passes every property these families hold, is
``tests/test_cli.py``'s run of ``check`` against the reference.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import pytest

from tests.child import run_module
from tests.selftest import wrong
from tests.selftest.wrong import WRONG, Family, WrongImplementation, import_path

if TYPE_CHECKING:
    from tests.selftest.batch import Outcome, Request


def _run_family(family: Family, runs: dict[str, list[str]], /) -> dict[str, Outcome]:
    request: Request = {"module": f"tests/properties/{family.value}", "runs": runs}
    common = ["-x", "-q", "-p", "no:cacheprovider"]
    request["runs"] = {name: [*common, *options] for name, options in runs.items()}
    finished = run_module("tests.selftest.batch", stdin=json.dumps(request))
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    outcomes: dict[str, Outcome] = json.loads(finished.stdout.splitlines()[-1])
    return outcomes


def assert_every_one_rejected(outcomes: dict[str, Outcome], /) -> None:
    """Each session ended with a failed test: exit 1, and at least one failure counted."""
    kept = {
        name: f"exit {outcome['status']}, {outcome['failed']} failed:\n{outcome['output']}"
        for name, outcome in outcomes.items()
        if outcome["status"] != 1 or outcome["failed"] == 0
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
    assert_every_one_rejected(_run_family(family, runs))


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
    assert_every_one_rejected(_run_family(family, runs))


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
    with pytest.raises(AssertionError, match=r"^wrong implementations not rejected:\n"
                       r"reference: exit 0, 0 failed:\n[^\n]*\n3 passed in "):  # fmt: skip
        assert_every_one_rejected(outcomes)
