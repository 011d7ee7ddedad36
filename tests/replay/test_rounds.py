# SPDX-License-Identifier: MIT OR Apache-2.0
"""Replay across verify rounds: each design's lifecycle, its fold, its bytes (RB-REPLAY-6..10).

The stateful properties run ``tests/replay/machines.py``'s decode machine on
each reference design of ``spec/replay/rounds.py``;
``tests/replay/test_wrong_replays.py`` runs it on the wrong lifecycles.
"""

from __future__ import annotations

import random
import re
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Final

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ssm_rollback_spec.replay.cases import DrawnCase, make_case, make_layer
from ssm_rollback_spec.replay.decoders import reference_decoder
from ssm_rollback_spec.replay.designs.minimal_pre_conv import MinimalRing
from ssm_rollback_spec.replay.designs.post_conv import PostConvRing
from ssm_rollback_spec.replay.designs.replayssm import Fold, Record, ReplaySsm, store
from ssm_rollback_spec.replay.designs.seed_row import SeedRowRing
from ssm_rollback_spec.replay.layer import (
    SOFTPLUS_THRESHOLD,
    Array,
    Pipeline,
    TokenInput,
    bf16_round,
    conv_step,
    decay,
    delta_rule_update,
    gate_and_beta,
    repeat_heads,
    softplus,
    stored,
    write,
)
from ssm_rollback_spec.replay.paths import PostConvRow, capture_post_conv_ring, verify
from ssm_rollback_spec.replay.portable import exp, log1p, ordered_sum
from ssm_rollback_spec.replay.rounds import check_round
from ssm_rollback_spec.replay_rows import (
    DESIGN_MINIMAL_FOR,
    QWEN3_NEXT_80B_A3B,
    REPLAYSSM_RING_LENGTH,
    GdnShape,
    RecordStorage,
    ReplayDesign,
    conv_dim,
    design_ring_bytes,
    design_ring_rows,
    design_row_bytes,
    replayssm_record_bytes,
)

from .machines import ROUND_PIPELINES, run_decode_machine
from .strategies import POST_CONV_PIPELINES, partial_accept, replay_cases, shapes

if TYPE_CHECKING:
    from numpy.typing import NDArray

# Zero, or a magnitude in [2**-100, 2**100]: a low part of a float32 near
# the least normal would be subnormal, and keep fewer bits than 2**-16 needs.
_MAGNITUDE: Final = st.floats(2.0**-100, 2.0**100, width=32)
_NORMAL_MAGNITUDES: Final = st.one_of(st.just(0.0), _MAGNITUDE, _MAGNITUDE.map(lambda x: -x))

#: Each design's reference decoder.
REFERENCE: Final = {design: reference_decoder(design) for design in ReplayDesign}
#: The replay pages (docs/replay.md and the topic pages it links).
_DOCS: Final = tuple(
    Path(__file__).resolve().parents[2] / "docs" / name
    for name in ("replay.md", "replay-model.md", "replay-designs.md", "replay-corpus.md")
)

# --- RB-REPLAY-6: every design equals plain decoding after every round -------


@pytest.mark.clause("RB-REPLAY-6", "RB-REPLAY-7")
def test_the_seed_row_ring_equals_plain_decoding_after_every_round() -> None:
    run_decode_machine(REFERENCE[ReplayDesign.SEED_ROW])


@pytest.mark.clause("RB-REPLAY-6", "RB-REPLAY-7")
def test_the_minimal_pre_conv_ring_equals_plain_decoding_after_every_round() -> None:
    run_decode_machine(REFERENCE[ReplayDesign.MINIMAL_PRE_CONV])


@pytest.mark.clause("RB-REPLAY-6", "RB-REPLAY-8")
def test_replayssm_with_fp32_records_equals_plain_decoding_after_every_round() -> None:
    run_decode_machine(REFERENCE[ReplayDesign.REPLAYSSM])


@pytest.mark.clause("RB-REPLAY-4", "RB-REPLAY-6", "RB-REPLAY-7")
def test_the_post_conv_ring_with_its_conv_window_equals_plain_decoding_after_every_round() -> None:
    exact = tuple(p for p in ROUND_PIPELINES if p in POST_CONV_PIPELINES)
    run_decode_machine(REFERENCE[ReplayDesign.POST_CONV_WITH_CONV_WINDOW], pipelines=exact)


