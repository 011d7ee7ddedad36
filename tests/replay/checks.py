# SPDX-License-Identifier: MIT OR Apache-2.0
"""The replay properties as factories over the rollback they judge.

Each factory returns a Hypothesis property for one replay rollback (or one
row-size function). ``test_replay_model.py`` runs them on the reference;
``tests/replay/test_wrong_replays.py`` runs the same ones on deliberately
wrong replays and requires each to fail.
"""

from __future__ import annotations

import enum
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from ssm_rollback_spec.replay.layer import Pipeline, bf16_round
from ssm_rollback_spec.replay.paths import (
    MinimalRow,
    ReplayRollback,
    SeedRow,
    restore_from_snapshots,
)
from ssm_rollback_spec.replay_rows import GdnShape

from .strategies import POST_CONV_PIPELINES, partial_accept, replay_cases, shapes

if TYPE_CHECKING:
    from collections.abc import Callable

    from ssm_rollback_spec.replay.cases import DrawnCase
    from ssm_rollback_spec.replay.layer import Array, LayerState


class Field(enum.Enum):
    """A field of the seed's row, and the channel a perturbation changes."""

    Q = "q"
    K = "k"
    V = "v"
    Z = "z"
    G = "g"
    BETA = "beta"


#: The fields the rebuilt state depends on (RB-REPLAY-3); z is the only other one.
STATE_FIELDS = (Field.Q, Field.K, Field.V, Field.G, Field.BETA)


def _stored(values: Array, pipeline: Pipeline, /) -> Array:
    rounded = values if pipeline is Pipeline.FLOAT64 else bf16_round(values)
    return np.asarray(rounded, dtype=values.dtype)


def perturb(case: DrawnCase, index: int, field: Field, /) -> tuple[SeedRow, ...]:
    """The rows with ``field`` of row ``index`` changed, stored as the pipeline stores it."""
    row = case.rows[index]
    key_dim = case.layer.key_dim
    if field in {Field.Q, Field.K, Field.V}:
        channel = {Field.Q: 0, Field.K: key_dim, Field.V: 2 * key_dim}[field]
        qkv = row.qkv.copy()
        qkv[channel] += 1.0
        changed = replace(row, qkv=_stored(qkv, case.pipeline))
    elif field is Field.Z:
        z = row.z.copy()
        z[0] += 1.0
        changed = replace(row, z=_stored(z, case.pipeline))
    elif field is Field.G:
        changed = replace(row, g=row.g - row.g.dtype.type(0.5))
    else:
        changed = replace(row, beta=row.beta * row.beta.dtype.type(0.5))
    return (*case.rows[:index], changed, *case.rows[index + 1 :])


def _show(state: LayerState, /) -> str:
    return f"conv={state.conv.tolist()} h={state.h.tolist()}"


def assert_rebuilds(replay: ReplayRollback, case: DrawnCase, /) -> None:
    """The replay's state is, bit for bit, the snapshot after ``case.accepted`` tokens."""
    verified = case.verified()
    expected = restore_from_snapshots(verified, case.accepted)
    rebuilt = replay(case.layer, case.checkpoint, verified, case.accepted)
    assert rebuilt.equals(expected), (
        f"K={case.window} accepted={case.accepted} {case.pipeline.value}:\n"
        f"snapshot {_show(expected)}\nreplay   {_show(rebuilt)}"
    )


def snapshot_equals_replay(replay: ReplayRollback, /) -> Callable[[], None]:
    """RB-REPLAY-1: for any window, accepted count and pipeline, replay equals the snapshot."""

    @given(case=replay_cases())
    def check(case: DrawnCase) -> None:
        assert_rebuilds(replay, case)

    return check


def k_minus_1_rows_suffice(replay: ReplayRollback, /) -> Callable[[], None]:
    """RB-REPLAY-2: the longest partial accept (K-1) and the full accept (K) both rebuild."""

    @given(case=replay_cases(min_window=2, accepted=lambda k: st.sampled_from((k - 1, k))))
    def check(case: DrawnCase) -> None:
        assert_rebuilds(replay, case)

    return check


def state_fields_are_read(replay: ReplayRollback, /) -> Callable[[], None]:
    """RB-REPLAY-3: the rebuild follows q, k, v, g and beta of the ring, and not z.

    Changing one field of the last replayed row changes the snapshot state
    (q, k, v, g, beta) or leaves it as it was (z); the replay must agree in both.
    """

    @given(
        case=replay_cases(min_window=2, accepted=partial_accept, generic=True),
        field=st.sampled_from(Field),
    )
    def check(case: DrawnCase, field: Field) -> None:
        changed = replace(case, rows=perturb(case, case.accepted - 1, field))
        before = restore_from_snapshots(case.verified(), case.accepted)
        after = restore_from_snapshots(changed.verified(), case.accepted)
        if field is Field.Z:
            assert after.equals(before), "z changed the state"
        else:
            assert not after.equals(before), f"{field.value} left the state as it was"
        assert_rebuilds(replay, changed)

    return check


def post_conv_rebuild(replay: ReplayRollback, /) -> Callable[[], None]:
    """RB-REPLAY-4: a post-conv ring with its conv window rebuilds the snapshot's state."""

    @given(case=replay_cases(min_window=2, accepted=partial_accept, pipelines=POST_CONV_PIPELINES))
    def check(case: DrawnCase) -> None:
        assert_rebuilds(replay, case)

    return check


def minimal_row_bytes_match_the_ring(row_bytes: Callable[[int, int], int], /) -> Callable[[], None]:
    """RB-REPLAY-5: the row-size function counts what a minimal ring row holds."""

    @given(shape=shapes())
    @example(
        shape=GdnShape(
            num_key_heads=16,
            key_head_dim=128,
            num_value_heads=32,
            value_head_dim=128,
            conv_kernel=4,
        )
    )
    def check(shape: GdnShape) -> None:
        conv_dim = 2 * shape["num_key_heads"] * shape["key_head_dim"]
        conv_dim += shape["num_value_heads"] * shape["value_head_dim"]
        nv = shape["num_value_heads"]
        row = MinimalRow(
            qkv=np.zeros(conv_dim, dtype=np.float32),
            g=np.zeros(nv, dtype=np.float32),
            beta=np.zeros(nv, dtype=np.float32),
        )
        # BF16 stores 2 bytes a value; g and beta are FP32 (the seed's gates_buf).
        held = row.qkv.size * 2 + (row.g.size + row.beta.size) * row.g.itemsize
        assert row_bytes(conv_dim, nv) == held

    return check
