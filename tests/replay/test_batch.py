# SPDX-License-Identifier: MIT OR Apache-2.0
"""Replay over a batch: each sequence is its own replay alone, whatever the batch's bookkeeping.

The stateful property draws batches on a pool of slots (``batch_machine.py``);
the unit tests pin the oracle, the reference pool and the batch vectors'
shapes. The self-test's wrong bookkeeping (``tests/fakes/wrong_batch.py``)
fails the property and the vectors.
"""

from __future__ import annotations

import json
import random
from math import prod
from pathlib import Path
from typing import TYPE_CHECKING, Final

import numpy as np
import pytest

from ssm_rollback_spec.corpus.replay_format import (
    BATCH_ALONE_FILE,
    BATCH_FILE,
    AloneCase,
    BatchCase,
    batch_case_states,
    batch_states,
)
from ssm_rollback_spec.replay.batch import BatchEntry, SlotPool, batch_oracle
from ssm_rollback_spec.replay.cases import make_case, make_layer
from ssm_rollback_spec.replay.layer import Pipeline
from ssm_rollback_spec.replay.rounds import decode_round
from ssm_rollback_spec.replay_rows import GdnShape

from .batch_machine import run_batch_machine

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from ssm_rollback_spec.replay.cases import Draw

BATCH: Final = Path(__file__).resolve().parents[2] / "vectors" / "replay" / BATCH_FILE
ALONE: Final = BATCH.with_name(BATCH_ALONE_FILE)
_SHAPE: Final = GdnShape(
    num_key_heads=1, key_head_dim=2, num_value_heads=2, value_head_dim=2, conv_kernel=3
)


def alone_cases() -> list[AloneCase]:
    """The committed ``batch_alone.json`` cases."""
    cases: list[AloneCase] = json.loads(ALONE.read_text(encoding="ascii"))["cases"]
    return cases


def batch_cases() -> list[BatchCase]:
    """The committed ``batch.json`` cases (the self-test runs them on wrong bookkeeping)."""
    cases: list[BatchCase] = json.loads(BATCH.read_text(encoding="ascii"))["cases"]
    return cases


def _draw(seed: int, /) -> Draw:
    rng = random.Random(seed)  # noqa: S311 - reproducible, no secret

    def drawn(shape: tuple[int, ...], low: float, high: float, /) -> NDArray[np.float64]:
        values = [rng.uniform(low, high) for _ in range(prod(shape))]
        return np.array(values, dtype=np.float64).reshape(shape)

    return drawn


@pytest.mark.clause("RB-REPLAY-12")
def test_each_sequence_of_a_drawn_batch_is_its_own_replay_alone() -> None:
    run_batch_machine(SlotPool)


@pytest.mark.clause("RB-REPLAY-12")
def test_the_oracle_runs_each_sequence_alone_from_its_checkpoint_then_its_prefill() -> None:
    draw = _draw(3)
    layer = make_layer(_SHAPE, draw)
    first, second = (make_case(layer, Pipeline.FLOAT64, 3, 1, draw) for _ in range(2))
    prefill = make_case(layer, Pipeline.FLOAT64, 2, 1, draw).rows
    steps = [
        [
            BatchEntry("a", 0, first.rows, 2, checkpoint=first.checkpoint),
            BatchEntry("b", 1, second.rows[:1], 1, checkpoint=second.checkpoint, prefill=prefill),
        ],
        [BatchEntry("b", 1, second.rows[1:], 2, finish=True)],
    ]
    alone_a = decode_round(layer, first.checkpoint, first.rows[:2])
    after_prefill = decode_round(layer, second.checkpoint, prefill)
    alone_b = decode_round(layer, after_prefill, second.rows[:1])
    then_b = decode_round(layer, alone_b, second.rows[1:])
    states = batch_oracle(layer, Pipeline.FLOAT64, steps)
    assert [len(after) for after in states] == [2, 1]
    assert states[0][0].equals(alone_a)
    assert states[0][1].equals(alone_b)
    assert states[1][0].equals(then_b)
    # Another sequence beside it changes nothing.
    assert batch_oracle(layer, Pipeline.FLOAT64, [steps[0][:1]])[0][0].equals(alone_a)


@pytest.mark.clause("RB-REPLAY-12")
def test_the_oracle_refuses_a_sequence_that_never_joined() -> None:
    draw = _draw(4)
    layer = make_layer(_SHAPE, draw)
    case = make_case(layer, Pipeline.FLOAT64, 1, 1, draw)
    with pytest.raises(ValueError, match=r"^sequence 'x' has no checkpoint$"):
        batch_oracle(layer, Pipeline.FLOAT64, [[BatchEntry("x", 0, case.rows, 1)]])


@pytest.mark.clause("RB-REPLAY-12")
def test_the_reference_pool_gives_every_batch_vector_bit_for_bit() -> None:
    for case in batch_cases():
        pairs = batch_case_states(case, SlotPool)
        assert pairs
        for index, (reported, expected) in enumerate(pairs):
            assert reported.equals(expected), f"{case['id']}: entry {index}"


