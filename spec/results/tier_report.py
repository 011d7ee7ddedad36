# SPDX-License-Identifier: MIT OR Apache-2.0
"""A tier's report of the tests it ran: each test, who it judged, on which clauses, and its outcome.

Some tiers judge a clause through pytest tests of their own, not through
``check`` or ``vectors run``: the llama.cpp tier's ``llama.h`` tests judge
RB-REPLAY-14 on each architecture and build, the e2e tier's tests judge it
through vLLM's greedy tokens. Such a tier's run writes what it judged as one
JSON document of this format (``schemas/tier.schema.json``), and the page
reads it beside the ``--json`` reports of ``check`` (:func:`tier_reports`).

A test names the implementation it judged and the clauses; its outcome is
the run's. A test whose pass holds a finding live, the implementation
deviating where the test ran, names the finding (its page, its runtime's
report, in words why): its pass is a DEVIATION on the page, linked to the
finding's page. A test's tests of several parameters (architectures, cases)
are one line of the page, their worst outcome.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, TypedDict

from .reports import (
    WEB_ADDRESS,
    Known,
    Report,
    ReportError,
    Result,
    parse_report,
    read_document,
)

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "FORMAT",
    "OUTCOMES",
    "TierFinding",
    "TierImplementation",
    "TierReport",
    "TierTest",
    "is_tier_report",
    "parse_tier_report",
    "read_reports",
    "read_tier_report",
    "tier_reports",
]

#: The document's ``format``, which tells it from a report of ``check``.
FORMAT: Final = "ssm-rollback-spec tier report"
#: A test's outcome, as the tier's run ends it.
OUTCOMES: Final = ("passed", "failed", "skipped")


class TierImplementation(TypedDict):
    """Who a test judged: a name and release, as a column of the page heads them."""

    name: str
    release: str


class TierFinding(TypedDict):
    """A finding a test's pass holds live: its page, its runtime's report, and why."""

    #: The finding's page, from the repository's root (docs/findings/NAME.md).
    page: str
    #: The runtime's own report of it (http or https), or empty where none was found.
    link: str
    reason: str


class TierTest(TypedDict):
    """One test the tier ran, as its run ended it."""

    #: ``FILE::NAME[ID]``: the test's file name and pytest's name of it.
    test: str
    #: The test function's name.
    function: str
    #: Each parameter of the test by name: an architecture, a way, a case, a variant.
    parameters: dict[str, str]
    implementation: TierImplementation
    clauses: list[str]
    #: passed, failed or skipped: failed if any phase failed.
    outcome: str
    #: What it judges, or why it was skipped.
    detail: str
    #: The finding its pass holds live, or None.
    finding: TierFinding | None


class TierReport(TypedDict):
    """A tier's report: which tier, the spec it judged by, and its tests in their order."""

    format: str
    #: The tier, as its results folder names it (build/results/TIER/).
    tier: str
    spec_version: str
    tests: list[TierTest]


def _fail(what: str, /) -> ReportError:
    return ReportError(f"not a tier report: {what}")


def is_tier_report(document: object, /) -> bool:
    """Whether ``document`` says it is a tier report (its ``format``)."""
    return isinstance(document, dict) and document.get("format") == FORMAT


def _text(value: dict[str, object], key: str, where: str, /) -> str:
    found = value.get(key)
    if not isinstance(found, str):
        raise _fail(f"{where}.{key} must be a string")
    return found


def _implementation(value: object, where: str, /) -> TierImplementation:
    if not isinstance(value, dict):
        raise _fail(f"{where} must be an object")
    return {"name": _text(value, "name", where), "release": _text(value, "release", where)}


def _finding(value: object, where: str, /) -> TierFinding | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _fail(f"{where} must be an object or null")
    link = _text(value, "link", where)
    if link and not WEB_ADDRESS.fullmatch(link):
        raise _fail(f"{where}.link must be an http(s) URL")
    page = _text(value, "page", where)
    if not page.startswith("docs/") or ".." in page.split("/"):
        raise _fail(f"{where}.page must be a path under docs/")
    return {"page": page, "link": link, "reason": _text(value, "reason", where)}


def _test(value: object, where: str, /) -> TierTest:
    if not isinstance(value, dict):
        raise _fail(f"{where} must be an object")
    outcome = _text(value, "outcome", where)
    if outcome not in OUTCOMES:
        raise _fail(f"{where}.outcome must be one of {', '.join(OUTCOMES)}")
    parameters = value.get("parameters")
    if not isinstance(parameters, dict) or not all(isinstance(v, str) for v in parameters.values()):
        raise _fail(f"{where}.parameters must be an object of strings")
    clauses = value.get("clauses")
    if not isinstance(clauses, list) or not clauses or not all(isinstance(c, str) for c in clauses):
        raise _fail(f"{where}.clauses must be a list of strings, not empty")
    return {
        "test": _text(value, "test", where),
        "function": _text(value, "function", where),
        "parameters": {str(key): item for key, item in parameters.items()},
        "implementation": _implementation(value.get("implementation"), f"{where}.implementation"),
        "clauses": list(clauses),
        "outcome": outcome,
        "detail": _text(value, "detail", where),
        "finding": _finding(value.get("finding"), f"{where}.finding"),
    }


