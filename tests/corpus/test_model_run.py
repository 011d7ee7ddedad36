# SPDX-License-Identifier: MIT OR Apache-2.0
"""The model runner's loader and judge, each read and called inside its test.

tests/replay/test_model_vectors.py judges the shipped round scripts it reads
once, as the module is imported; these tests load the corpus themselves, so
that what the loader builds is checked as it runs, and pin every field of the
results the judge gives.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Final, cast

import pytest

from ssm_rollback_spec import corpus
from ssm_rollback_spec.corpus.files import VectorError, render_corpus_files
from ssm_rollback_spec.corpus.model_cases import MODEL_FILE
from ssm_rollback_spec.corpus.model_run import (
    MODEL_NOT_DESCRIBED,
    MODEL_NOT_OFFERED,
    ModelCase,
    _row,
    _shown,
    judge_model,
)
from ssm_rollback_spec.corpus.protocol_run import CaseResult
from ssm_rollback_spec.harness.model_wire import ModelOffer, RollbackWay, decode_model_offer
from ssm_rollback_spec.harness.protocol import encode
from tests.fakes.model_adapter import DESCRIBE, reply

if TYPE_CHECKING:
    from ssm_rollback_spec.corpus.protocol_cases import Case

REPLAY: Final = Path(__file__).resolve().parents[2] / "vectors" / "replay"
_WHOLE: Final = "model-001-snapshot-whole-window"
_CLAUSES: Final = ["RB-REPLAY-14"]


def _one_file(directory: Path, edit: dict[str, object], /) -> Path:
    document = json.loads((REPLAY / MODEL_FILE).read_text(encoding="ascii"))
    cases = cast("list[dict[str, object]]", document["cases"])
    cases[1] = {**cases[1], **edit}
    texts = render_corpus_files({"spec_version": "1.0.0"}, {MODEL_FILE: document})
    for name, text in texts.items():
        (directory / name).write_text(text, encoding="ascii")
    return directory


@pytest.fixture(name="scripts")
def _scripts(tmp_path: Path) -> list[ModelCase]:
    # Loaded inside each test from a copy of the shipped file alone, so that
    # the loader runs with the test, and quickly.
    return corpus.load_model_cases(_one_file(tmp_path, {}))


def _offer(**changes: object) -> ModelOffer:
    member = {**cast("dict[str, object]", DESCRIBE["model"]), **changes}
    offer = decode_model_offer({"model": member})
    assert offer is not None
    return offer


def _whole(scripts: list[ModelCase], /) -> ModelCase:
    return next(case for case in scripts if case.case_id == _WHOLE)


def _fake(case: ModelCase, /) -> dict[str, object]:
    return reply(encode(case.request), None)


def _results(replied: dict[str, object], /) -> list[dict[str, object]]:
    return cast("list[dict[str, object]]", cast("dict[str, object]", replied["ok"])["results"])


def test_the_shipped_round_scripts_load_as_each_case_states_them() -> None:
    # The whole replay corpus: the round scripts' file is its last.
    loaded = corpus.load_model_cases(REPLAY)
    document = json.loads((REPLAY / MODEL_FILE).read_text(encoding="ascii"))
    written = cast("list[dict[str, object]]", document["cases"])
    assert [case.case_id for case in loaded] == [f"model-{case['id']}" for case in written]
    whole = _whole(loaded)
    assert (whole.clauses, whole.way, whole.vocab, whole.sequences, whole.snapshot_depth) == (
        _CLAUSES,
        RollbackWay.SNAPSHOT,
        1,
        1,
        1,
    )
    assert whole.request == written[1]["request"]
    assert whole.equal == (((0, 0, 0), (6, 0, 0)), ((3, 0, 0), (7, 0, 0)), ((4, 0, 0), (8, 0, 0)))
    checkpoint = next(case for case in loaded if case.way is RollbackWay.CHECKPOINT)
    assert checkpoint.snapshot_depth is None


def _problem(directory: Path, edit: dict[str, object], /) -> str:
    with pytest.raises(VectorError) as raised:
        corpus.load_model_cases(_one_file(directory, edit))
    prefix = "model_rounds.json: case '001-snapshot-whole-window': not a round script ("
    message = str(raised.value)
    assert message.startswith(prefix)
    assert message.endswith(")")
    return message[len(prefix) : -1]


def _checkpoint(**changes: object) -> dict[str, object]:
    script = [{"decode": [{"sequence": "a", "tokens": [0]}]}, {"finish": "a"}]
    return {
        "needs": {"vocab": 1, "sequences": 1},
        "request": {"op": "model", "rollback": "checkpoint", "script": script},
        "equal": [[[0, 0, 0], [0, 0, 0]]],
    } | changes


def test_a_checkpoint_script_loads_and_one_that_needs_a_snapshot_depth_is_refused(
    tmp_path: Path,
) -> None:
    (loaded,) = [
        case
        for case in corpus.load_model_cases(_one_file(tmp_path, _checkpoint()))
        if case.case_id == _WHOLE
    ]
    assert (loaded.way, loaded.snapshot_depth) == (RollbackWay.CHECKPOINT, None)
    deep = _checkpoint(needs={"vocab": 1, "sequences": 1, "snapshot_depth": 1})
    assert _problem(tmp_path, deep) == "a checkpoint case needs no snapshot depth"


def test_a_script_of_another_operation_is_named(tmp_path: Path) -> None:
    request = cast("dict[str, object]", _checkpoint()["request"]) | {"op": "replay"}
    assert _problem(tmp_path, _checkpoint(request=request)) == (
        "its request must be a model request"
    )


def test_a_script_that_cannot_be_sent_as_utf8_is_refused(tmp_path: Path) -> None:
    script = [{"decode": [{"sequence": "\ud800", "tokens": [0]}]}, {"finish": "\ud800"}]
    request = {"op": "model", "rollback": "checkpoint", "script": script}
    assert "lone surrogate" in _problem(tmp_path, _checkpoint(request=request))


@pytest.mark.parametrize(
    "pair",
    [
        pytest.param([[2, 0, 0], [0, 0, 0]], id="step-one-past-the-script"),
        pytest.param([[0, 1, 0], [0, 0, 0]], id="entry-one-past-the-decode"),
        pytest.param([[0, 0, 1], [0, 0, 0]], id="token-one-past-the-entry"),
        pytest.param([[-1, 0, 0], [0, 0, 0]], id="step-before-the-script"),
    ],
)
def test_a_pair_just_past_the_script_names_no_row(tmp_path: Path, pair: list[list[int]]) -> None:
    assert _problem(tmp_path, _checkpoint(equal=[pair])) == (
        f"its pair {json.dumps(pair)} names no row"
    )


@pytest.mark.parametrize(
    ("row", "shown"),
    [([0, 0], "[0, 0]"), (7, "7"), ("abc", '"abc"'), ([0, 0, True], "[0, 0, true]")],
)
def test_a_row_of_another_shape_is_named(row: object, shown: str) -> None:
    with pytest.raises(TypeError) as raised:
        _row(row)
    assert str(raised.value) == f"a row must be [step, entry, token], got {shown}"


def test_a_case_whose_id_is_not_a_text_is_named_by_its_index(tmp_path: Path) -> None:
    document = json.loads((REPLAY / MODEL_FILE).read_text(encoding="ascii"))
    cases = cast("list[dict[str, object]]", document["cases"])
    cases[0] = {**cases[0], "id": 5, "equal": []}
    texts = render_corpus_files({"spec_version": "1.0.0"}, {MODEL_FILE: document})
    for name, text in texts.items():
        (tmp_path / name).write_text(text, encoding="ascii")
    with pytest.raises(VectorError) as raised:
        corpus.load_model_cases(tmp_path)
    assert str(raised.value) == (
        "model_rounds.json: cases[0]: not a round script (it must name at least one pair of rows)"
    )


def test_a_case_that_is_not_an_object_is_named_by_its_index(tmp_path: Path) -> None:
    document = json.loads((REPLAY / MODEL_FILE).read_text(encoding="ascii"))
    cast("list[object]", document["cases"])[0] = ["a list"]
    texts = render_corpus_files({"spec_version": "1.0.0"}, {MODEL_FILE: document})
    for name, text in texts.items():
        (tmp_path / name).write_text(text, encoding="ascii")
    with pytest.raises(VectorError) as raised:
        corpus.load_model_cases(tmp_path)
    assert str(raised.value).startswith("model_rounds.json: cases[0]: not a round script (")


def test_the_round_scripts_as_corpus_cases_carry_id_clauses_and_request(
    scripts: list[ModelCase],
) -> None:
    expected: list[Case] = [
        {"id": case.case_id, "clauses": case.clauses, "request": case.request, "expected": []}
        for case in scripts[:2]
    ]
    assert corpus.model_as_cases(scripts[:2]) == expected


def test_a_model_as_large_as_the_case_needs_takes_it(scripts: list[ModelCase]) -> None:
    case = next(case for case in scripts if case.vocab > 1 and case.way is RollbackWay.SNAPSHOT)
    depth = case.snapshot_depth
    assert depth is not None
    offer = {"vocab": case.vocab, "sequences": case.sequences, "snapshot_depth": depth}
    judges, skipped = corpus.model_judges([case], {"ok": {**DESCRIBE, "model": {
        **cast("dict[str, object]", DESCRIBE["model"]), **offer
    }}})  # fmt: skip
    assert (list(judges), skipped) == ([case.case_id], [])


def test_each_judge_of_an_offered_script_judges_that_script(scripts: list[ModelCase]) -> None:
    judges, skipped = corpus.model_judges(scripts[:2], {"ok": DESCRIBE})
    assert skipped == []
    for case in scripts[:2]:
        result = judges[case.case_id](_fake(case))
        assert (result.case_id, result.clauses, result.outcome) == (
            case.case_id,
            case.clauses,
            "passed",
        )


def test_a_describe_with_no_model_skips_each_case_by_its_id(scripts: list[ModelCase]) -> None:
    for described in ({}, {"ok": "a text"}, {"ok": {"name": "x"}}):
        judges, skipped = corpus.model_judges(scripts[:2], described)
        assert judges == {}
        assert skipped == [
            CaseResult(case.case_id, case.clauses, "skipped", MODEL_NOT_DESCRIBED)
            for case in scripts[:2]
        ]


def test_a_model_of_another_shape_fails_each_case_by_its_id(scripts: list[ModelCase]) -> None:
    judges, failed = corpus.model_judges(scripts[:2], {"ok": {"model": 3}})
    assert judges == {}
    detail = (
        'the describe\'s "model" member is not as docs/protocol-model.md says: '
        "describe's model must be an object, got 3"
    )
    assert failed == [
        CaseResult(case.case_id, case.clauses, "failed", detail) for case in scripts[:2]
    ]


def test_a_script_past_the_model_is_skipped_by_its_id(scripts: list[ModelCase]) -> None:
    case = _whole(scripts)
    judges, skipped = corpus.model_judges([case], {"ok": {**DESCRIBE, "model": {
        **cast("dict[str, object]", DESCRIBE["model"]), "rollback": ["checkpoint"]
    }}})  # fmt: skip
    assert judges == {}
    detail = "not offered: the adapter's model does not list rollback way snapshot"
    assert skipped == [CaseResult(case.case_id, _CLAUSES, "skipped", detail)]


def test_the_judge_names_its_case_in_every_outcome(scripts: list[ModelCase]) -> None:
    case = _whole(scripts)
    offer = _offer()
    replied = _fake(case)
    passed = judge_model(case, offer, replied)
    detail = "each of 3 kept tokens' logits a plain decode's, bit for bit"
    assert passed == CaseResult(_WHOLE, _CLAUSES, "passed", detail, 0.0, 0.0)
    unknown: dict[str, object] = {"error": {"kind": "unknown-op", "message": "no"}}
    assert judge_model(case, offer, unknown) == CaseResult(
        _WHOLE, _CLAUSES, "skipped", MODEL_NOT_OFFERED
    )
    internal: dict[str, object] = {"error": {"kind": "internal", "message": "no"}}
    assert judge_model(case, offer, internal) == CaseResult(
        _WHOLE,
        _CLAUSES,
        "failed",
        'the reply is not {"ok": {"results": [...]}}, one per step: the reply must be ok\n'
        'replied {"error":{"kind":"internal","message":"no"}}',
    )
    refused = copy.deepcopy(replied)
    _results(refused)[2] = {"accepted": False}
    result = judge_model(case, offer, refused)
    assert (result.case_id, result.clauses, result.outcome) == (_WHOLE, _CLAUSES, "failed")
    assert result.detail.split("\n")[1] == f"replied {_shown(refused)}"
    apart = copy.deepcopy(replied)
    logits = cast("list[list[list[str]]]", _results(apart)[3]["logits"])
    logits[0][0][5] = (float.fromhex(logits[0][0][5]) + 0.5).hex()
    result = judge_model(case, offer, apart)
    assert (result.case_id, result.clauses, result.outcome) == (_WHOLE, _CLAUSES, "failed")


def test_a_pair_past_the_bound_names_every_clause_of_its_case(scripts: list[ModelCase]) -> None:
    case = dataclasses.replace(_whole(scripts), clauses=["RB-REPLAY-14", "RB-REPLAY-1"])
    apart = copy.deepcopy(_fake(case))
    logits = cast("list[list[list[str]]]", _results(apart)[3]["logits"])
    logits[0][0][5] = (float.fromhex(logits[0][0][5]) + 0.5).hex()
    result = judge_model(case, _offer(), apart)
    assert result.detail.split("\n")[0].endswith(
        "past the bound 0 model 'tiny-gdn-32' declares (RB-REPLAY-14, RB-REPLAY-1)"
    )


def test_a_reply_is_shown_whole_up_to_300_characters_and_cut_past_them() -> None:
    # {"a":"..."} is 8 characters and the text.
    exactly: dict[str, object] = {"a": "x" * 292}
    assert _shown(exactly) == encode(exactly)
    longer: dict[str, object] = {"a": "x" * 293}
    assert _shown(longer) == encode(longer)[:297] + "..."
    assert len(_shown(longer)) == 300