@pytest.mark.clause("RB-REPLAY-6")
@given(k_ceiling=st.integers(1, 6), window=st.integers(-1, 8), accepted=st.integers(-1, 8))
def test_a_round_outside_the_window_or_the_ceiling_is_refused(
    k_ceiling: int, window: int, accepted: int
) -> None:
    rows = [object()] * max(window, 0)
    if 1 <= window <= k_ceiling and 1 <= accepted <= window:
        assert check_round(rows, accepted, k_ceiling) == window  # type: ignore[arg-type]
    else:
        with pytest.raises(ValueError, match=r"^(a window has|accepted must be in)"):
            check_round(rows, accepted, k_ceiling)  # type: ignore[arg-type]


# --- RB-REPLAY-7: the per-verify ring across rounds ----------------------------


def _layer_and_state(pipeline: Pipeline, /) -> tuple[DrawnCase, list[DrawnCase]]:
    rng = random.Random(7)  # noqa: S311 (reproducible numbers, not secrets)

    def numbers(shape: tuple[int, ...], low: float, high: float, /) -> NDArray[np.float64]:
        return np.array([rng.uniform(low, high) for _ in range(int(np.prod(shape)))]).reshape(shape)

    layer = make_layer(
        GdnShape(
            num_key_heads=1, key_head_dim=2, num_value_heads=2, value_head_dim=2, conv_kernel=3
        ),
        numbers,
    )
    start = make_case(layer, pipeline, 1, 1, numbers)
    windows = [make_case(layer, pipeline, k, 1, numbers) for k in (4, 2, 3, 4, 1)]
    return start, windows


@pytest.mark.clause("RB-REPLAY-7")
@pytest.mark.parametrize("pipeline", list(Pipeline), ids=lambda p: p.value)
def test_a_short_round_leaves_an_earlier_round_s_rows_in_the_ring(pipeline: Pipeline) -> None:
    start, windows = _layer_and_state(pipeline)
    decoder = MinimalRing(start.layer, pipeline, start.checkpoint, 4)
    assert decoder.capacity == 3
    decoder.verify_round(windows[0].rows, 2)
    left = list(decoder.slot.ring)
    decoder.verify_round(windows[1].rows, 1)
    # The round of K = 2 wrote one row; slots 1 and 2 still hold the first round's.
    assert decoder.slot.cursor == 1
    assert all(now is before for now, before in zip(decoder.slot.ring[1:], left[1:], strict=True))
    assert decoder.slot.ring[0] is not left[0]


@pytest.mark.clause("RB-REPLAY-7")
@pytest.mark.parametrize("design", [SeedRowRing, MinimalRing, PostConvRing])
def test_a_full_accept_keeps_the_live_state_and_a_window_of_one_writes_no_row(
    design: type[SeedRowRing],
) -> None:
    start, windows = _layer_and_state(Pipeline.TRANSFORMERS_BF16)
    decoder = design(start.layer, start.pipeline, start.checkpoint, 4)
    decoder.verify_round(windows[0].rows, 4)
    assert decoder.state().equals(verify(start.layer, start.checkpoint, windows[0].rows).live)
    ring = list(decoder.slot.ring)
    decoder.verify_round(windows[4].rows, 1)
    assert decoder.slot.cursor == 0
    assert all(now is before for now, before in zip(decoder.slot.ring, ring, strict=True))


# --- RB-REPLAY-8: ReplaySSM's records, fold, cursor and slot reuse -------------


def _records(case: DrawnCase, storage: RecordStorage, /) -> tuple[list[Record], Array]:
    """The window's records as the verify computes them, and the live h after it."""
    layer, h, conv = case.layer, case.checkpoint.h, case.checkpoint.conv
    records = []
    for row in case.rows:
        conv, post = conv_step(layer, conv, row.qkv)
        h, keys, u = delta_rule_update(layer, h, post[layer.key_dim :], row.g, row.beta)
        raw = PostConvRow(post[layer.key_dim :], row.g, row.beta)
        records.append(Record(store(keys, storage), store(u, storage), row.g, raw))
    return records, h


