# SPDX-License-Identifier: MIT OR Apache-2.0
"""A pytest plugin that records each property's outcome for ``check``.

Loaded with ``-p spec.tools.check_report``; it writes one JSON document
(:class:`SuiteReport`) to the path given with ``--check-report`` when the
session ends. For an implementation reached over the protocol, a failure's
detail is the exchange alone: none of Hypothesis's Python-only notes, which
name drivers and source lines an adapter's authors cannot act on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypedDict

import pytest

if TYPE_CHECKING:
    from collections.abc import Generator

__all__ = [
    "PropertyResult",
    "SuiteReport",
    "pytest_addoption",
    "pytest_runtest_logreport",
    "pytest_runtest_makereport",
    "pytest_sessionfinish",
]


class PropertyResult(TypedDict):
    """One property's outcome, as ``check`` reports it."""

    property: str
    #: ``passed``, ``failed`` or ``skipped`` (``check`` adds ``deviation``).
    outcome: str
    clauses: list[str]
    detail: str
    seconds: float
    #: The requests the failure was met on, for reproduction and export.
    requests: list[dict[str, object]]
    #: Whether the adapter went silent rather than answering wrongly.
    hung: bool


class SuiteReport(TypedDict):
    """What the plugin writes: pytest's exit status and every property's result."""

    exit_status: int
    results: list[PropertyResult]


class _Failure(TypedDict):
    detail: str
    requests: list[dict[str, object]]
    hung: bool


_results: list[PropertyResult] = []
_failures: dict[str, _Failure] = {}
_MAX_DETAIL_LINES: Final = 40


def _clauses(report: pytest.TestReport, /) -> list[str]:
    found = [str(value) for key, value in report.user_properties if key == "clause"]
    return sorted(set(found))


def _leaves(error: BaseException, /) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def _describe(error: BaseException, /, *, notes: bool) -> str:
    # The message (and, in-process, Hypothesis's notes: the falsifying
    # example) say what failed; the traceback would only say where in the
    # suite it was noticed.
    lines = [str(error) if hasattr(error, "request") else f"{type(error).__name__}: {error}"]
    if notes:
        lines.extend(str(note) for note in getattr(error, "__notes__", ()))
    return "\n".join(lines)


def _shortened(detail: str, /) -> str:
    lines = detail.splitlines()
    if len(lines) > _MAX_DETAIL_LINES:
        lines = [*lines[:_MAX_DETAIL_LINES], f"... ({len(lines) - _MAX_DETAIL_LINES} more lines)"]
    return "\n".join(lines)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, None, None]:
    """Keep the failing exception's own text and the requests it was met on."""
    yield
    if call.excinfo is None or call.excinfo.errisinstance(pytest.skip.Exception):
        return
    over_protocol = bool(item.config.getoption("--impl-cmd"))
    leaves = _leaves(call.excinfo.value)
    requests = [leaf.request for leaf in leaves if getattr(leaf, "request", None) is not None]  # type: ignore[attr-defined]
    _failures[item.nodeid] = {
        "detail": "\n".join(dict.fromkeys(_describe(x, notes=not over_protocol) for x in leaves)),
        "requests": list({json.dumps(r, sort_keys=True): r for r in requests}.values()),
        "hung": any(getattr(leaf, "hung", False) for leaf in leaves),
    }


def _skip_reason(report: pytest.TestReport, /) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Record the outcome of each test's call (or of a failed set-up)."""
    if not (report.when == "call" or (report.when == "setup" and not report.passed)):
        return
    failure = _failures.pop(report.nodeid, None)
    detail = ""
    if report.skipped:
        detail = _skip_reason(report)
    elif report.failed:
        detail = _shortened(failure["detail"]) if failure else report.longreprtext[-2000:]
    _results.append(
        {
            "property": report.nodeid,
            "outcome": "failed" if report.failed else report.outcome,
            "clauses": _clauses(report),
            "detail": detail,
            "seconds": round(report.duration, 3),
            "requests": failure["requests"] if failure and report.failed else [],
            "hung": bool(failure and report.failed and failure["hung"]),
        }
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--check-report PATH``."""
    parser.addoption("--check-report", metavar="PATH", help="write each outcome as JSON")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write the recorded outcomes."""
    target = session.config.getoption("--check-report")
    if target:
        document: SuiteReport = {"exit_status": int(exitstatus), "results": _results}
        Path(target).write_text(json.dumps(document, indent=2), encoding="utf-8")
