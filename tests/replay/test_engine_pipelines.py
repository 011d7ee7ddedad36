# SPDX-License-Identifier: MIT OR Apache-2.0
"""The engine pipelines compute as the engines' released kernels do (RB-REPLAY-10).

Each test pins one rounding the engines make and transformers' module does
not (or the other way round), against an independent spelling of it, so a
pipeline that drifts back to transformers' arithmetic fails.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Final

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ssm_rollback_spec.replay.layer import (
    SOFTPLUS_THRESHOLD,
    L2Norm,
    LayerState,
    Pipeline,
    TokenInput,
    bf16_round,
    conv_step,
    engine_softplus,
    gate_and_beta,
    normed_keys,
    softplus,
    stored,
)
from ssm_rollback_spec.replay.paths import (
    capture_minimal_ring,
    replay_rows,
    restore_from_snapshots,
)
from ssm_rollback_spec.replay.portable import exp, log, ordered_sum
from ssm_rollback_spec.replay.rounds import decode_round, plain_decode

from .strategies import partial_accept, replay_cases

if TYPE_CHECKING:
    from ssm_rollback_spec.replay.cases import DrawnCase

_ENGINES: Final = (Pipeline.VLLM_BF16, Pipeline.SGLANG_BF16, Pipeline.FLA_BF16)


@pytest.mark.clause("RB-REPLAY-10")
@given(x=st.floats(-30, 30, width=32))
@example(x=SOFTPLUS_THRESHOLD)
@example(x=-20.0)  # exp(x) below FP32's half ulp of 1: log(1 + exp(x)) is 0, log1p is not
def test_the_engines_softplus_rounds_one_plus_exp_before_the_log(x: float) -> None:
    value = np.array([x], dtype=np.float32)
    expected = value if x > SOFTPLUS_THRESHOLD else log(1 + exp(value))
    assert np.array_equal(engine_softplus(value), expected)
    if x == -20.0:  # the example above
        assert engine_softplus(value)[0] == 0.0
        assert softplus(value)[0] > 0.0


@pytest.mark.clause("RB-REPLAY-10")
@given(case=replay_cases(pipelines=_ENGINES))
def test_an_engine_forms_g_and_beta_in_fp32_and_never_rounds_beta(case: DrawnCase) -> None:
    row = case.rows[0]
    assert row.a is not None
    assert row.b is not None  # an engine's row keeps the gate's raw inputs
    token = TokenInput(qkv=row.qkv, z=row.z, a=row.a, b=row.b)
    g, beta = gate_and_beta(case.layer, token, case.pipeline)
    assert g.dtype == beta.dtype == np.float32
    b = bf16_round(token.b)
    assert np.array_equal(beta, 1 / (1 + exp(-b)))
    a_log, dt_bias = bf16_round(case.layer.a_log), bf16_round(case.layer.dt_bias)
    assert np.array_equal(g, -exp(a_log) * engine_softplus(bf16_round(token.a) + dt_bias))
    assert np.array_equal(case.rows[0].beta, beta)


@pytest.mark.clause("RB-REPLAY-10")
@given(case=replay_cases(pipelines=_ENGINES))
def test_each_engine_s_conv_rounds_as_its_kernel_does(case: DrawnCase) -> None:
    layer, conv, qkv = case.layer, case.checkpoint.conv, case.rows[0].qkv
    window = np.concatenate([conv, qkv.astype(np.float32)[:, None]], axis=1)
    products = window * bf16_round(layer.conv_weight)
    if case.pipeline is Pipeline.FLA_BF16:  # exact FP32 products, y * sigmoid(y)
        y = ordered_sum(products, axis=1)
        expected = bf16_round(y * (1 / (1 + exp(-y))))
    else:  # each product rounded to BF16, y / (1 + exp(-y))
        y = ordered_sum(bf16_round(products), axis=1)
        expected = bf16_round(y / (1 + exp(-y)))
    new_conv, post = conv_step(layer, conv, qkv)
    assert np.array_equal(post, expected)
    assert np.array_equal(new_conv, window[:, 1:])


@pytest.mark.clause("RB-REPLAY-10")
@given(case=replay_cases(pipelines=_ENGINES))
def test_vllm_and_sglang_multiply_by_the_reciprocal_norm_and_fla_divides(case: DrawnCase) -> None:
    layer = case.layer
    _, post = conv_step(layer, case.checkpoint.conv, case.rows[0].qkv)
    keys = post[: layer.key_dim].reshape(layer.num_key_heads, layer.key_head_dim)
    norm = np.sqrt(ordered_sum(keys * keys, axis=-1, keepdims=True) + 1e-6)
    expected = keys / norm if case.pipeline is Pipeline.FLA_BF16 else keys * (1 / norm)
    assert case.pipeline.l2norm is (
        L2Norm.DIVISION if case.pipeline is Pipeline.FLA_BF16 else L2Norm.RECIPROCAL
    )
    assert np.array_equal(normed_keys(layer, post, 0), expected)


@pytest.mark.clause("RB-REPLAY-1", "RB-REPLAY-10")
@given(case=replay_cases(min_window=2, accepted=partial_accept, pipelines=(Pipeline.VLLM_BF16,)))
def test_vllm_stores_h_in_bf16_once_a_call_not_once_a_token(case: DrawnCase) -> None:
    verified = case.verified()
    kept = restore_from_snapshots(verified, case.accepted)
    assert np.array_equal(kept.h, bf16_round(kept.h))  # a stored h is BF16 values
    rows = case.rows[: case.accepted]
    assert kept.equals(decode_round(case.layer, case.checkpoint, rows))
    ring = capture_minimal_ring(verified)
    assert kept.equals(replay_rows(case.layer, case.checkpoint, ring, case.accepted))
    # Plain decoding stores, so rounds, after every token; the same h to BF16 rounding.
    plain = plain_decode(case.layer, case.checkpoint, rows)
    assert np.all(np.abs(plain.h - kept.h) <= 2.0**-6 * np.max(np.abs(kept.h)) + 1e-30)


@pytest.mark.clause("RB-REPLAY-10")
@given(case=replay_cases(pipelines=(Pipeline.SGLANG_BF16, Pipeline.FLA_BF16)))
def test_sglang_and_fla_store_h_as_they_compute_it(case: DrawnCase) -> None:
    live = case.verified().snapshots[-1]
    assert stored(case.layer, live) is live
    wide = replace(case.layer, pipeline=Pipeline.VLLM_BF16)
    assert stored(wide, live).equals(LayerState(conv=live.conv, h=bf16_round(live.h)))