def _fold(case: DrawnCase, records: list[Record], fold: Fold, /) -> Array:
    decoder = ReplaySsm(
        case.layer,
        case.pipeline,
        case.checkpoint,
        1,
        ring_length=max(len(records), 1),
        fold=fold,
    )
    decoder.slot.ring[: len(records)] = records
    decoder.slot.cursor = len(records)
    return decoder.materialize()


@pytest.mark.clause("RB-REPLAY-8")
@given(case=replay_cases())
def test_the_recurrent_fold_of_fp32_records_equals_the_recurrent_update_bit_for_bit(
    case: DrawnCase,
) -> None:
    records, live = _records(case, RecordStorage.FP32)
    folded = _fold(case, records, Fold.RECURRENT)
    assert folded.dtype == live.dtype
    assert np.array_equal(folded, live)
    kept = stored(case.layer, replace(case.checkpoint, h=folded))
    assert np.array_equal(kept.h, case.verified().live.h)


@pytest.mark.clause("RB-REPLAY-8")
@given(case=replay_cases(), storage=st.sampled_from(RecordStorage))
def test_the_raw_input_fold_equals_the_recurrent_update_whatever_u_s_storage(
    case: DrawnCase, storage: RecordStorage
) -> None:
    records, live = _records(case, storage)
    assert np.array_equal(_fold(case, records, Fold.RAW_INPUTS), live)


@pytest.mark.clause("RB-REPLAY-8")
@given(case=replay_cases(min_window=2))
def test_the_closed_form_fold_agrees_with_the_recurrent_one_only_to_rounding(
    case: DrawnCase,
) -> None:
    records, live = _records(case, RecordStorage.FP32)
    closed = _fold(case, records, Fold.CLOSED_FORM)
    tolerance = 1e-11 if case.pipeline is Pipeline.FLOAT64 else 1e-4
    scale = np.maximum(np.abs(live), 1.0)
    assert np.all(np.abs(closed - live) <= tolerance * scale)


@pytest.mark.clause("RB-REPLAY-8")
def test_the_closed_form_fold_is_not_the_recurrent_update_s_bits() -> None:
    # One fixed decode where the closed form rounds differently: why the
    # closed-loop fold, not the closed form, is the one that keeps bit identity.
    start, windows = _layer_and_state(Pipeline.TRANSFORMERS_BF16)
    case = replace(start, rows=windows[0].rows, accepted=4)
    records, live = _records(case, RecordStorage.FP32)
    assert np.array_equal(_fold(case, records, Fold.RECURRENT), live)
    assert not np.array_equal(_fold(case, records, Fold.CLOSED_FORM), live)


@pytest.mark.clause("RB-REPLAY-8")
@given(case=replay_cases())
def test_a_record_s_u_is_beta_times_v_minus_the_decayed_state_s_read_of_k(
    case: DrawnCase,
) -> None:
    layer, h = case.layer, case.checkpoint.h
    post = case.verified().post_conv[0]
    row = case.rows[0]
    new_h, keys, u = delta_rule_update(layer, h, post[layer.key_dim :], row.g, row.beta)
    k = repeat_heads(layer, keys)
    v = post[2 * layer.key_dim :].reshape(layer.num_value_heads, layer.value_head_dim)
    decayed = h * exp(row.g)[:, None, None]
    products = decayed * k[:, :, None]
    if case.pipeline is Pipeline.GGML_F32:  # ggml's dot: summed in double, rounded once
        read = ordered_sum(products.astype(np.float64), axis=1).astype(h.dtype)
    else:
        read = ordered_sum(products, axis=1)
    expected_u = (v - read) * row.beta[:, None]
    assert np.array_equal(u, expected_u)
    assert np.array_equal(new_h, write(decay(h, row.g), k, u))
    assert keys.shape == (layer.num_key_heads, layer.key_head_dim)


