# SPDX-License-Identifier: MIT OR Apache-2.0
"""The refusal vectors (``refusals.json``) and the batches at the protocol's size.

Each ``bad-request`` rule of ``replay`` and ``replay_batch`` is a case at its
bound, answered with the model's states, and one past it, refused; a pool
of 4,096 slots in ``batch.json`` and in check's drawn batches catches an
adapter that keeps slot indices in 8 bits.
"""

from __future__ import annotations

import copy
import json
import sys
from typing import TYPE_CHECKING, Any, Final

import pytest

from ssm_rollback_spec.corpus.replay_run import (
    FORM_LISTED,
    ReplayOffer,
    judge_replay,
    not_offered,
)
from ssm_rollback_spec.harness import protocol
from ssm_rollback_spec.harness.protocol import ErrorKind
from ssm_rollback_spec.harness.replay_wire import decode_replay, decode_replay_batch
from tests.child import run_module
from tests.properties.replay_reference import SMALL_REPLAY
from tests.replay.shipped import shipped_replay_cases

if TYPE_CHECKING:
    from pathlib import Path

    from ssm_rollback_spec.corpus.replay_run import ReplayCase

_EVERY: Final = shipped_replay_cases()
REFUSALS: Final = [case for case in _EVERY if case.refused is not None]
_BATCH_ADAPTER: Final = f"{sys.executable} -m tests.fakes.replay_batch_adapter"
_WIDE: Final = "replay-batch-028-float64-a-pool-of-4096-slots-with-long-names"
_DRAWN: Final = "test_replay.py::test_each_sequence_of_a_drawn_batch_is_its_own_replay_alone"


def _rule(case: ReplayCase, /) -> str:
    # "replay-refusal-012-replay-value-heads-a-multiple-past" -> "replay-value-heads-a-multiple"
    name = case.case_id.split("-", 3)[3]
    return name.rpartition("-")[0] if name.endswith(("-at", "-past")) else name


def test_every_rule_has_a_case_past_it_and_each_bound_of_its_own_is_answered() -> None:
    past = {_rule(case) for case in REFUSALS if case.refused}
    at = {_rule(case) for case in REFUSALS if case.refused is False}
    assert (len(REFUSALS), len(past), len(at)) == (70, 55, 15)
    assert at <= past
    # The bounds the page states, each at it and one past it.
    assert {
        "replay-value-head-dim-4096",
        "replay-accepted-all",
        "replay-largest-finite",
        "batch-slots-4096",
        "batch-last-slot",
        "batch-name-64-ascii",
        "batch-name-64-non-ascii",
        "batch-accepted-all",
        "batch-slot-freed-after-its-step",
    } <= at
    for case in REFUSALS:
        assert (case.pipeline, case.layout) == ("float64", "pre-conv")
        # The protocol's refusal and the operation's clause: --clause RB-REPLAY sends it.
        opened = "RB-REPLAY-1" if case.request["op"] == "replay" else "RB-REPLAY-12"
        assert case.clauses == ["RB-PROTO-4", opened]
        assert bool(case.expected) is not case.refused
        assert len(protocol.encode_line(case.request)) < protocol.MAX_LINE_BYTES


def test_a_name_of_64_characters_is_counted_in_code_points_not_bytes() -> None:
    [at] = [c for c in REFUSALS if c.case_id.endswith("batch-name-64-non-ascii-at")]
    decoded = decode_replay_batch(at.request)
    name = decoded["steps"][0][0]["sequence"]
    assert (len(name), len(name.encode("utf-8"))) == (64, 128)


def test_a_refusal_is_passed_by_bad_request_with_any_message_and_failed_by_states() -> None:
    [case] = [c for c in REFUSALS if c.case_id.endswith("batch-slot-held-past")]
    refused = judge_replay(case, {"error": {"kind": "bad-request", "message": "slot taken"}})
    assert (refused.outcome, refused.detail) == ("passed", "refused as bad-request")
    accepted = judge_replay(case, {"ok": {"states": []}})
    assert accepted.outcome == "failed"
    assert accepted.detail == (
        "the request breaks a rule of docs/protocol.md, so the only allowed reply is "
        '{"error":{"kind":"bad-request"}} (any message)\nreplied {"ok":{"states":[]}}'
    )
    skipped = judge_replay(case, {"error": {"kind": "unknown-op", "message": "no batch"}})
    assert (skipped.outcome, skipped.detail) == (
        "skipped",
        "not offered: the adapter answered unknown-op to replay_batch",
    )


def test_a_prompt_chunk_is_a_refusal_only_for_an_adapter_without_the_form() -> None:
    [chunk] = [case for case in REFUSALS if case.without_form is not None]
    without = ReplayOffer(frozenset({"float64"}), frozenset({"pre-conv"}), frozenset())
    listing = ReplayOffer(
        frozenset({"float64"}),
        frozenset({"pre-conv"}),
        frozenset(),
        batch=frozenset({"prompt-chunks"}),
    )
    assert not_offered(chunk, None) is None
    assert not_offered(chunk, without) is None
    assert not_offered(chunk, listing) == FORM_LISTED.format("prompt-chunks")
    # A prefill after a verify is a refusal with the form too: sent to every adapter.
    [after] = [c for c in REFUSALS if c.case_id.endswith("batch-prefill-after-a-verify-past")]
    assert not_offered(after, listing) is None
    assert not_offered(after, without) is None


