# SPDX-License-Identifier: MIT OR Apache-2.0
"""A pytest plugin that records each property's outcome for ``check``.

Loaded with ``-p spec.check_report``; it writes one JSON document to the
path given with ``--check-report`` when the session ends.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pytest

if TYPE_CHECKING:
    from collections.abc import Generator

__all__ = [
    "pytest_addoption",
    "pytest_runtest_logreport",
    "pytest_runtest_makereport",
    "pytest_sessionfinish",
]


_results: list[dict[str, object]] = []
_details: dict[str, str] = {}
_MAX_DETAIL_LINES: Final = 40


def _clauses(report: pytest.TestReport, /) -> list[str]:
    found = [str(value) for key, value in report.user_properties if key == "clause"]
    return sorted(set(found))


def _leaves(error: BaseException, /) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def _describe(error: BaseException, /) -> str:
    # The message and Hypothesis's notes (the falsifying example) say what
    # failed; the traceback would only say where in the suite it was noticed.
    lines = [f"{type(error).__name__}: {error}"]
    lines.extend(str(note) for note in getattr(error, "__notes__", ()))
    return "\n".join(lines)


def _detail(report: pytest.TestReport, /) -> str:
    if report.skipped:
        longrepr = report.longrepr
        if isinstance(longrepr, tuple):
            return str(longrepr[2]).removeprefix("Skipped: ")
        return str(longrepr)
    detail = _details.pop(report.nodeid, None)
    if detail is None:
        return report.longreprtext[-2000:]
    lines = detail.splitlines()
    if len(lines) > _MAX_DETAIL_LINES:
        lines = [*lines[:_MAX_DETAIL_LINES], f"... ({len(lines) - _MAX_DETAIL_LINES} more lines)"]
    return "\n".join(lines)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, None, None]:
    """Keep the failing exception's own text, without its traceback."""
    yield
    if call.excinfo is not None and not call.excinfo.errisinstance(pytest.skip.Exception):
        leaves = _leaves(call.excinfo.value)
        unique = list(dict.fromkeys(_describe(leaf) for leaf in leaves))
        _details[item.nodeid] = "\n".join(unique)


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


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--check-report PATH``."""
    parser.addoption("--check-report", metavar="PATH", help="write each outcome as JSON")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write the recorded outcomes."""
    target = session.config.getoption("--check-report")
    if target:
        document = {"exit_status": int(exitstatus), "results": _results}
        Path(target).write_text(json.dumps(document, indent=2), encoding="utf-8")