@pytest.mark.clause("RB-REPLAY-8")
@given(
    values=st.lists(_NORMAL_MAGNITUDES, min_size=1),
    wide=st.booleans(),
)
@example(values=[1 + 2**-9 + 2**-20], wide=False)  # BF16 drops 2**-9; hi-lo keeps it
def test_a_record_stores_k_and_u_exactly_in_fp32_and_within_its_bits_in_bf16(
    values: list[float], *, wide: bool
) -> None:
    array: Array = np.array(values, dtype=np.float64 if wide else np.float32)
    assert np.array_equal(store(array, RecordStorage.FP32), array)
    bf16, hi_lo = store(array, RecordStorage.BF16), store(array, RecordStorage.BF16_HI_LO)
    assert bf16.dtype == hi_lo.dtype == array.dtype
    assert np.array_equal(bf16, bf16_round(array).astype(array.dtype))
    exact = np.abs(array.astype(np.float64))
    # BF16 keeps 8 significant bits, a high and a low part at least 16.
    assert np.all(np.abs(bf16 - array) <= exact * 2.0**-8)
    assert np.all(np.abs(hi_lo - array) <= exact * 2.0**-16)
    assert np.all(np.abs(hi_lo - array) <= np.abs(bf16 - array))


@pytest.mark.clause("RB-REPLAY-8")
@given(k_ceiling=st.integers(1, 6), ring_length=st.integers(1, 20))
def test_replayssm_s_ring_is_l_records_whatever_k(k_ceiling: int, ring_length: int) -> None:
    start, _ = _layer_and_state(Pipeline.FLOAT64)
    if ring_length < k_ceiling:
        with pytest.raises(ValueError, match=r"cannot hold a window of"):
            ReplaySsm(
                start.layer, start.pipeline, start.checkpoint, k_ceiling, ring_length=ring_length
            )
        return
    decoder = ReplaySsm(
        start.layer, start.pipeline, start.checkpoint, k_ceiling, ring_length=ring_length
    )
    assert decoder.capacity == len(decoder.slot.ring) == ring_length
    assert (
        design_ring_rows(ReplayDesign.REPLAYSSM, k_ceiling, ring_length=ring_length) == ring_length
    )
    assert design_ring_rows(ReplayDesign.MINIMAL_PRE_CONV, k_ceiling) == k_ceiling - 1


@pytest.mark.clause("RB-REPLAY-8")
@pytest.mark.parametrize("pipeline", list(Pipeline), ids=lambda p: p.value)
def test_replayssm_rolls_back_by_moving_the_cursor_and_folds_before_a_window_that_does_not_fit(
    pipeline: Pipeline,
) -> None:
    start, windows = _layer_and_state(pipeline)
    decoder = ReplaySsm(start.layer, pipeline, start.checkpoint, 4, ring_length=5)
    decoder.verify_round(windows[0].rows, 2)
    # Four records written, two committed: the rejected ones stay, past the cursor.
    assert decoder.slot.cursor == 2
    assert decoder.slot.checkpoint is start.checkpoint
    written = list(decoder.slot.ring)
    decoder.verify_round(windows[1].rows, 2)
    assert decoder.slot.cursor == 4
    assert decoder.slot.ring[4] is written[4]
    before = decoder.state()
    decoder.verify_round(windows[2].rows, 1)  # 4 + 3 > 5: a fold first
    assert decoder.slot.cursor == 1
    assert np.array_equal(decoder.slot.checkpoint.h, before.h)


@pytest.mark.clause("RB-REPLAY-8")
def test_a_slot_reused_by_copy_checkpoints_the_state_and_resets_the_cursor() -> None:
    start, windows = _layer_and_state(Pipeline.TRANSFORMERS_BF16)
    decoder = ReplaySsm(start.layer, start.pipeline, start.checkpoint, 4, ring_length=8)
    decoder.verify_round(windows[0].rows, 3)
    state = decoder.state()
    decoder.reuse_slot()
    assert decoder.slot.cursor == 0
    assert np.array_equal(decoder.slot.checkpoint.h, state.h)
    assert decoder.state().equals(state)


# --- RB-REPLAY-9: every design's bytes, and what "minimal" is minimal for -----


def _held(values: Array, value_bytes: int, /) -> int:
    return int(values.size) * value_bytes