def parse_tier_report(document: object, /) -> TierReport:
    """The tier report a decoded JSON document holds.

    Raises:
        ReportError: the document is not a tier report, in one line saying where.
    """
    if not is_tier_report(document) or not isinstance(document, dict):
        raise _fail(f'its "format" must be "{FORMAT}"')
    for key in ("tier", "spec_version"):
        if not isinstance(document.get(key), str):
            raise _fail(f"{key} must be a string")
    tests = document.get("tests")
    if not isinstance(tests, list):
        raise _fail("tests must be a list")
    return {
        "format": FORMAT,
        "tier": document["tier"],
        "spec_version": document["spec_version"],
        "tests": [_test(test, f"tests[{index}]") for index, test in enumerate(tests)],
    }


def read_tier_report(path: Path, /) -> TierReport:
    """The tier report in the file ``path``, read bounded in size and depth.

    Raises:
        ReportError: the file is missing, too large, not JSON, or not a tier report.
    """
    return parse_tier_report(read_document(path))


def _name(test: TierTest, /) -> str:
    # A test over its parameters, and the finding it holds where it holds one.
    file, _, _ = test["test"].partition("::")
    finding = test["finding"]
    held = f" ({finding['page'].rsplit('/', 1)[-1].removesuffix('.md')})" if finding else ""
    return f"{file}::{test['function']}{held}"


def _outcome(tests: list[TierTest], /) -> str:
    outcomes = {test["outcome"] for test in tests}
    if "failed" in outcomes:
        return "failed"
    if any(test["outcome"] == "passed" and test["finding"] for test in tests):
        return "deviation"
    return "passed" if "passed" in outcomes else "skipped"


def _where(tests: list[TierTest], outcome: str, /) -> str:
    # Which runs a line's outcome came from, by the parameters that tell them apart.
    shown = [
        test
        for test in tests
        if test["outcome"] == outcome or (outcome == "deviation" and test["finding"])
    ]
    varying = [
        key
        for key in dict.fromkeys(k for test in tests for k in test["parameters"])
        if len({test["parameters"].get(key) for test in tests}) > 1
    ]
    if not shown or not varying:
        return ""
    runs = [", ".join(test["parameters"].get(key, "") for key in varying) for test in shown]
    counted = f"all {len(tests)}" if len(shown) == len(tests) else f"{len(shown)} of {len(tests)}"
    return f" ({counted} runs: {'; '.join(runs)})"


def _result(tests: list[TierTest], /) -> Result:
    outcome = _outcome(tests)
    first = tests[0]
    clauses = tuple(dict.fromkeys(c for test in tests for c in test["clauses"]))
    details = dict.fromkeys(
        test["detail"] for test in tests if test["outcome"] == outcome and test["detail"]
    )
    detail = "; ".join(details) or first["detail"]
    known = None
    finding = first["finding"]
    if outcome == "deviation" and finding is not None:
        engine = f"; its report: {finding['link']}" if finding["link"] else "; no report found"
        known = Known(
            entry=f"test {_name(first)}",
            reason=f"{finding['reason']}{_where(tests, outcome)}{engine}",
            link=finding["link"],
            page=finding["page"],
        )
    elif outcome != "passed":
        detail = f"{detail}{_where(tests, outcome)}".strip()
    return Result(_name(first), clauses, outcome, detail, known=known)


def tier_reports(tier: TierReport, /) -> list[Report]:
    """The page's reports of ``tier``: one per implementation its tests judged.

    Each test function is one result per finding it can hold (or one), its
    parameters' runs together, their worst outcome: failed, then a pass
    that holds the finding live (deviation), then passed, then skipped.
    """
    grouped: dict[tuple[str, str], dict[str, list[TierTest]]] = {}
    for test in tier["tests"]:
        implementation = (test["implementation"]["name"], test["implementation"]["release"])
        grouped.setdefault(implementation, {}).setdefault(_name(test), []).append(test)
    return [
        Report(
            name=name,
            release=release,
            command=f"the {tier['tier']} tier's tests",
            spec_version=tier["spec_version"],
            results=tuple(_result(tests) for tests in lines.values()),
            conforming=(),
        )
        for (name, release), lines in grouped.items()
    ]


def read_reports(path: Path, /) -> list[Report]:
    """The reports the file ``path`` gives: one of ``check`` or ``vectors run``, or a tier's.

    A tier report gives one report per implementation its tests judged
    (:func:`tier_reports`); any other file is one report of ``check``,
    ``vectors run`` or ``serve-check``.

    Raises:
        ReportError: the file is missing, too large, not JSON, or not a report.
    """
    document = read_document(path)
    if is_tier_report(document):
        return tier_reports(parse_tier_report(document))
    return [parse_report(document)]
