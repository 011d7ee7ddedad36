# SPDX-License-Identifier: MIT OR Apache-2.0
"""A pytest plugin that records each property's outcome for ``check``: the outcome recorder.

Loaded with ``-p ssm_rollback_spec.harness.outcome_recorder``; it writes one JSON document
(:class:`SuiteReport`) to the path given with ``--check-report`` when the
session ends. For an implementation reached over the protocol, a failure's
detail is the exchange alone: none of Hypothesis's Python-only notes, which
name drivers and source lines an adapter's authors cannot act on.
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Final, NotRequired, TypedDict

import pytest

from .protocol import encode
from .pytest_plugin import MEASURED
from .race_evidence import NOT_OBSERVED, RaceOutcome
from .signals import stopping_on_signals

if TYPE_CHECKING:
    from collections.abc import Generator

__all__ = [
    "Exchange",
    "PropertyResult",
    "SuiteReport",
    "pytest_addoption",
    "pytest_runtest_logreport",
    "pytest_runtest_makereport",
    "pytest_sessionfinish",
]


class Exchange(TypedDict):
    """A request a failure was met on, and the exact line sent for it."""

    request: dict[str, object]
    line: str


class PropertyResult(TypedDict):
    """One property's outcome, as ``check`` reports it."""

    property: str
    #: ``passed``, ``failed``, ``skipped`` or ``not-observed`` (a race
    #: property whose racing calls never overlapped); ``check`` adds ``deviation``.
    outcome: str
    clauses: list[str]
    detail: str
    seconds: float
    #: The requests the failure was met on, for reproduction and export.
    requests: list[Exchange]
    #: Whether the adapter went silent rather than answering wrongly.
    hung: bool
    #: A replay property's largest relative error measured, and the bound it
    #: was judged within (RB-REPLAY-1); absent where it measured none, and in
    #: reports written before they were kept.
    distance: NotRequired[float]
    bound: NotRequired[float]


class SuiteReport(TypedDict):
    """What the plugin writes: pytest's exit status and every property's result."""

    exit_status: int
    results: list[PropertyResult]


class _Failure(TypedDict):
    detail: str
    requests: list[Exchange]
    hung: bool
    #: The clauses the failure itself names, narrower than the property's; empty if none.
    clauses: list[str]


_results: list[PropertyResult] = []
_failures: dict[str, _Failure] = {}
_skips: dict[str, str] = {}
# Tests that take none of these reach no implementation: they check the
# model or the suite itself, so they are no verdict on the implementation.
_REACHES_THE_IMPLEMENTATION: Final = frozenset({"impl", "python_api", "new_cell"})
_not_properties: set[str] = set()
_MAX_DETAIL_LINES: Final = 40

#: What a failure that names no exchange says over the protocol, where the
#: suite's own Python text would tell an adapter's authors nothing.
NO_EXCHANGE: Final = (
    "the property failed without naming the exchange it failed on; "
    "rerun with --verbose, and please report this as a bug of the suite"
)


def _clauses(report: pytest.TestReport, /) -> list[str]:
    found = [str(value) for key, value in report.user_properties if key == "clause"]
    return sorted(set(found), key=_clause_key)


def _clause_key(clause: str, /) -> tuple[str, int]:
    # By family, then by number: RB-REPLAY-2 before RB-REPLAY-10.
    family, _, number = clause.rpartition("-")
    return (family, int(number)) if number.isdigit() else (clause, -1)


def _leaves(error: BaseException, /) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def _describe(error: BaseException, /, *, in_process: bool) -> str:
    # A failure of the protocol or of a Python call says what was sent or
    # called, what came back and what the model allows; the traceback, and
    # pytest's and Hypothesis's own text (the diff of an assert, the
    # falsifying example, how to rerun it under Hypothesis) only say where in
    # the suite it was noticed, which the implementation's authors cannot act on.
    if hasattr(error, "request") or hasattr(error, "clauses"):
        return str(error)
    if in_process:
        return f"{type(error).__name__}: {_first_line(str(error))}"
    return NO_EXCHANGE


