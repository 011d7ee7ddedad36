# SPDX-License-Identifier: MIT OR Apache-2.0
"""The model operation's round scripts (``model_rounds.json``): their shapes and their verdicts.

Each case is one ``model`` request whose ``equal`` pairs name a kept
token's logits and the same token decoded plainly in the same reply. The
verdicts are judged here on the float64 fake model
(``tests/fakes/model_adapter.py``), in process; ``vectors run`` over it and
its wrong rollbacks is the slow tier's (``test_model_rollback.py``).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Final, cast

import pytest

from ssm_rollback_spec import corpus
from ssm_rollback_spec.corpus.files import VectorError, render_corpus_files
from ssm_rollback_spec.corpus.model_cases import MODEL_FILE, model_cases
from ssm_rollback_spec.corpus.model_run import ModelCase, judge_model
from ssm_rollback_spec.harness.model_wire import ModelOffer, RollbackWay, decode_model_offer
from ssm_rollback_spec.harness.protocol import encode
from tests.fakes.model_adapter import DESCRIBE, reply

REPLAY: Final = Path(__file__).resolve().parents[2] / "vectors" / "replay"
SCRIPTS: Final = corpus.load_model_cases(REPLAY)
_OFFER: Final = decode_model_offer(DESCRIBE)
#: The counts docs/protocol-model.md ("Round scripts for vectors run") writes in words.
_WORDS: Final = {6: "six", 14: "Fourteen"}


def _case(suffix: str, /) -> ModelCase:
    return next(case for case in SCRIPTS if case.case_id.endswith(suffix))


def _offer() -> ModelOffer:
    assert _OFFER is not None
    return _OFFER


def _fake(case: ModelCase, how: str | None = None, /) -> dict[str, object]:
    return reply(encode(case.request), how)


def _script(case: ModelCase, /) -> list[dict[str, object]]:
    return cast("list[dict[str, object]]", case.request["script"])


def test_each_script_runs_both_ways_and_every_case_cites_the_model_clause() -> None:
    assert len(SCRIPTS) == len(model_cases()) == 28
    ways = [case.way for case in SCRIPTS]
    assert ways.count(RollbackWay.SNAPSHOT) == ways.count(RollbackWay.CHECKPOINT) == 14
    assert {clause for case in SCRIPTS for clause in case.clauses} == {"RB-REPLAY-14"}
    # Every case fits the fake, and so is sent to it: 16 tokens, 3 slots, depth 4.
    assert max(case.vocab for case in SCRIPTS) == 16
    assert max(case.sequences for case in SCRIPTS) == 3
    assert max(case.snapshot_depth or 0 for case in SCRIPTS) == 4


def test_llama_cpps_two_findings_are_cases_in_the_shapes_the_tier_shrank_them_to() -> None:
    # tests/llamacpp/test_rollback.py's DEVIATION_ROUNDS: sequence 2 rolled back
    # by one beside sequences 0 and 1 in one decode, then decoding on.
    beside = _case("-snapshot-beside-other-sequences")
    assert _script(beside)[:4] == [
        {"decode": [{"sequence": "s0", "tokens": [0]}]},
        {
            "decode": [
                {"sequence": "s2", "tokens": [0, 0]},
                {"sequence": "s0", "tokens": [0]},
                {"sequence": "s1", "tokens": [0]},
            ]
        },
        {"rollback": "s2", "tokens": 1},
        {"decode": [{"sequence": "s2", "tokens": [2]}]},
    ]
    # WHOLE_WINDOW_ROUNDS: a token, a window of one more rolled back whole, a token.
    whole = _case("-snapshot-whole-window")
    assert _script(whole)[:4] == [
        {"decode": [{"sequence": "a", "tokens": [0]}]},
        {"decode": [{"sequence": "a", "tokens": [0]}]},
        {"rollback": "a", "tokens": 1},
        {"decode": [{"sequence": "a", "tokens": [0]}]},
    ]
    # Its last token is judged against the second of a plain decode of [0, 0].
    assert whole.equal[-2:] == (((3, 0, 0), (7, 0, 0)), ((4, 0, 0), (8, 0, 0)))
    assert _script(whole)[6:] == [
        {"decode": [{"sequence": "plain-a", "tokens": [0]}]},
        {"decode": [{"sequence": "plain-a", "tokens": [0]}]},
        {"decode": [{"sequence": "plain-a", "tokens": [0]}]},
        {"finish": "plain-a"},
    ]
    assert {case.case_id for case in SCRIPTS} >= {
        "model-014-checkpoint-beside-other-sequences",
        "model-015-checkpoint-whole-window",
    }


def test_each_pair_names_a_kept_token_and_the_same_token_of_its_plain_decode() -> None:
    for case in SCRIPTS:
        script = _script(case)
        for (step, entry, token), (plain, plain_entry, plain_token) in case.equal:
            decoded = cast("list[dict[str, object]]", script[step]["decode"])
            alone = cast("list[dict[str, object]]", script[plain]["decode"])
            name = decoded[entry]["sequence"]
            assert (plain_entry, plain_token, len(alone)) == (0, 0, 1)
            assert alone[0]["sequence"] == f"plain-{name}"
            kept = cast("list[int]", decoded[entry]["tokens"])[token]
            assert alone[0]["tokens"] == [kept]
            # The plain decode runs after every sequence of the rounds finished.
            assert step < plain


def test_the_fake_model_passes_every_script_bit_for_bit() -> None:
    for case in SCRIPTS:
        result = judge_model(case, _offer(), _fake(case))
        assert (result.outcome, result.distance, result.bound) == ("passed", 0.0, 0.0)
        assert result.detail == (
            f"each of {len(case.equal)} kept tokens' logits a plain decode's, bit for bit"
        )


@pytest.mark.parametrize("wrong", ["other-sequence", "one-too-many", "stale-checkpoint"])
def test_each_wrong_rollback_of_the_fake_fails_some_script(wrong: str) -> None:
    failed = [
        case
        for case in SCRIPTS
        if judge_model(case, _offer(), _fake(case, wrong)).outcome == "failed"
    ]
    assert failed


def test_a_logit_past_the_bound_is_named_with_both_values() -> None:
    case = _case("-snapshot-whole-window")
    replied = _fake(case)
    changed = copy.deepcopy(replied)
    results = cast(
        "list[dict[str, list[list[list[str]]]]]",
        cast("dict[str, object]", changed["ok"])["results"],
    )
    right = float.fromhex(results[3]["logits"][0][0][5])
    results[3]["logits"][0][0][5] = (right + 0.5).hex()
    result = judge_model(case, _offer(), changed)
    assert result.outcome == "failed"
    assert (result.distance, result.bound) == (0.5, 0.0)
    plain = results[7]["logits"][0][0][5]
    first, shown = result.detail.split("\n")
    assert first == (
        f"results[3].logits[0][0], token 0 of a's window: logit 5 is {(right + 0.5).hex()}, "
        f"and results[7].logits[0][0], the same kept token decoded plainly as plain-a, gives "
        f"{plain}, 0.5 apart, past the bound 0 model 'tiny-gdn-32' declares (RB-REPLAY-14)"
    )
    assert shown.startswith('replied {"ok":{"results":[{"logits":')
    # Within a bound the adapter declares, it passes, and says how far it was.
    within = ModelOffer(**{**_offer(), "bound": 0.5})
    passed = judge_model(case, within, changed)
    assert (passed.outcome, passed.detail) == (
        "passed",
        "each of 3 kept tokens' logits a plain decode's, within 0.5: 0.5 at most",
    )


def test_a_refused_rollback_fails_for_every_rollback_is_offered() -> None:
    case = _case("-snapshot-whole-window")
    changed = copy.deepcopy(_fake(case))
    results = cast("list[dict[str, object]]", cast("dict[str, object]", changed["ok"])["results"])
    results[2] = {"accepted": False}
    result = judge_model(case, _offer(), changed)
    assert result.outcome == "failed"
    assert result.detail.split("\n")[0] == (
        "results[2]: the rollback of 1 of a's tokens was refused, though the model offers it "
        "(right after the sequence's decode, within what it appended and the snapshot depth)"
    )


def test_a_malformed_reply_fails_naming_the_field() -> None:
    case = _case("-snapshot-whole-window")
    result = judge_model(case, _offer(), {"ok": {"results": []}})
    assert (result.outcome, result.detail) == (
        "failed",
        (
            'the reply is not {"ok": {"results": [...]}}, one per step: the reply\'s ok must '
            "be an object whose results are a list of 10 results, one per step, got "
            '{"results": []}\nreplied {"ok":{"results":[]}}'
        ),
    )


def test_an_adapter_that_answers_unknown_op_does_not_offer_the_scripts() -> None:
    case = SCRIPTS[0]
    refused: dict[str, object] = {"error": {"kind": "unknown-op", "message": 'unknown op "model"'}}
    result = judge_model(case, _offer(), refused)
    assert (result.outcome, result.detail) == (
        "skipped",
        "not offered: the adapter answered unknown-op to model",
    )


def _described(**changes: object) -> dict[str, object]:
    return {
        "ok": {**DESCRIBE, "model": {**cast("dict[str, object]", DESCRIBE["model"]), **changes}}
    }


@pytest.mark.parametrize(
    ("changes", "case", "detail"),
    [
        pytest.param(
            {"rollback": ["snapshot"]},
            "-checkpoint-whole-window",
            "not offered: the adapter's model does not list rollback way checkpoint",
            id="way",
        ),
        pytest.param(
            {"vocab": 2},
            "-snapshot-beside-other-sequences",
            "not offered: the case needs a vocabulary of 3, the adapter's model has 2",
            id="vocab",
        ),
        pytest.param(
            {"sequences": 2},
            "-snapshot-beside-other-sequences",
            "not offered: the case needs 3 sequences at once, the adapter's model holds 2",
            id="sequences",
        ),
        pytest.param(
            {"snapshot_depth": 3},
            "-snapshot-depth-four",
            "not offered: the case needs a snapshot depth of 4, the adapter's model reaches 3",
            id="depth",
        ),
    ],
)
def test_a_script_the_model_cannot_take_is_skipped_with_the_reason(
    changes: dict[str, object], case: str, detail: str
) -> None:
    judges, skipped = corpus.model_judges([_case(case)], _described(**changes))
    assert judges == {}
    assert [(result.outcome, result.detail) for result in skipped] == [("skipped", detail)]


def test_a_describe_without_a_model_is_sent_no_script_and_a_bad_one_fails_them() -> None:
    judges, skipped = corpus.model_judges(SCRIPTS[:2], {"ok": {"name": "x", "usize_bits": 64}})
    assert judges == {}
    assert {result.detail for result in skipped} == {
        "not offered: the adapter's describe names no model"
    }
    judges, failed = corpus.model_judges(SCRIPTS[:1], _described(vocab=0))
    assert judges == {}
    assert [(result.outcome, result.detail) for result in failed] == [
        (
            "failed",
            (
                'the describe\'s "model" member is not as docs/protocol-model.md says: '
                "describe's model.vocab must be an integer in [1, 262144], got 0"
            ),
        )
    ]
    judges, none = corpus.model_judges(SCRIPTS, {"ok": DESCRIBE})
    assert (len(judges), none) == (len(SCRIPTS), [])


def _corpus_with(tmp_path: Path, edit: dict[str, object], /) -> Path:
    document = json.loads((REPLAY / MODEL_FILE).read_text(encoding="ascii"))
    cases = cast("list[dict[str, object]]", document["cases"])
    cases[1] = {**cases[1], **edit}
    texts = render_corpus_files({"spec_version": "1.0.0"}, {MODEL_FILE: document})
    for name, text in texts.items():
        (tmp_path / name).write_text(text, encoding="ascii")
    return tmp_path


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        pytest.param(
            {"equal": [[[1, 0, 1], [6, 0, 0]]]},
            "its pair [[1, 0, 1], [6, 0, 0]] names no row",
            id="no-row",
        ),
        pytest.param(
            {"equal": [[[2, 0, 0], [6, 0, 0]]]},
            "its pair [[2, 0, 0], [6, 0, 0]] names no row",
            id="a-rollback",
        ),
        pytest.param(
            {"needs": {"vocab": 1, "sequences": 1, "snapshot_depth": 0}},
            "describe's model.snapshot_depth must be an integer in [1, 4096], got 0",
            id="depth",
        ),
        pytest.param(
            {"clauses": ["RB-REPLAY-99"]},
            "it cites clauses SPEC.md does not have: ['RB-REPLAY-99']",
            id="clause",
        ),
        pytest.param({"equal": []}, "it must name at least one pair of rows", id="no-pair"),
    ],
)
def test_a_script_that_breaks_the_format_is_named_by_file_and_id(
    tmp_path: Path, edit: dict[str, object], problem: str
) -> None:
    with pytest.raises(VectorError) as raised:
        corpus.load_model_cases(_corpus_with(tmp_path, edit))
    assert str(raised.value) == (
        f"model_rounds.json: case '001-snapshot-whole-window': not a round script ({problem})"
    )


def test_a_script_with_tokens_past_what_it_needs_is_refused(tmp_path: Path) -> None:
    with pytest.raises(VectorError) as raised:
        corpus.load_model_cases(_corpus_with(tmp_path, {
            "needs": {"vocab": 1, "sequences": 1, "snapshot_depth": 1},
            "request": {
                "op": "model", "rollback": "snapshot",
                "script": [{"decode": [{"sequence": "a", "tokens": [1]}]}],
            },
        }))  # fmt: skip
    assert str(raised.value) == (
        "model_rounds.json: case '001-snapshot-whole-window': not a round script (its request "
        "is refused for what it needs: script[0].decode[0].tokens[0] must be a token in "
        "[0, 0], got 1)"
    )


def test_the_protocol_page_states_the_scripts_counts_and_needs() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "protocol-model.md").read_text("utf-8")
    scripts = len(SCRIPTS) // 2
    drawn = sum("-drawn-" in case.case_id for case in SCRIPTS) // 2
    phrases = [
        f"`vectors/replay/model_rounds.json` (RB-REPLAY-14,\n{len(SCRIPTS)} cases)",
        f"{_WORDS[scripts]}\nscripts run both ways",
        # The two shapes of llama.cpp's findings, then the rest by hand.
        f"{_WORDS[scripts - drawn - 2]} more written by hand",
        f"and {_WORDS[drawn]} drawn from a\nfixed seed",
        (
            f"a vocabulary of at most {max(case.vocab for case in SCRIPTS)}, at most "
            f"{max(case.sequences for case in SCRIPTS)}\nsequences, a snapshot depth of at most "
            f"{max(case.snapshot_depth or 0 for case in SCRIPTS)}"
        ),
    ]
    # Compared reflowed: a paragraph's line breaks are the page's own.
    flowed = " ".join(page.split())
    assert [phrase for phrase in phrases if " ".join(phrase.split()) not in flowed] == []
