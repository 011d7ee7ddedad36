# SPDX-License-Identifier: MIT OR Apache-2.0
"""A pytest plugin that records each property's outcome for ``check``.

Loaded with ``-p spec.check_report``; it writes one JSON document to the
path in ``SSM_ROLLBACK_CHECK_REPORT`` when the session ends.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import pytest

__all__ = ["REPORT_ENV", "pytest_runtest_logreport", "pytest_sessionfinish"]

REPORT_ENV: Final = "SSM_ROLLBACK_CHECK_REPORT"

_results: list[dict[str, object]] = []
_MAX_DETAIL_LINES: Final = 40


def _clauses(report: pytest.TestReport, /) -> list[str]:
    found = [str(value) for key, value in report.user_properties if key == "clause"]
    return sorted(set(found))


def _detail(report: pytest.TestReport, /) -> str:
    if report.skipped:
        longrepr = report.longrepr
        if isinstance(longrepr, tuple):
            return str(longrepr[2]).removeprefix("Skipped: ")
        return str(longrepr)
    # pytest marks the exception's own lines with "E"; they hold the
    # counterexample (request and reply) and Hypothesis's falsifying example.
    lines = [line[1:].strip() for line in report.longreprtext.splitlines() if line.startswith("E ")]
    return "\n".join(lines[:_MAX_DETAIL_LINES]) or report.longreprtext[-2000:]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Record the outcome of each test's call (or of a failed set-up)."""
    if report.when == "call" or (report.when == "setup" and not report.passed):
        outcome = "failed" if report.failed else report.outcome
        _results.append(
            {
                "property": report.nodeid,
                "outcome": outcome,
                "clauses": _clauses(report),
                "detail": "" if report.passed else _detail(report),
                "seconds": round(report.duration, 3),
            }
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write the recorded outcomes."""
    del session
    target = os.environ.get(REPORT_ENV)
    if target:
        document = {"exit_status": int(exitstatus), "results": _results}
        Path(target).write_text(json.dumps(document, indent=2), encoding="utf-8")
