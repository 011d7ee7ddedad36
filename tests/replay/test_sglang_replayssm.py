# SPDX-License-Identifier: MIT OR Apache-2.0
"""SGLang's GDN ReplaySSM as it runs (design (e), RB-REPLAY-11).

The stateful property runs ``tests/replay/machines.py``'s decode machine on
:class:`~ssm_rollback_spec.replay.designs.sglang.SglangGdnReplaySsm` in the
``sglang-bf16`` pipeline, with a ring long enough that several rounds of
history build up between folds, and judges h within the design's measured
bound (BENCHMARKS.md, "SGLang's GDN ReplaySSM against plain decoding"). A
wrong lifecycle, a fold that reads its history from slot 0 rather than from
``cache_base``, must fail it.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import TYPE_CHECKING, Final, cast

import numpy as np
import pytest
from hypothesis import given

from ssm_rollback_spec.corpus.replay_cases import TOLERANCES
from ssm_rollback_spec.corpus.replay_format import ROUNDS_FILE, RoundsCase, decode_case
from ssm_rollback_spec.replay.cases import make_case, make_layer
from ssm_rollback_spec.replay.designs.sglang import (
    SglangGdnReplaySsm,
    SplitRecord,
    sglang_ring_length,
)
from ssm_rollback_spec.replay.layer import LayerState, Pipeline, conv_step, delta_rule_update
from ssm_rollback_spec.replay_rows import GdnShape

from .machines import run_decode_machine
from .strategies import replay_cases

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from ssm_rollback_spec.replay.cases import Draw, DrawnCase
    from ssm_rollback_spec.replay.layer import GdnLayer

#: h's largest relative distance from plain decoding the property allows:
#: about four times the largest this property's own search has found, 5.6e-2
#: (small heads, values at BF16's edge), where 200 decodes drawn at random
#: reach 1.3e-2 (benchmarks/replay_engine_drift.py, BENCHMARKS.md).
BOUND: Final = 0.25
_PIPELINE: Final = (Pipeline.SGLANG_BF16,)


def _sglang(
    layer: GdnLayer, pipeline: Pipeline, initial: LayerState, k_ceiling: int, ring_length: int, /
) -> SglangGdnReplaySsm:
    # A ring of four windows: a fold every two or three rounds, history between.
    length = sglang_ring_length(k_ceiling, max(ring_length, 4 * k_ceiling))
    return SglangGdnReplaySsm(layer, pipeline, initial, k_ceiling, ring_length=length)


class _FoldFromSlotZero(SglangGdnReplaySsm):
    """Wrong: the fold and the verify read the history from slot 0, not from ``cache_base``."""

    def history(self) -> list[SplitRecord]:
        ring = cast("list[SplitRecord]", self.slot.ring)
        return ring[: self.slot.cursor]


def _wrong(
    layer: GdnLayer, pipeline: Pipeline, initial: LayerState, k_ceiling: int, ring_length: int, /
) -> SglangGdnReplaySsm:
    length = sglang_ring_length(k_ceiling, max(ring_length, 4 * k_ceiling))
    return _FoldFromSlotZero(layer, pipeline, initial, k_ceiling, ring_length=length)


@pytest.mark.clause("RB-REPLAY-11")
def test_sglang_s_gdn_replayssm_stays_within_its_bound_of_plain_decoding_over_many_rounds() -> None:
    run_decode_machine(_sglang, pipelines=_PIPELINE, bound=BOUND)


@pytest.mark.clause("RB-REPLAY-11")
def test_a_fold_that_ignores_cache_base_is_rejected() -> None:
    with pytest.raises(AssertionError):
        run_decode_machine(_wrong, pipelines=_PIPELINE, bound=BOUND, find_only=True)


def _shipped_decode() -> RoundsCase:
    path = Path(__file__).resolve().parents[2] / "vectors" / "replay" / ROUNDS_FILE
    cases: list[RoundsCase] = json.loads(path.read_text(encoding="ascii"))["cases"]
    (case,) = [c for c in cases if c.get("design") == "sglang-gdn-replayssm"]
    return case


@pytest.mark.clause("RB-REPLAY-11")
def test_the_shipped_sglang_decode_folds_and_a_fold_from_slot_zero_misses_its_rounds() -> None:
    case = _shipped_decode()
    bound = TOLERANCES[Pipeline.SGLANG_BF16]["kernel"]
    wrong = [
        float(np.max(np.abs(rebuilt.h - expected.h)) / np.max(np.abs(expected.h)))
        for rebuilt, expected in decode_case(case, _wrong)
    ]
    assert max(wrong) > bound
    right = decode_case(case, _sglang)
    assert all(rebuilt.equals(expected) for rebuilt, expected in right)


def _numbers(rng: random.Random, /) -> Draw:
    def drawn(shape: tuple[int, ...], low: float, high: float, /) -> NDArray[np.float64]:
        values = [rng.uniform(low, high) for _ in range(int(np.prod(shape)))]
        return np.array(values, dtype=np.float64).reshape(shape)

    return drawn


def _start(seed: int, /) -> tuple[DrawnCase, Draw]:
    draw = _numbers(random.Random(seed))  # noqa: S311 (reproducible draws, not secrets)
    shape = GdnShape(
        num_key_heads=1, key_head_dim=2, num_value_heads=2, value_head_dim=2, conv_kernel=3
    )
    return make_case(make_layer(shape, draw), Pipeline.SGLANG_BF16, 1, 1, draw), draw


# (drafts, accepted) per round: windows of 1 to 3 tokens, K ceiling 3.
_ROUNDS: Final = ((2, 3), (1, 1), (2, 2), (0, 1), (2, 3), (2, 1), (1, 2), (2, 3)) * 3


@pytest.mark.clause("RB-REPLAY-11")
def test_a_fold_follows_the_commit_that_leaves_no_room_for_two_windows_and_moves_cache_base() -> (
    None
):
    start, draw = _start(11)
    k_ceiling, length = 3, 8
    decoder = SglangGdnReplaySsm(
        start.layer, start.pipeline, start.checkpoint, k_ceiling, ring_length=length
    )
    write_pos = base = folds = moved = 0
    for drafts, accepted in _ROUNDS:
        rows = make_case(start.layer, start.pipeline, drafts + 1, 1, draw).rows
        decoder.verify_round(rows, accepted)
        write_pos += accepted
        if write_pos + 2 * k_ceiling > length:
            base, moved, write_pos = (base + write_pos) % length, moved + write_pos, 0
            folds += 1
        assert (decoder.slot.cursor, decoder.cache_base) == (write_pos, base)
        assert decoder.slot.cursor + k_ceiling <= length  # the next window fits
    assert folds >= 5
    assert moved > 2 * length  # cache_base went round the ring twice


@pytest.mark.clause("RB-REPLAY-11")
def test_a_checkpoint_that_is_not_fp32_folds_after_every_commit() -> None:
    start, draw = _start(12)
    decoder = SglangGdnReplaySsm(
        start.layer, start.pipeline, start.checkpoint, 3, ring_length=8, fold_every_commit=True
    )
    base = 0
    for drafts, accepted in _ROUNDS[:8]:
        decoder.verify_round(
            make_case(start.layer, start.pipeline, drafts + 1, 1, draw).rows, accepted
        )
        base = (base + accepted) % 8
        assert (decoder.slot.cursor, decoder.cache_base) == (0, base)


@pytest.mark.clause("RB-REPLAY-11")
def test_the_verify_writes_the_window_at_cache_base_plus_write_pos_round_the_ring() -> None:
    start, draw = _start(13)
    decoder = SglangGdnReplaySsm(start.layer, start.pipeline, start.checkpoint, 3, ring_length=8)
    for drafts, accepted in _ROUNDS[:12]:
        rows = make_case(start.layer, start.pipeline, drafts + 1, 1, draw).rows
        first = decoder.physical(decoder.slot.cursor)
        decoder.verify_round(rows, accepted)
        for index, row in enumerate(rows):
            record = decoder.slot.ring[(first + index) % 8]
            assert isinstance(record, SplitRecord)
            assert np.array_equal(record.g, row.g)


@pytest.mark.clause("RB-REPLAY-11")
@given(case=replay_cases(pipelines=_PIPELINE))
def test_the_ut_transform_s_u_is_the_recurrent_step_s_u_to_rounding(case: DrawnCase) -> None:
    layer = case.layer
    decoder = SglangGdnReplaySsm(
        layer,
        case.pipeline,
        case.checkpoint,
        case.window,
        ring_length=sglang_ring_length(case.window, 1),
    )
    conv, h, posts, expected = case.checkpoint.conv, case.checkpoint.h, [], []
    for row in case.rows:
        conv, post = conv_step(layer, conv, row.qkv)
        h, _, u = delta_rule_update(layer, h, post[layer.key_dim :], row.g, row.beta)
        posts.append(post)
        expected.append(u)
    for record, u in zip(decoder.window_records(case.rows, posts), expected, strict=True):
        scale = max(float(np.max(np.abs(u))), 1.0)
        assert float(np.max(np.abs(record.d_high + record.d_low - u))) <= 1e-4 * scale


@pytest.mark.clause("RB-REPLAY-11")
@pytest.mark.parametrize(("k_ceiling", "length"), [(3, 12), (4, 4), (2, 3)])
def test_the_ring_is_a_power_of_two_that_holds_two_windows(k_ceiling: int, length: int) -> None:
    start, _ = _start(14)
    with pytest.raises(ValueError, match=r"^ring_length ") as raised:
        SglangGdnReplaySsm(
            start.layer, start.pipeline, start.checkpoint, k_ceiling, ring_length=length
        )
    assert str(raised.value) == (
        f"ring_length {length} must be a power of two of at least 2 * k_ceiling = {2 * k_ceiling}"
    )