@pytest.mark.clause("RB-REPLAY-9")
@given(shape=shapes(), storage=st.sampled_from(RecordStorage))
@example(shape=QWEN3_NEXT_80B_A3B, storage=RecordStorage.BF16)
def test_each_design_s_row_bytes_count_what_its_ring_row_holds(
    shape: GdnShape, storage: RecordStorage
) -> None:
    layer = make_layer(shape, lambda s, _low, _high: np.zeros(s))
    pipeline, state = Pipeline.TRANSFORMERS_BF16, layer.zero_state(Pipeline.TRANSFORMERS_BF16)
    bf16, fp32 = 2, 4
    for design, decoder in (
        (ReplayDesign.SEED_ROW, SeedRowRing(layer, pipeline, state, 2)),
        (ReplayDesign.MINIMAL_PRE_CONV, MinimalRing(layer, pipeline, state, 2)),
        (ReplayDesign.POST_CONV_WITH_CONV_WINDOW, PostConvRing(layer, pipeline, state, 2)),
    ):
        row = decoder.slot.ring[0]
        arrays = dict(vars(row))
        if "row" in arrays:  # the post-conv row and its conv-window column
            arrays = {**vars(arrays.pop("row")), **arrays}
        held = sum(
            _held(values, fp32 if name in {"g", "beta"} else bf16)
            for name, values in arrays.items()
            if values is not None  # a and b: an engine pipeline's rows only
        )
        assert design_row_bytes(design, shape) == held, design
    record = ReplaySsm(layer, pipeline, state, 1, ring_length=1).slot.ring[0]
    assert isinstance(record, Record)
    held = _held(record.k, storage.value_bytes) + _held(record.u, storage.value_bytes)
    assert replayssm_record_bytes(shape, storage) == held + _held(record.g, fp32)
    assert design_row_bytes(ReplayDesign.REPLAYSSM, shape, storage=storage) == held + _held(
        record.g, fp32
    )
    raw = ReplaySsm(layer, pipeline, state, 1, ring_length=1, fold=Fold.RAW_INPUTS).slot.ring[0]
    assert isinstance(raw, Record)
    assert raw.raw is not None
    extra = _held(raw.raw.k_and_v, bf16) + _held(raw.raw.beta, fp32)
    assert (
        replayssm_record_bytes(shape, storage, raw_inputs=True)
        == held + _held(record.g, fp32) + extra
    )


@pytest.mark.clause("RB-REPLAY-9")
def test_qwen3_next_s_rows_by_design() -> None:
    shape = QWEN3_NEXT_80B_A3B
    assert {d: design_row_bytes(d, shape) for d in ReplayDesign} == {
        ReplayDesign.SEED_ROW: 24832,
        ReplayDesign.MINIMAL_PRE_CONV: 16640,
        ReplayDesign.REPLAYSSM: 24704,
        ReplayDesign.POST_CONV_WITH_CONV_WINDOW: 28928,
        ReplayDesign.SGLANG_GDN_REPLAYSSM: 24704,
    }
    assert replayssm_record_bytes(shape, RecordStorage.BF16) == 12416
    assert replayssm_record_bytes(shape, RecordStorage.FP32) == 24704
    # Ring of one slot and one layer at K = 4: K - 1 rows, or L records and a
    # conv window of K - 1 columns.
    assert design_ring_bytes(ReplayDesign.MINIMAL_PRE_CONV, 1, shape, 4, 1) == 3 * 16640
    assert (
        design_ring_bytes(ReplayDesign.REPLAYSSM, 1, shape, 4, 1)
        == REPLAYSSM_RING_LENGTH * 24704 + 3 * conv_dim(shape) * 2
    )
    assert design_ring_bytes(ReplayDesign.REPLAYSSM, 0, shape, 4, 1) == 0


@pytest.mark.clause("RB-REPLAY-9")
def test_minimal_always_says_what_it_is_minimal_for() -> None:
    assert set(DESIGN_MINIMAL_FOR) == {ReplayDesign.MINIMAL_PRE_CONV}
    assert "pre-conv" in DESIGN_MINIMAL_FOR[ReplayDesign.MINIMAL_PRE_CONV]
    text = "\n".join(page.read_text(encoding="utf-8") for page in _DOCS)
    for line in text.splitlines():
        for found in re.finditer(r"\bminimal\b", line, re.IGNORECASE):
            # Each "minimal" names its design (a pre-conv row) or cites the clause.
            context = line[max(0, found.start() - 80) : found.end() + 80]
            assert re.search(
                r"pre-conv|RB-REPLAY-5|minimal_replay|`minimal-pre-conv`|DESIGN_MINIMAL_FOR",
                context,
            ), line