def _exchange(error: BaseException, /) -> Exchange | None:
    request = getattr(error, "request", None)
    if not isinstance(request, dict):
        return None
    line = getattr(error, "line", None)
    return {"request": request, "line": line if isinstance(line, str) else encode(request)}


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
    if not _REACHES_THE_IMPLEMENTATION & set(getattr(item, "fixturenames", ())):
        _not_properties.add(item.nodeid)
    if call.excinfo is None:
        return
    if call.excinfo.errisinstance(pytest.skip.Exception):
        # The reason alone: Hypothesis adds the example it was met on as a
        # note, in Python.
        _skips[item.nodeid] = _first_line(str(getattr(call.excinfo.value, "msg", "")))
        return
    over_protocol = bool(
        item.config.getoption("--impl-cmd") or item.config.getoption("--impl-argv")
    )
    leaves = _leaves(call.excinfo.value)
    exchanges = [found for leaf in leaves if (found := _exchange(leaf)) is not None]
    named = [str(c) for leaf in leaves for c in getattr(leaf, "clauses", ())]
    _failures[item.nodeid] = {
        "detail": "\n".join(
            dict.fromkeys(_describe(x, in_process=not over_protocol) for x in leaves)
        ),
        "requests": list({e["line"]: e for e in exchanges}.values()),
        "hung": any(getattr(leaf, "hung", False) for leaf in leaves),
        "clauses": sorted(set(named), key=_clause_key),
    }


def _first_line(text: str, /) -> str:
    return (text.splitlines() or [""])[0]


def _skip_reason(report: pytest.TestReport, /) -> str:
    reason = _skips.pop(report.nodeid, None)
    if reason is not None:
        return reason
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):
        return _first_line(str(longrepr[2]).removeprefix("Skipped: "))
    return _first_line(str(longrepr))


def _measured(report: pytest.TestReport, /) -> tuple[float, float] | None:
    # Of every distance the property measured, the one nearest its bound (or
    # furthest past it): what the property came to, against what it allowed.
    pairs = [
        (float(value[0]), float(value[1]))
        for key, value in report.user_properties
        if key == MEASURED and isinstance(value, list | tuple) and len(value) == 2
    ]

    def nearness(pair: tuple[float, float], /) -> tuple[float, float, float]:
        distance, bound = pair
        share = distance / bound if bound else (math.inf if distance else 0.0)
        # Among exact replies, the loosest bound: the most the property allowed.
        return (share, distance, bound)

    return max(pairs, key=nearness, default=None)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Record the outcome of each test's call (or of a failed set-up)."""
    if not (report.when == "call" or (report.when == "setup" and not report.passed)):
        return
    failure = _failures.pop(report.nodeid, None)
    if report.nodeid in _not_properties and not report.failed:
        return
    detail = ""
    outcome: str = "failed" if report.failed else report.outcome
    if report.skipped:
        detail = _skip_reason(report)
        # A race not seen is skipped under plain pytest; check says which it was.
        if detail.startswith(NOT_OBSERVED):
            outcome = RaceOutcome.NOT_OBSERVED.value
    elif report.failed:
        detail = _shortened(failure["detail"]) if failure else report.longreprtext[-2000:]
    result: PropertyResult = {
        "property": report.nodeid,
        "outcome": outcome,
        # A failure that names the clauses it breaks is blamed on those alone.
        "clauses": failure["clauses"] if failure and failure["clauses"] else _clauses(report),
        "detail": detail,
        "seconds": round(report.duration, 3),
        "requests": failure["requests"] if failure and report.failed else [],
        "hung": bool(failure and report.failed and failure["hung"]),
    }
    measured = _measured(report)
    if measured is not None:
        result["distance"], result["bound"] = measured
    _results.append(result)


# Stopped by check (SIGTERM to its group), this pytest ends its adapters' groups first.
_SIGNALS: Final = contextlib.ExitStack()


def pytest_configure(config: pytest.Config) -> None:  # noqa: ARG001 - the hook's own signature
    _SIGNALS.enter_context(stopping_on_signals())


def pytest_unconfigure(config: pytest.Config) -> None:  # noqa: ARG001 - the hook's own signature
    _SIGNALS.close()


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--check-report PATH``."""
    parser.addoption("--check-report", metavar="PATH", help="write each outcome as JSON")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write the recorded outcomes."""
    target = session.config.getoption("--check-report")
    if target:
        document: SuiteReport = {"exit_status": int(exitstatus), "results": _results}
        Path(target).write_text(json.dumps(document, indent=2), encoding="utf-8")
