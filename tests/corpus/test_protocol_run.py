# SPDX-License-Identifier: MIT OR Apache-2.0
"""The protocol corpus read back and run: the schema's rules, each verdict, a broken adapter."""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING, Final

import pytest

from ssm_rollback_spec.corpus.files import VectorError, render_corpus_files
from ssm_rollback_spec.corpus.protocol_run import (
    CaseResult,
    is_contested_race,
    load_cases,
    run_cases,
)
from ssm_rollback_spec.harness.protocol import SPANS, encode
from ssm_rollback_spec.harness.subprocess_driver import SubprocessDriver
from tests.fakes import FAKES

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from ssm_rollback_spec.corpus.protocol_cases import Case

REFERENCE: Final = [sys.executable, "-m", "ssm_rollback_spec.harness.adapter"]

PARSE: Final[Case] = {
    "id": "parse-replay",
    "clauses": ["RB-PARSE-1"],
    "request": {"op": "parse", "text": "replay"},
    "expected": [{"ok": "replay"}],
}
WRONG: Final[Case] = {**PARSE, "id": "parse-wrongly", "expected": [{"ok": "snapshot"}]}
ROW: Final[Case] = {
    "id": "row-one-each",
    "clauses": ["RB-SIZE-1"],
    "request": {"op": "row_bytes", "qkvz_elems": 1, "nv": 1},
    "expected": [{"ok": 10}],
}
TRACE: Final[Case] = {
    "id": "trace-read-only",
    "clauses": ["RB-PUB-2"],
    "request": {"op": "trace", "events": [{"op": "get"}]},
    "expected": [{"ok": ["snapshot"]}],
}
RACE: Final[Case] = {
    "id": "race-two-writers",
    "clauses": ["RB-PUB-4"],
    "request": {
        "op": "race",
        "events": [{"op": "set", "mode": "replay"}, {"op": "set", "mode": "snapshot"}],
    },
    "expected": [{"ok": ["replay", "replay"]}, {"ok": ["snapshot", "snapshot"]}],
}


@contextlib.contextmanager
def _driver(argv: list[str], /) -> Iterator[SubprocessDriver]:
    driver = SubprocessDriver(argv, timeout=60.0)
    try:
        yield driver
    finally:
        driver.close()


@pytest.fixture
def reference() -> Iterator[SubprocessDriver]:
    with _driver(REFERENCE) as driver:
        yield driver


def _corpus(tmp_path: Path, files: dict[str, list[object]], /) -> Path:
    texts = render_corpus_files(
        {"spec_version": "test"}, {name: {"cases": cases} for name, cases in files.items()}
    )
    for name, text in texts.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_a_corpus_loads_its_cases_in_file_order(tmp_path: Path) -> None:
    directory = _corpus(tmp_path, {"a.json": [PARSE], "b.json": [ROW, TRACE]})
    assert [case["id"] for case in load_cases(directory)] == [
        "parse-replay",
        "row-one-each",
        "trace-read-only",
    ]


@pytest.mark.parametrize(
    ("case", "problem"),
    [
        (
            {**PARSE, "id": "Bad_Id"},
            "case 'Bad_Id': its id must be lower-case letters, digits and hyphens",
        ),
        (
            {**PARSE, "clauses": ["RB-NOPE-1"]},
            "case 'parse-replay': it cites clauses SPEC.md does not have: ['RB-NOPE-1']",
        ),
        (
            {**PARSE, "expected": [{"ok": 1, "error": {}}]},
            (
                "case 'parse-replay': each expected reply must be {\"ok\": VALUE} or"
                ' {"error": {"kind": KIND}}'
            ),
        ),
        (
            {**PARSE, "line": "a\nb"},
            "case 'parse-replay': its line must be a text with no line break",
        ),
        (
            ["not", "a", "case"],
            (
                "cases[0]: must be an object with exactly id, clauses, request and expected,"
                " and maybe line"
            ),
        ),
    ],
)
def test_a_case_that_breaks_the_schema_is_named_by_file_and_id(
    tmp_path: Path, case: object, problem: str
) -> None:
    with pytest.raises(VectorError) as raised:
        load_cases(_corpus(tmp_path, {"a.json": [case]}))
    assert str(raised.value) == f"a.json: {problem}"


def test_two_cases_with_one_id_are_refused_across_files(tmp_path: Path) -> None:
    with pytest.raises(VectorError) as raised:
        load_cases(_corpus(tmp_path, {"a.json": [PARSE, ROW], "b.json": [PARSE]}))
    assert str(raised.value) == "duplicate case IDs: parse-replay"


def test_only_a_race_that_allows_more_than_one_winner_is_contested() -> None:
    one_winner: Case = {**RACE, "expected": [{"ok": ["replay", "replay"]}]}
    assert is_contested_race(RACE)
    assert not is_contested_race(one_winner)
    assert not is_contested_race(PARSE)


def test_results_come_in_the_cases_order_each_judged_by_its_expected_replies(
    reference: SubprocessDriver,
) -> None:
    results = run_cases(reference, [TRACE, PARSE, WRONG, ROW])
    assert [(result.case_id, result.outcome) for result in results] == [
        ("trace-read-only", "passed"),
        ("parse-replay", "passed"),
        ("parse-wrongly", "failed"),
        ("row-one-each", "passed"),
    ]
    assert results[2].detail == (
        'request {"op":"parse","text":"replay"}\n'
        'replied {"ok":"replay"}\n'
        'expected {"ok":"snapshot"}'
    )


def test_a_case_with_a_judge_of_its_own_is_judged_by_it_alone(
    reference: SubprocessDriver,
) -> None:
    seen: list[dict[str, object]] = []

    def judge(reply: dict[str, object]) -> CaseResult:
        seen.append(reply)
        return CaseResult(ROW["id"], ROW["clauses"], "failed", "out of bound")

    results = run_cases(reference, [PARSE, ROW], {ROW["id"]: judge})
    assert seen == [{"ok": 10}]
    assert [result.outcome for result in results] == ["passed", "failed"]
    assert results[1].detail == "out of bound"


def test_a_contested_race_is_asked_for_its_spans(reference: SubprocessDriver) -> None:
    (result,) = run_cases(reference, [RACE])
    assert result.sent == encode({**RACE["request"], SPANS: True})
    assert result.outcome in {"passed", "not-observed"}


def test_after_the_adapter_breaks_the_rest_of_its_batch_is_not_run() -> None:
    with _driver([sys.executable, str(FAKES / "broken_adapter.py"), "crash", "parse"]) as driver:
        results = run_cases(driver, [ROW, PARSE, WRONG, TRACE])
    assert [(result.case_id, result.outcome) for result in results] == [
        ("row-one-each", "passed"),
        ("parse-replay", "failed"),
        ("parse-wrongly", "not-run"),
        ("trace-read-only", "passed"),
    ]
    assert "exited (code 3) without replying" in results[1].detail
    assert results[2].detail == "not run (the adapter broke at case parse-replay)"
