# SPDX-License-Identifier: MIT OR Apache-2.0
"""Run one property module against several implementations: a pytest session each, one process.

The self-test's child. A pytest start (its imports, plugins and collection)
costs about a second on two cores, more than most wrong implementations take
to fail, so one child serves a whole family: it runs ``pytest.main`` once per
implementation, each a session of its own with its own options, one after
another. Nothing a session keeps outlives it but imported modules, and the
harness loads each implementation afresh (a new instance, or a new copy of
its module), so one session cannot decide another's outcome.

The request comes on stdin, the outcomes go to stdout, both JSON::

    {"module": "tests/properties/test_parse.py", "runs": {"NAME": [OPTION, ...]}}
    {"NAME": {"status": EXIT, "failed": COUNT, "errors": COUNT, "output": TAIL}}

    python -m tests.selftest.batch < request.json
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from typing import TYPE_CHECKING, Final, TypedDict

import pytest

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["Outcome", "Request", "main"]

#: How much of a session's output comes back: enough to read why it passed.
_TAIL: Final = 3000


class Request(TypedDict):
    """What to run: the property module, and each implementation's pytest options."""

    module: str
    runs: dict[str, list[str]]


class Outcome(TypedDict):
    """How one session ended: pytest's exit status, its failed tests and errors, its output."""

    status: int
    #: Tests whose call failed: a property that rejected the implementation.
    failed: int
    #: Tests that broke in their setup or teardown: the suite, not the implementation.
    errors: int
    output: str


class _Failures:
    """Counts one session's failed calls apart from its errors (setup or teardown)."""

    def __init__(self) -> None:
        self.failed = 0
        self.errors = 0

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed and report.when == "call":
            self.failed += 1
        elif report.failed:
            self.errors += 1


def _session(module: str, options: Sequence[str], /) -> Outcome:
    failures = _Failures()
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        status = pytest.main([module, *options], plugins=[failures])
    return {
        "status": int(status),
        "failed": failures.failed,
        "errors": failures.errors,
        "output": shown.getvalue()[-_TAIL:],
    }


def main() -> int:
    """Read the request, run every session, print the outcomes; exit 0 when all ran."""
    request: Request = json.load(sys.stdin)
    outcomes = {
        name: _session(request["module"], options) for name, options in request["runs"].items()
    }
    sys.stdout.write(json.dumps(outcomes) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