def test_a_conv_kernel_of_one_is_a_bad_request_even_with_matrices_of_its_shape() -> None:
    request: dict[str, Any] = copy.deepcopy(SMALL_REPLAY)
    request["dims"] = dict(request["dims"], conv_kernel=1)
    request["conv_weight"] = [["0x1p-1"]] * 3
    request["checkpoint"]["conv"] = [[]] * 3
    with pytest.raises(protocol.ProtocolError) as raised:
        decode_replay(request)
    assert (raised.value.kind, str(raised.value)) == (
        ErrorKind.BAD_REQUEST,
        "dims.conv_kernel must be an integer in [2, 4096], got 1",
    )


def test_the_shipped_pool_of_4096_slots_reaches_past_255_and_its_last_slot() -> None:
    [wide] = [case for case in _EVERY if case.case_id == _WIDE]
    decoded = decode_replay_batch(wide.request)
    slots = {entry["slot"] for step in decoded["steps"] for entry in step}
    names = {entry["sequence"] for step in decoded["steps"] for entry in step}
    assert decoded["slots"] == 4096
    assert {0, 255, 256, 300, 4095} == slots
    assert max(len(name) for name in names) == 64
    # Each of accepts 1 to 4 of a window of 4 is followed by a step sat out.
    first, second = decoded["steps"][0], decoded["steps"][1]
    assert sorted(entry["accepted"] for entry in first) == [1, 2, 3, 4]
    assert {entry["sequence"] for entry in first}.isdisjoint(e["sequence"] for e in second)


def _vectors_run(tmp_path: Path, command: str, /) -> dict[str, str]:
    report = tmp_path / "run.json"
    finished = run_module(
        "ssm_rollback_spec.tools.cli", "vectors", "run", "--impl-cmd", command,
        "--json", str(report), timeout=600,
    )  # fmt: skip
    assert finished.returncode in {0, 1}, finished.stdout[-3000:] + finished.stderr
    document: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    return {case["id"]: case["outcome"] for case in document["cases"]}


@pytest.mark.slow
def test_the_right_float64_batch_fake_passes_every_refusal_and_the_wide_pool(
    tmp_path: Path,
) -> None:
    outcomes = _vectors_run(tmp_path, _BATCH_ADAPTER)
    refusals = {case.case_id: outcomes[case.case_id] for case in REFUSALS}
    # It lists prompt-chunks, so the prompt chunk is not a refusal for it.
    assert sorted(set(refusals.values())) == ["passed", "skipped"]
    assert [case for case, outcome in refusals.items() if outcome == "skipped"] == [
        "replay-refusal-069-batch-prompt-chunk-without-the-form"
    ]
    assert outcomes[_WIDE] == "passed"
    assert "failed" not in outcomes.values()


@pytest.mark.slow
def test_a_batch_adapter_that_accepts_malformed_batches_fails_vectors_run(
    tmp_path: Path,
) -> None:
    outcomes = _vectors_run(tmp_path, f"{_BATCH_ADAPTER} accepts-malformed")
    failed = {case for case, outcome in outcomes.items() if outcome == "failed"}
    batch_past = {c.case_id for c in REFUSALS if c.refused and "-batch-" in c.case_id}
    assert failed == batch_past - {"replay-refusal-069-batch-prompt-chunk-without-the-form"}


@pytest.mark.slow
def test_an_adapter_with_8_bit_slot_indices_fails_vectors_run_and_check(tmp_path: Path) -> None:
    command = f"{_BATCH_ADAPTER} slot-8-bits"
    outcomes = _vectors_run(tmp_path, command)
    assert {case for case, outcome in outcomes.items() if outcome == "failed"} == {_WIDE}
    report = tmp_path / "check.json"
    finished = run_module(
        "ssm_rollback_spec.tools.cli", "check", "--clause", "RB-REPLAY", "--json", str(report),
        "--impl-cmd", command, "-k", _DRAWN.rpartition("::")[2], timeout=600,
    )  # fmt: skip
    assert finished.returncode == 1, finished.stdout[-3000:] + finished.stderr
    document: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    assert {row["property"]: row["outcome"] for row in document["properties"]} == {_DRAWN: "failed"}


@pytest.mark.slow
def test_the_rust_adapter_passes_every_refusal_it_is_sent(
    tmp_path: Path, rust_adapter: str
) -> None:
    outcomes = _vectors_run(tmp_path, rust_adapter)
    refusals = {outcomes[case.case_id] for case in REFUSALS}
    assert refusals == {"passed"}
    assert outcomes[_WIDE] == "passed"
