# SPDX-License-Identifier: MIT OR Apache-2.0
"""The replay_batch operation: the batch vectors' requests, their decoding, and the verdict."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Final, cast

import pytest

from ssm_rollback_spec import rollback
from ssm_rollback_spec.corpus.replay_run import BATCH_NOT_OFFERED, judge_replay
from ssm_rollback_spec.harness import protocol
from ssm_rollback_spec.harness.adapter import REPLAY_BATCH_NOT_OFFERED, respond
from ssm_rollback_spec.harness.protocol import ErrorKind
from ssm_rollback_spec.harness.replay_wire import (
    BatchForm,
    batch_forms,
    decode_replay_batch,
    rerouted_entries,
)
from tests.properties.replay_reference import SMALL_DIMS, SMALL_REPLAY
from tests.replay.shipped import shipped_replay_cases

if TYPE_CHECKING:
    from ssm_rollback_spec.corpus.replay_run import ReplayCase

BATCHES: Final = [
    c for c in shipped_replay_cases() if c.request["op"] == "replay_batch" and c.refused is None
]

_ZERO: Final = "0x0p+0"
_ROW: Final = {"qkv": ["0x1p-2", "0x1p-1", "0x1p+0"], "g": ["-0x1p-3"], "beta": ["0x1p-1"]}
_STATE: Final = {"conv": [[_ZERO], [_ZERO], [_ZERO]], "h": [[[_ZERO]]]}


def _entry(sequence: str, slot: int, /, **more: object) -> dict[str, object]:
    return {"sequence": sequence, "slot": slot, "rows": [_ROW, _ROW], "accepted": 1} | more


def _request(*steps: list[dict[str, object]], slots: int = 2) -> dict[str, object]:
    return {
        "op": "replay_batch",
        "pipeline": "float64",
        "dims": SMALL_DIMS,
        "conv_weight": SMALL_REPLAY["conv_weight"],
        "slots": slots,
        "steps": [{"batch": batch} for batch in steps],
    }


def _joins(sequence: str, slot: int, /, **more: object) -> dict[str, object]:
    return _entry(sequence, slot, checkpoint=_STATE, **more)


def test_every_batch_case_becomes_one_request_with_a_state_per_entry() -> None:
    # Six batches (five named shapes and a drawn one) in each of the model's two
    # pipelines and each engine's whose adapter offers replay_batch (vLLM, SGLang),
    # then two prompt shapes and a pool of 4,096 slots in the model's two
    # pipelines, and a prefix-cache hit in vLLM's; and the batches run alone:
    # three plans in those four pipelines.
    judged = [case for case in BATCHES if not case.alone]
    alone = [case for case in BATCHES if case.alone]
    assert (len(judged), len(alone)) == (31, 12)
    for case in judged:
        decoded = decode_replay_batch(case.request)
        assert len(case.expected) == sum(len(batch) for batch in decoded["steps"])
        assert case.layout == "pre-conv"
        assert case.clauses == ["RB-REPLAY-12"]
        assert len(protocol.encode_line(case.request)) < protocol.MAX_LINE_BYTES
    for case in alone:
        decoded = decode_replay_batch(case.request)
        names = [entry["sequence"] for batch in decoded["steps"] for entry in batch]
        assert case.expected == []
        assert case.clauses == ["RB-REPLAY-13"]
        # Every entry of the batch is paired with itself alone, under its -alone name.
        assert sorted(first for first, _ in case.alone) == list(range(len(case.alone)))
        assert all(names[j] == f"{names[i]}-alone" for i, j in case.alone)
        assert len(protocol.encode_line(case.request)) < protocol.MAX_LINE_BYTES


def test_a_slot_freed_by_a_finish_is_taken_by_a_new_sequence_the_next_step() -> None:
    request = _request(
        [_joins("a", 0, finish=True), _joins("b", 1, prefill=[_ROW])],
        [_joins("c", 0), _entry("b", 1, finish=True)],
    )
    decoded = decode_replay_batch(request)
    assert [[e["sequence"] for e in batch] for batch in decoded["steps"]] == [
        ["a", "b"],
        ["c", "b"],
    ]
    assert [e["finish"] for e in decoded["steps"][0]] == [True, False]
    assert decoded["steps"][0][1]["prefill"][0]["values"] == [0.25, 0.5, 1.0]
    assert "checkpoint" not in decoded["steps"][1][1]


def test_a_prompt_split_over_steps_is_decoded_as_chunks_beside_verifies() -> None:
    chunk = {"sequence": "b", "slot": 1, "prefill": [_ROW, _ROW]}
    request = _request(
        [_joins("a", 0), chunk | {"checkpoint": _STATE}],
        [_entry("a", 0), chunk],
        [_entry("a", 0), _entry("b", 1, prefill=[_ROW])],
    )
    decoded = decode_replay_batch(request)
    prompt = [decoded["steps"][0][1], decoded["steps"][1][1]]
    assert [(e["rows"], e["accepted"], len(e["prefill"])) for e in prompt] == [([], 0, 2)] * 2
    assert "checkpoint" in prompt[0]
    assert "checkpoint" not in prompt[1]
    last = decoded["steps"][2][1]
    assert (len(last["prefill"]), len(last["rows"]), last["accepted"]) == (1, 2, 1)


def test_the_python_reference_adapter_does_not_offer_replay_batch() -> None:
    reply = respond(rollback, protocol.encode(BATCHES[0].request))
    assert reply == protocol.error_reply(ErrorKind.UNKNOWN_OP, REPLAY_BATCH_NOT_OFFERED)
    result = judge_replay(BATCHES[0], reply)
    assert (result.outcome, result.detail) == ("skipped", BATCH_NOT_OFFERED)


_BAD: Final = {
    "a slot two sequences join": (
        _request([_joins("a", 0), _joins("b", 0)]),
        'steps[0].batch[1].slot: slot 0 is held by sequence "a"',
    ),
    "a slot still held": (
        _request([_joins("a", 0)], [_joins("b", 0)]),
        'steps[1].batch[0].slot: slot 0 is held by sequence "a"',
    ),
    "a first entry without a checkpoint": (
        _request([_entry("a", 0)]),
        'steps[0].batch[0].checkpoint is required: sequence "a" joins here',
    ),
    "a sequence that joins twice": (
        _request([_joins("a", 0)], [_joins("a", 1)]),
        'steps[1].batch[0].checkpoint: sequence "a" has already joined',
    ),
    "a sequence back after it finished": (
        _request([_joins("a", 0, finish=True)], [_entry("a", 0)]),
        'steps[1].batch[0]: sequence "a" has finished',
    ),
    "a sequence that moves slot": (
        _request([_joins("a", 0)], [_entry("a", 1)]),
        'steps[1].batch[0].slot must be 0, the slot sequence "a" holds, got 1',
    ),
    "a sequence twice in a step": (
        _request([_joins("a", 0), _entry("a", 0)]),
        'steps[0].batch[1]: sequence "a" is already in this step',
    ),
    "a prefill after the sequence verified": (
        _request([_joins("a", 0)], [_entry("a", 0, prefill=[_ROW])]),
        'steps[1].batch[0].prefill: sequence "a" has verified, its prompt is over',
    ),
    "a prompt chunk after the sequence verified": (
        _request([_joins("a", 0)], [{"sequence": "a", "slot": 0, "prefill": [_ROW]}]),
        'steps[1].batch[0].prefill: sequence "a" has verified, its prompt is over',
    ),
    "a prompt chunk with accepted and no rows": (
        _request(
            [{"sequence": "a", "slot": 0, "checkpoint": _STATE, "prefill": [_ROW], "accepted": 1}]
        ),
        "missing field 'rows'",
    ),
    "a slot past the pool": (
        _request([_joins("a", 2)]),
        "steps[0].batch[0].slot must be an integer in [0, 1], got 2",
    ),
    "no slots": (
        _request([_joins("a", 0)], slots=0),
        "field 'slots' must be an integer in [1, 4096], got 0",
    ),
    "an empty name": (
        _request([_joins("", 0)]),
        'steps[0].batch[0].sequence must be a string of 1 to 64 characters, got ""',
    ),
    "finish as a string": (
        _request([_joins("a", 0, finish="yes")]),
        'steps[0].batch[0].finish must be true or false, got "yes"',
    ),
    "an empty batch": (
        _request([]),
        'steps[0] must be an object whose batch is a non-empty list, got {"batch": []}',
    ),
    "no steps": (_request(), "field 'steps' must be a non-empty list, got []"),
    "an empty prefill": (
        _request([_joins("a", 0, prefill=[])]),
        "steps[0].batch[0].prefill must be a non-empty list, got []",
    ),
    "accepted past the window": (
        _request([_joins("a", 0, accepted=3)]),
        "steps[0].batch[0].accepted must be an integer in [1, 2], got 3",
    ),
}


@pytest.mark.parametrize(("request_", "message"), list(_BAD.values()), ids=list(_BAD))
def test_a_batch_that_breaks_the_pool_s_bookkeeping_is_a_bad_request(
    request_: dict[str, object], message: str
) -> None:
    with pytest.raises(protocol.ProtocolError) as raised:
        decode_replay_batch(copy.deepcopy(request_))
    assert (raised.value.kind, str(raised.value)) == (ErrorKind.BAD_REQUEST, message)


def test_a_join_from_an_earlier_sequences_verified_rows_uses_the_prefix_hits_form() -> None:
    first_row = {"values": ["0x1p-1"] * 3, "g": ["-0x1p-2"], "beta": ["0x1p-2"]}
    other_row = {"values": ["0x1p-2"] * 3, "g": ["-0x1p-2"], "beta": ["0x1p-2"]}
    source = _joins("s0", 0, prefill=[other_row], rows=[first_row, other_row], accepted=2)
    # s0's prompt, then the first row s0 verified, then one of its own.
    hit = _joins("s1", 1, prefill=[other_row, first_row, other_row], rows=[other_row], accepted=1)
    # The same checkpoint and prompt, then another row: none that s0 verified.
    miss = _joins("s1", 1, prefill=[other_row, other_row], rows=[first_row], accepted=1)
    # A sequence run again alone (batch_alone.json) repeats s0's prompt and windows.
    again = _joins("s0-alone", 1, prefill=[other_row], rows=[first_row, other_row], accepted=2)

    def forms(*steps: list[dict[str, object]]) -> frozenset[BatchForm]:
        return batch_forms({"steps": [{"batch": batch} for batch in steps]})

    assert forms([source], [hit]) == {BatchForm.PREFIX_HITS}
    assert forms([source], [miss]) == frozenset()
    assert forms([source], [again]) == frozenset()
    # As the batch lists them: a join listed before its source is none.
    assert forms([hit, source]) == frozenset()


def test_a_sequence_is_rerouted_from_its_one_token_prompt_beside_other_rows_until_it_finishes() -> (
    None
):
    chunk = {"prefill": [_ROW]}
    steps: list[list[dict[str, object]]] = [
        # p0's one-token chunk alone in its step is a decode in a batch too.
        [{"sequence": "p0", **chunk}],
        # p1's beside a verify, and s0's two-token chunk: only p1 is rerouted.
        [{"sequence": "p1", **chunk}, {"sequence": "s0", "prefill": [_ROW, _ROW]}],
        # p1 stays rerouted until it finishes; p0's verify beside it is not.
        [{"sequence": "p1", "rows": [_ROW]}, {"sequence": "p0", "rows": [_ROW]}],
        [{"sequence": "p1", "rows": [_ROW], "finish": True}, {"sequence": "s0", "rows": [_ROW]}],
        # A new p1 in the slot starts from a checkpoint, not from the chunk.
        [{"sequence": "p1", "rows": [_ROW]}, {"sequence": "s0", "rows": [_ROW]}],
    ]
    assert rerouted_entries(steps) == [1, 3, 5]


def _alone_reply(case: ReplayCase, /) -> list[dict[str, Any]]:
    """Every state of an alone case's reply the same: its first join's checkpoint."""
    steps = cast("list[dict[str, list[dict[str, Any]]]]", case.request["steps"])
    checkpoint = steps[0]["batch"][0]["checkpoint"]
    return [copy.deepcopy(checkpoint) for _ in range(len(case.alone) * 2)]


def test_an_alone_pair_outside_the_rerouted_entries_must_be_bit_for_bit() -> None:
    # vLLM's prompts of every length: p1's one-token chunk beside s0's verify is
    # rerouted (states 0 and 3), within vllm-bf16's 2e-2; s0's state 1 must be exact.
    case = next(case for case in BATCHES if "007-vllm-bf16" in case.case_id)
    assert (case.bounded, case.tolerance) == (frozenset({0, 3}), 2e-2)
    states = _alone_reply(case)
    assert judge_replay(case, {"ok": {"states": states}}).outcome == "passed"
    scale = max(abs(float.fromhex(value)) for row in states[0]["h"] for x in row for value in x)
    nudged = {}
    for number in (0, 1):
        nudged[number] = copy.deepcopy(states)
        value = float.fromhex(nudged[number][number]["h"][0][0][0])
        nudged[number][number]["h"][0][0][0] = (value + scale / 1024).hex()
    rerouted = judge_replay(case, {"ok": {"states": nudged[0]}})
    assert rerouted.outcome == "passed"
    assert rerouted.distance == pytest.approx(1 / 1024)
    exact = judge_replay(case, {"ok": {"states": nudged[1]}})
    alone = dict(case.alone)[1]
    assert exact.outcome == "failed"
    assert exact.detail.splitlines()[0] == (
        f"states[1], s0 in the batch, is not states[{alone}], the same entry alone: "
        f"states[1].h[0][0][0]: expected {states[alone]['h'][0][0][0]}, got "
        f"{nudged[1][1]['h'][0][0][0]}: relative error 0.000977 (of max |expected| over "
        "states[1].h) exceeds 0, vllm-bf16's bound where no one-token prompt chunk "
        "of the sequence ran beside other rows before (RB-REPLAY-13)"
    )


#: _ROW decoded, and with the raw gate inputs a and b.
_VALUES: Final = {"values": [0.25, 0.5, 1.0], "g": [-0.125], "beta": [0.5]}
_GATED_ROW: Final = _ROW | {"a": ["0x1p-2"], "b": ["0x1p+0"]}
_GATED_VALUES: Final = _VALUES | {"a": [0.25], "b": [1.0]}
_STATE_VALUES: Final = {"conv": [[0.0], [0.0], [0.0]], "h": [[[0.0]]]}


def test_a_batch_request_keeps_every_field_and_the_raw_gate_inputs_of_each_row() -> None:
    joins = _joins("s", 0, rows=[_GATED_ROW], prefill=[_GATED_ROW], finish=True)
    request = _request([joins]) | {"a_log": ["0x1p+0"], "dt_bias": ["0x1p-1"]}
    assert decode_replay_batch(request) == {
        "pipeline": "float64",
        "dims": SMALL_DIMS,
        "conv_weight": [[0.5, 1.0], [0.5, 1.0], [0.5, 1.0]],
        "slots": 2,
        "steps": [
            [
                {
                    "sequence": "s",
                    "slot": 0,
                    "rows": [_GATED_VALUES],
                    "accepted": 1,
                    "finish": True,
                    "checkpoint": _STATE_VALUES,
                    "prefill": [_GATED_VALUES],
                }
            ]
        ],
        "a_log": [1.0],
        "dt_bias": [0.5],
    }


@pytest.mark.parametrize("present", ["a_log", "dt_bias"])
def test_either_raw_gate_input_asks_every_row_for_a_and_b(present: str) -> None:
    request = _request([_joins("s", 0)]) | {present: ["0x1p+0"]}
    with pytest.raises(protocol.ProtocolError) as raised:
        decode_replay_batch(request)
    assert str(raised.value) == "missing field 'a'"


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        pytest.param(
            [3], "steps[0] must be an object whose batch is a non-empty list, got 3", id="step"
        ),
        pytest.param(
            [{"batch": [3]}], "steps[0].batch[0] must be an object, got 3", id="entry"
        ),
        pytest.param(
            [{"batch": [_entry("s", 0, checkpoint=3)]}],
            "field 'steps[0].batch[0].checkpoint' must be an object, got 3",
            id="checkpoint",
        ),
        pytest.param(
            # Prompt rows beside a window are no chunk: the window needs its count.
            [{"batch": [{"sequence": "s", "slot": 0, "checkpoint": _STATE, "prefill": [_ROW],
                         "rows": [_ROW]}]}],
            "missing field 'accepted'",
            id="rows-without-accepted",
        ),
    ],
)  # fmt: skip
def test_a_batch_step_or_entry_of_another_shape_is_named_by_its_path(
    steps: list[object], message: str
) -> None:
    request = _request() | {"steps": steps}
    with pytest.raises(protocol.ProtocolError) as raised:
        decode_replay_batch(request)
    assert str(raised.value) == message


def _chunk(sequence: str, prefill: list[object], /, **more: object) -> dict[str, object]:
    return {"sequence": sequence, "checkpoint": "c", "prefill": prefill} | more


@pytest.mark.parametrize(
    "request_",
    [
        pytest.param({}, id="no-steps"),
        pytest.param({"steps": 3}, id="steps-not-a-list"),
        pytest.param({"steps": [3]}, id="a-step-not-an-object"),
        pytest.param({"steps": [{"batch": 3}]}, id="a-batch-not-a-list"),
        pytest.param({"steps": [{"batch": [_chunk("a", ["p"], rows=[])]}]}, id="empty-rows"),
    ],
)
def test_the_forms_of_a_malformed_batch_request_are_none(request_: dict[str, object]) -> None:
    assert batch_forms(request_) == frozenset()


def test_a_form_after_an_entry_that_is_not_an_object_is_still_found() -> None:
    request = {"steps": [{"batch": [3, _chunk("a", ["p"])]}]}
    assert batch_forms(request) == {BatchForm.PROMPT_CHUNKS}


def test_prompt_rows_on_a_later_entry_are_a_prompt_chunk() -> None:
    first = {"sequence": "a", "checkpoint": "c", "rows": ["r"]}
    later = {"sequence": "a", "prefill": ["p"], "rows": ["r2"]}
    assert batch_forms({"steps": [{"batch": [first]}, {"batch": [later]}]}) == {
        BatchForm.PROMPT_CHUNKS
    }


def test_a_prefix_hit_reads_a_chunked_prompt_and_its_first_verified_row() -> None:
    steps = [
        [_chunk("a", ["p1"])],
        [{"sequence": "a", "prefill": ["p2"], "rows": ["r"]}],
        # A second verify leaves the first verified row as it was.
        [{"sequence": "a", "rows": ["r2"]}],
        [_chunk("b", ["p1", "p2", "r"])],
    ]
    request = {"steps": [{"batch": batch} for batch in steps]}
    assert batch_forms(request) == {BatchForm.PROMPT_CHUNKS, BatchForm.PREFIX_HITS}
    # A prompt that follows the second verified row instead is no hit.
    steps[-1] = [_chunk("b", ["p1", "p2", "r2"])]
    missed = {"steps": [{"batch": batch} for batch in steps]}
    assert batch_forms(missed) == {BatchForm.PROMPT_CHUNKS}
