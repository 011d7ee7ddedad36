# SPDX-License-Identifier: MIT OR Apache-2.0
"""A tier's report of its own tests: read and checked, one line per error, and its page lines."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

import jsonschema
import pytest

from ssm_rollback_spec.results import read_reports
from ssm_rollback_spec.results.reports import ReportError
from ssm_rollback_spec.results.tier_report import (
    FORMAT,
    parse_tier_report,
    read_tier_report,
    tier_reports,
)
from ssm_rollback_spec.tools.cli import main
from tests.child import ROOT
from tests.results.tier_recorder import compare

if TYPE_CHECKING:
    from pathlib import Path

SCHEMA: Final = json.loads(
    (ROOT / "spec" / "results" / "schemas" / "tier.schema.json").read_text(encoding="utf-8")
)
PAGE: Final = "docs/findings/llamacpp-snapshot-whole-window.md"
ISSUE: Final = "https://github.com/ggml-org/llama.cpp/issues/26695"


def _test(name: str, outcome: str = "passed", **changed: Any) -> dict[str, Any]:
    test: dict[str, Any] = {
        "test": f"test_rollback.py::{name}",
        "function": name.partition("[")[0],
        "parameters": {},
        "implementation": {"name": "engine", "release": "1.0"},
        "clauses": ["RB-REPLAY-14"],
        "outcome": outcome,
        "detail": "checkpoint way",
        "finding": None,
    }
    return test | changed


def _document(*tests: dict[str, Any]) -> dict[str, Any]:
    return {"format": FORMAT, "tier": "llama.cpp", "spec_version": "1.2.0", "tests": list(tests)}


def _live(arch: str, outcome: str = "passed") -> dict[str, Any]:
    return _test(
        f"test_case[{arch}-whole_window]",
        outcome,
        function="test_case",
        parameters={"arch": arch, "case": "whole_window"},
        detail="",
        finding={"page": PAGE, "link": ISSUE, "reason": "a plane the decode did not write"},
    )


BAD: Final = [
    ([], 'not a tier report: its "format" must be "ssm-rollback-spec tier report"'),
    (_document() | {"tier": 3}, "not a tier report: tier must be a string"),
    (_document() | {"tests": {}}, "not a tier report: tests must be a list"),
    (_document(_test("t", "crashed")),
     "not a tier report: tests[0].outcome must be one of passed, failed, skipped"),
    (_document(_test("t", parameters={"arch": 3})),
     "not a tier report: tests[0].parameters must be an object of strings"),
    (_document(_test("t", clauses=[])),
     "not a tier report: tests[0].clauses must be a list of strings, not empty"),
    (_document(_test("t", implementation={"name": "x"})),
     "not a tier report: tests[0].implementation.release must be a string"),
    (_document(_test("t", finding="docs/findings/x.md")),
     "not a tier report: tests[0].finding must be an object or null"),
    (_document(_test("t", finding={"page": "../x.md", "link": "", "reason": "r"})),
     "not a tier report: tests[0].finding.page must be a path under docs/"),
    (_document(_test("t", finding={"page": PAGE, "link": "javascript:x", "reason": "r"})),
     "not a tier report: tests[0].finding.link must be an http(s) URL"),
    (_document(_test("t", detail=None)), "not a tier report: tests[0].detail must be a string"),
]  # fmt: skip


@pytest.mark.parametrize(("document", "message"), BAD)
def test_a_document_that_is_not_a_tier_report_gets_one_exact_line(
    document: object, message: str
) -> None:
    with pytest.raises(ReportError) as raised:
        parse_tier_report(document)
    assert str(raised.value) == message


@pytest.mark.parametrize(("document", "message"), BAD[1:])
def test_the_schema_refuses_what_the_reader_refuses(document: object, message: str) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, SCHEMA)
    assert message.startswith("not a tier report: ")


def test_a_valid_tier_report_passes_the_schema_and_reads_back_as_written(tmp_path: Path) -> None:
    document = _document(_test("t"), _live("kimi-k3"))
    jsonschema.validate(document, SCHEMA)
    path = tmp_path / "tier.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    assert read_tier_report(path) == document


def test_a_pass_that_holds_a_finding_is_a_linked_deviation_naming_its_runs() -> None:
    tier = parse_tier_report(_document(_test("t"), _live("kimi-k3"), _live("lfm2")))
    (report,) = tier_reports(tier)
    assert (report.name, report.release, report.command) == (
        "engine",
        "1.0",
        "the llama.cpp tier's tests",
    )
    plain, live = report.results
    assert (plain.name, plain.outcome, plain.detail) == (
        "test_rollback.py::t",
        "passed",
        "checkpoint way",
    )
    assert (live.name, live.outcome) == (
        "test_rollback.py::test_case (llamacpp-snapshot-whole-window)",
        "deviation",
    )
    assert live.known is not None
    assert (live.known.link, live.known.page) == (ISSUE, PAGE)
    assert live.known.reason == (
        f"a plane the decode did not write (all 2 runs: kimi-k3; lfm2); its report: {ISSUE}"
    )


def test_a_failing_run_of_a_finding_test_fails_its_line_and_a_skip_gives_its_reason() -> None:
    skipped = _test("s", "skipped", detail="no prebuilt library for this CPU")
    tier = parse_tier_report(_document(_live("kimi-k3"), _live("lfm2", "failed"), skipped))
    (report,) = tier_reports(tier)
    live, skip = report.results
    assert (live.outcome, live.known) == ("failed", None)
    assert live.detail == "(1 of 2 runs: lfm2)"
    assert (skip.outcome, skip.detail) == ("skipped", "no prebuilt library for this CPU")


def test_report_reads_a_tier_report_beside_a_check_report_into_its_implementation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tier.json"
    path.write_text(json.dumps(_document(_live("kimi-k3"))), encoding="utf-8")
    assert [r.name for r in read_reports(path)] == ["engine"]
    assert main(["report", str(path), "--spec-url", "../SPEC.md"]) == 0
    page = capsys.readouterr().out
    assert "| [engine](#impl-engine-1-0) | 1.0 | 1 DEVIATION | [RB-REPLAY-14]" in page
    assert (
        "](../docs/findings/llamacpp-snapshot-whole-window.md): a plane the decode did not write"
        in page
    )


def test_a_whole_run_is_compared_with_the_committed_report_and_a_partial_one_is_not() -> None:
    committed = parse_tier_report(_document(_test("t"), _live("kimi-k3")))
    same = parse_tier_report(_document(_test("t"), _live("kimi-k3")) | {"spec_version": "9"})
    fixed = parse_tier_report(_document(_test("t"), _test("test_case[kimi-k3-whole_window]")))
    partial = parse_tier_report(_document(_test("t", "failed")))
    assert compare(same, committed) is None
    assert compare(partial, committed) is None
    assert compare(fixed, committed) == (
        "2 tests differ, the first test_rollback.py::test_case[kimi-k3-whole_window]"
    )
