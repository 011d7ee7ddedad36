# SPDX-License-Identifier: MIT OR Apache-2.0
"""The replay operation: its requests from the replay corpus, its decoding, and its verdict."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pytest

from ssm_rollback_spec import corpus, rollback
from ssm_rollback_spec.corpus.files import VectorError
from ssm_rollback_spec.corpus.replay_run import ReplayCase, judge_replay, load_replay_cases
from ssm_rollback_spec.harness import protocol
from ssm_rollback_spec.harness.adapter import REPLAY_NOT_OFFERED, respond
from ssm_rollback_spec.harness.protocol import ErrorKind
from ssm_rollback_spec.harness.replay_wire import ENGINE_PIPELINES, ReplayLayout, decode_replay
from ssm_rollback_spec.tools.check import REPLAY_PROPERTY_CLAUSES
from tests.child import run_module
from tests.replay.shipped import shipped_replay_cases

if TYPE_CHECKING:
    from tests.replay.conftest import Generated

REPLAY: Final = Path(__file__).resolve().parents[2] / "vectors" / "replay"
# The refusals (refusals.json) are judged by their reply, not by states.
CASES: Final = [case for case in shipped_replay_cases() if case.refused is None]


def _case(prefix: str, pipeline: str, /) -> ReplayCase:
    return next(c for c in CASES if c.case_id.startswith(prefix) and c.pipeline == pipeline)


def test_every_state_case_of_the_replay_corpus_becomes_one_request() -> None:
    kinds = [case.case_id.split("-")[1] for case in CASES]
    assert kinds.count("rebuild") == 40  # 24 of the model's pipelines, 12 of the engines', 4 ggml's
    assert kinds.count("post") == 4
    assert kinds.count("rounds") == 10  # 6 of the model's pipelines, one decode per engine and ggml
    for case in (c for c in CASES if c.request["op"] == "replay"):
        decoded = decode_replay(case.request)
        assert len(decoded["rounds"]) == len(case.expected)
        assert case.request["op"] == "replay"
        post = case.case_id.startswith("replay-post-conv-")
        assert decoded["layout"] is (ReplayLayout.POST_CONV if post else ReplayLayout.PRE_CONV)
        assert len(protocol.encode_line(case.request)) < protocol.MAX_LINE_BYTES


def test_the_rounds_cases_send_every_round_with_a_draft_count_that_varies() -> None:
    for case in (c for c in CASES if c.case_id.startswith("replay-rounds-")):
        rounds = decode_replay(case.request)["rounds"]
        assert len({len(r["rows"]) for r in rounds}) > 1
        # An engine's decode runs 16 rounds, so that SGLang's ring folds several times.
        assert len(rounds) == (16 if case.pipeline in ENGINE_PIPELINES else 8)


def test_the_tolerance_is_the_one_the_case_file_states_for_its_pipeline() -> None:
    stated = json.loads((REPLAY / "rebuild.json").read_text(encoding="ascii"))["tolerance"]
    assert {"float64": {"port": 0, "kernel": 1e-12}}.items() <= stated.items()
    assert {"transformers-bf16": {"port": 0, "kernel": 1e-06}}.items() <= stated.items()
    assert sorted(stated) == sorted(("float64", "transformers-bf16", *ENGINE_PIPELINES))
    # The batches run alone state bounds of their own (batch_alone.json, RB-REPLAY-13).
    for case in (c for c in CASES if not c.alone):
        assert case.tolerance == stated[case.pipeline]["kernel"]


def test_the_python_reference_adapter_does_not_offer_replay() -> None:
    reply = respond(rollback, protocol.encode(CASES[0].request))
    assert reply == protocol.error_reply(ErrorKind.UNKNOWN_OP, REPLAY_NOT_OFFERED)
    result = judge_replay(CASES[0], reply)
    assert (result.outcome, result.detail) == ("skipped", corpus.NOT_OFFERED)


def test_a_float_that_is_not_hex_is_a_bad_request_named_by_its_path() -> None:
    request = copy.deepcopy(CASES[0].request)
    request["rounds"][0]["rows"][0]["g"][0] = "0.5"  # type: ignore[index]
    with pytest.raises(protocol.ProtocolError) as raised:
        decode_replay(request)
    assert raised.value.kind is ErrorKind.BAD_REQUEST
    assert str(raised.value) == (
        'rounds[0].rows[0].g[0] must be a finite float.hex string, got "0.5"'
    )


def test_more_accepted_rows_than_the_round_holds_is_a_bad_request() -> None:
    request = copy.deepcopy(CASES[0].request)
    request["rounds"][0]["accepted"] = 2  # type: ignore[index]
    with pytest.raises(protocol.ProtocolError) as raised:
        decode_replay(request)
    assert str(raised.value) == "rounds[0].accepted must be an integer in [1, 1], got 2"


def _reply(case: ReplayCase, /) -> dict[str, object]:
    return {"ok": {"states": copy.deepcopy(case.expected)}}


def test_the_expected_states_pass_and_are_reported_exact() -> None:
    for case in (c for c in CASES if not c.alone):
        result = judge_replay(case, _reply(case))
        assert (result.outcome, result.detail) == ("passed", "exact: every value the model's")


def test_a_value_within_the_bound_passes_and_one_past_it_fails_naming_it() -> None:
    case = _case("replay-rebuild-", "transformers-bf16")
    h: list[list[list[str]]] = case.expected[0]["h"]  # type: ignore[assignment]
    scale = max(abs(float.fromhex(v)) for head in h for row in head for v in row)
    expected = h[0][0][0]
    for factor, outcome in ((0.5, "passed"), (2.0, "failed")):
        reply = _reply(case)
        moved = float.fromhex(expected) + factor * case.tolerance * scale
        reply["ok"]["states"][0]["h"][0][0][0] = moved.hex()  # type: ignore[index]
        result = judge_replay(case, reply)
        assert result.outcome == outcome
        if outcome == "passed":
            error = abs(moved - float.fromhex(expected)) / scale
            assert result.detail == f"within 1e-06, not exact: largest relative error {error:.3g}"
    error = abs(moved - float.fromhex(expected)) / scale
    assert result.detail.splitlines()[0] == (
        f"states[0].h[0][0][0]: expected {expected}, got {moved.hex()}: relative error "
        f"{error:.3g} (of max |expected| over states[0].h) exceeds 1e-06, the bound for "
        f"transformers-bf16 ({', '.join(case.clauses)})"
    )


def test_a_float64_case_is_judged_with_the_float64_bound() -> None:
    case = _case("replay-rounds-", "float64")
    reply = _reply(case)
    expected = case.expected[3]["conv"][1][0]  # type: ignore[index]
    reply["ok"]["states"][3]["conv"][1][0] = (float.fromhex(expected) * (1 + 1e-9)).hex()  # type: ignore[index]
    detail = judge_replay(case, reply).detail
    assert detail.startswith(f"states[3].conv[1][0]: expected {expected}, got ")
    assert "exceeds 1e-12, the bound for float64 (RB-REPLAY-6, RB-REPLAY-7, RB-REPLAY-8)" in detail


def test_a_reply_with_a_state_short_fails_saying_how_many_were_expected() -> None:
    case = _case("replay-rounds-", "float64")
    reply = _reply(case)
    reply["ok"]["states"].pop()  # type: ignore[index]
    detail = judge_replay(case, reply).detail
    assert detail.splitlines()[0] == 'the reply must be {"ok": {"states": [...]}} with 8 states'


def _copy_with(tmp_path: Path, name: str, document: dict[str, object], /) -> None:
    for path in REPLAY.glob("*.json"):
        (tmp_path / path.name).write_bytes(path.read_bytes())
    text = json.dumps(document)
    (tmp_path / name).write_text(text, encoding="ascii")
    manifest = json.loads((REPLAY / "manifest.json").read_text(encoding="ascii"))
    for entry in manifest["files"]:
        if entry["path"] == name:
            entry["sha256"] = hashlib.sha256(text.encode("ascii")).hexdigest()
    (tmp_path / "manifest.json").write_text(json.dumps(manifest), encoding="ascii")


def test_a_replay_state_file_without_a_tolerance_is_refused(tmp_path: Path) -> None:
    document = json.loads((REPLAY / "post_conv.json").read_text(encoding="ascii"))
    del document["tolerance"]
    _copy_with(tmp_path, "post_conv.json", document)
    with pytest.raises(VectorError) as raised:
        load_replay_cases(tmp_path)
    assert str(raised.value) == "post_conv.json: must state its tolerance per pipeline"


def test_check_knows_which_draft_clauses_the_replay_properties_cite() -> None:
    properties = Path(__file__).parents[1] / "properties"
    source = "".join(
        (properties / name).read_text(encoding="utf-8")
        for name in ("test_replay.py", "test_model.py")
    )
    # A marker names its clauses, or a table of them (test_model.py's _CLAUSES).
    markers = re.findall(r"@pytest\.mark\.clause\(([^)]*)\)", source)
    markers += re.findall(r"\n_CLAUSES: Final = \(([^)]*)\)", source)
    cited = {clause for marker in markers for clause in re.findall(r'"(RB-REPLAY-[0-9]+)"', marker)}
    # The malformed replay requests also cite RB-PROTO-4, a normative clause.
    assert cited == REPLAY_PROPERTY_CLAUSES


def test_vectors_generate_writes_the_replay_corpus_beside_the_protocol_corpus(
    generated_vectors: Generated,
) -> None:
    out, stdout = generated_vectors
    assert (out / "manifest.json").is_file()
    written = sorted(path.name for path in (out / "replay").iterdir())
    assert written == sorted(path.name for path in REPLAY.iterdir())
    for name in written:
        assert (out / "replay" / name).read_bytes() == (REPLAY / name).read_bytes(), name
    assert f"{out / 'manifest.json'}\n" in stdout
    assert f"{out / 'replay' / 'rounds.json'}\n" in stdout


def test_vectors_where_names_the_corpus_then_the_replay_corpus() -> None:
    finished = run_module("ssm_rollback_spec.tools.cli", "vectors", "where")
    assert finished.returncode == 0, finished.stderr
    corpus, replay = finished.stdout.splitlines()
    assert Path(replay) == Path(corpus) / "replay"
    assert Path(replay).resolve() == REPLAY


def test_a_replay_case_the_protocol_cannot_decode_is_refused_by_file_and_id(
    tmp_path: Path,
) -> None:
    document = json.loads((REPLAY / "rebuild.json").read_text(encoding="ascii"))
    document["cases"][0]["ring"][0]["beta"] = ["0.5"]
    _copy_with(tmp_path, "rebuild.json", document)
    with pytest.raises(VectorError) as raised:
        load_replay_cases(tmp_path)
    assert str(raised.value) == (
        "rebuild.json: case '000-float64-k2-a1': not a replay case (rounds[0].rows[0].beta[0] "
        'must be a finite float.hex string, got "0.5")'
    )