@pytest.mark.clause("RB-REPLAY-9")
def test_the_designs_table_of_docs_replay_shows_the_model_s_bytes() -> None:
    text = "\n".join(page.read_text(encoding="utf-8") for page in _DOCS)
    table = text.split("## The designs", 1)[1].split("\n## ", 1)[0]
    rows = {
        line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| (")
    }
    assert len(rows) == len(ReplayDesign)
    for design in ReplayDesign:
        (line,) = [row for row in rows.values() if f"`{design.value}`" in row]
        assert f"{design_row_bytes(design, QWEN3_NEXT_80B_A3B):,}" in line, design
    (replayssm,) = [row for row in rows.values() if "`replayssm`" in row]
    assert f"{replayssm_record_bytes(QWEN3_NEXT_80B_A3B, RecordStorage.BF16):,}" in replayssm


# --- RB-REPLAY-10: BF16 as a BF16 module computes it --------------------------


@pytest.mark.clause("RB-REPLAY-10")
@given(x=st.floats(-100, 100), wide=st.booleans())
@example(x=SOFTPLUS_THRESHOLD, wide=True)  # at the threshold: still log1p(exp(x))
@example(x=20.000001, wide=True)  # just above: x itself
@example(x=88.8, wide=False)  # exp would overflow float32; the branch is never taken
def test_softplus_is_torch_s_x_above_20_and_log1p_of_exp_below(x: float, *, wide: bool) -> None:
    dtype = np.float64 if wide else np.float32
    value: Array = np.array([x], dtype=dtype)
    result = softplus(value)
    assert result.dtype == dtype
    if value[0] > SOFTPLUS_THRESHOLD:
        assert result[0] == value[0]
    else:
        assert result[0] == log1p(exp(value))[0]


@pytest.mark.clause("RB-REPLAY-10")
@given(case=replay_cases(accepted=st.just))
def test_the_bf16_pipeline_rounds_the_conv_the_silu_and_beta_to_bf16(case: DrawnCase) -> None:
    verified = case.verified()
    for post, row in zip(verified.post_conv, case.rows, strict=True):
        if case.pipeline is Pipeline.TRANSFORMERS_BF16:
            assert np.array_equal(bf16_round(post), post)
            assert np.array_equal(bf16_round(row.beta), row.beta)
            assert np.array_equal(bf16_round(row.qkv), row.qkv)
        assert post.dtype == row.g.dtype == row.beta.dtype == case.pipeline.dtype


@pytest.mark.clause("RB-REPLAY-4", "RB-REPLAY-10")
@given(case=replay_cases(min_window=2, accepted=partial_accept))
def test_post_conv_rows_are_captured_in_the_dtype_their_bytes_count(case: DrawnCase) -> None:
    for row in capture_post_conv_ring(case.layer, case.verified()):
        assert row.k_and_v.dtype == case.pipeline.dtype
        if case.pipeline is Pipeline.TRANSFORMERS_BF16:
            assert np.array_equal(bf16_round(row.k_and_v), row.k_and_v)


@pytest.mark.clause("RB-REPLAY-10")
def test_the_bf16_pipeline_s_gate_is_fp32_from_bf16_parameters() -> None:
    start, _ = _layer_and_state(Pipeline.TRANSFORMERS_BF16)
    layer = replace(start.layer, a_log=np.array([0.3, -0.7]), dt_bias=np.array([1.1, 0.2]))
    token = TokenInput(
        qkv=np.zeros(8), z=np.zeros(4), a=np.array([0.1, 25.0]), b=np.array([0.5, -3.0])
    )
    g, beta = gate_and_beta(layer, token, Pipeline.TRANSFORMERS_BF16)
    assert g.dtype == beta.dtype == np.float32
    a_log, dt_bias, a = (bf16_round(x) for x in (layer.a_log, layer.dt_bias, token.a))
    assert np.array_equal(g, -exp(a_log) * softplus(a + dt_bias))
    # Above the threshold softplus is its argument: g = -exp(A_log) * (a + dt_bias).
    assert g[1] == -exp(a_log)[1] * (a[1] + dt_bias[1])
    b = bf16_round(token.b)
    assert np.array_equal(beta, bf16_round(1 / (1 + exp(-b))))
    assert not np.array_equal(beta, 1 / (1 + exp(-b)))