@pytest.mark.clause("RB-REPLAY-12")
@pytest.mark.parametrize(
    ("joins", "message"),
    [(False, "sequence 'b' does not hold slot 0"), (True, "slot 0 is held by sequence 'a'")],
)
def test_a_pool_refuses_a_slot_another_sequence_holds(*, joins: bool, message: str) -> None:
    draw = _draw(5)
    layer = make_layer(_SHAPE, draw)
    case = make_case(layer, Pipeline.FLOAT64, 1, 1, draw)
    pool = SlotPool(layer, Pipeline.FLOAT64, 2, 2)
    pool.step([BatchEntry("a", 0, case.rows, 1, checkpoint=case.checkpoint)])
    checkpoint = case.checkpoint if joins else None
    with pytest.raises(ValueError, match=f"^{message}$"):
        pool.step([BatchEntry("b", 0, case.rows, 1, checkpoint=checkpoint)])


@pytest.mark.clause("RB-REPLAY-12")
def test_the_batch_vectors_hold_the_shapes_rollback_bugs_lived_in() -> None:
    no_drafts_beside_drafts = reused_after_full_accept = verify_after_prefill = False
    windows: set[int] = set()
    accepted: set[tuple[int, int]] = set()
    for case in batch_cases():
        # The model's pipelines, and the engines' whose adapters offer replay_batch.
        assert {"float64", "transformers-bf16", "vllm-bf16", "sglang-bf16"} >= {case["pipeline"]}
        finished_full: set[int] = set()
        for step in case["steps"]:
            batch = step["batch"]
            # A prompt chunk alone has no window (0 here).
            lengths = [len(entry.get("rows", [])) for entry in batch]
            for entry, length in zip(batch, lengths, strict=True):
                if length:
                    windows.add(length)
                    accepted.add((length, entry["accepted"]))
                if length == 1 and entry["slot"] != 0 and max(lengths) > 1:
                    no_drafts_beside_drafts = True
                if "checkpoint" in entry and entry["slot"] in finished_full:
                    reused_after_full_accept = True
                if "prefill" in entry and len(batch) > 1:
                    verify_after_prefill = True
            finished_full = {
                entry["slot"]
                for entry, length in zip(batch, lengths, strict=True)
                if entry.get("finish") and length > 1 and entry["accepted"] == length
            }
    assert no_drafts_beside_drafts
    assert reused_after_full_accept
    assert verify_after_prefill
    assert windows == {1, 2, 3, 4}
    assert accepted == {(k, a) for k in range(1, 5) for a in range(1, k + 1)}


def _prompt_shapes(cases: list[BatchCase] | list[AloneCase], /) -> dict[str, set[object]]:
    """What the cases' prompts beside verifies cover, by pipeline."""
    shapes: dict[str, set[object]] = {}
    for case in cases:
        seen = shapes.setdefault(case["pipeline"], set())
        verified: set[str] = set()
        freed: set[int] = set()
        for step in case["steps"]:
            batch = step["batch"]
            verifying = any("rows" in entry for entry in batch)
            for entry in batch:
                if "prefill" in entry and "rows" not in entry and verifying:
                    seen.add(("prompt rows beside verifies", len(entry["prefill"])))
                if "prefill" in entry and "checkpoint" not in entry:
                    seen.add("a prompt chunk after the first")
                if "prefill" in entry and "checkpoint" in entry and entry["slot"] in freed:
                    seen.add("a prompt in a slot freed the step before")
                if "prefill" in entry and "rows" in entry:
                    seen.add("a prompt and its first verify in one entry")
                if "rows" in entry:
                    verified.add(entry["sequence"])
            freed = {entry["slot"] for entry in batch if entry.get("finish")}
    return shapes


#: The prompt shapes docs/engines-vllm.md names: every length from 1 to K + 2 (K and K + 1
#: among them, vLLM #53051), chunks over steps, a slot reused at once, both forms.
_PROMPT_SHAPES: Final = {
    *(("prompt rows beside verifies", length) for length in range(1, 7)),
    "a prompt chunk after the first",
    "a prompt in a slot freed the step before",
    "a prompt and its first verify in one entry",
}


@pytest.mark.clause("RB-REPLAY-12")
def test_the_model_s_batch_vectors_hold_prompts_of_every_shape_beside_verifies() -> None:
    shapes = _prompt_shapes(batch_cases())
    assert shapes["float64"] >= _PROMPT_SHAPES
    assert shapes["transformers-bf16"] >= _PROMPT_SHAPES


@pytest.mark.clause("RB-REPLAY-13")
def test_every_pipeline_s_batches_alone_hold_prompts_of_every_shape() -> None:
    shapes = _prompt_shapes(alone_cases())
    assert set(shapes) == {"float64", "transformers-bf16", "vllm-bf16", "sglang-bf16"}
    assert all(covered >= _PROMPT_SHAPES for covered in shapes.values())


@pytest.mark.clause("RB-REPLAY-13")
def test_the_reference_pool_gives_each_sequence_alone_what_it_gave_it_in_the_batch() -> None:
    for case in alone_cases():
        states = batch_states(case, SlotPool)
        for batched, alone in case["alone"]:
            assert states[batched].equals(states[alone]), (case["id"], batched, alone)
