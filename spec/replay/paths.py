# SPDX-License-Identifier: MIT OR Apache-2.0
"""The two rollback paths of a verify window, on the model layer (the replay profile).

A verify runs a window of K tokens (K = num_drafts + 1, as in the seed
``000_fd8074ae8876e187.txt``): the token the previous step sampled (already
committed), then the drafts. ``accepted`` counts the window tokens whose
state the sequence keeps: the first token always, plus each accepted draft,
so ``1 <= accepted <= K``. The bonus token this verify samples is not in the
window; the next verify's window starts with it. (RB-REPLAY-2.)

- Snapshot (the seed's ``Snapshot``): the verify writes the state after every
  token; a partial accept restores the snapshot after ``accepted`` tokens.
- Replay (the seed's ``Replay``, unimplemented there): the verify keeps the
  pre-verify checkpoint and a ring of the first K - 1 rows. ``accepted == K``
  keeps the live state; otherwise the checkpoint is restored and the first
  ``accepted`` ring rows are run through the same per-token step.

Also the post-conv layout some engines use (RB-REPLAY-4): a ring of post-SiLU
k and v plus g and beta rebuilds h, and a separate conv window of pre-conv
columns rebuilds the conv state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from .layer import (
    Array,
    GdnLayer,
    LayerState,
    Pipeline,
    TokenInput,
    as_module_holds,
    bf16_round,
    conv_step,
    delta_rule_step,
    gate_and_beta,
    gated_output,
    read_out,
    stored,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "MinimalRow",
    "PostConvRow",
    "ReplayRollback",
    "SeedRow",
    "Verified",
    "capture_conv_window",
    "capture_minimal_ring",
    "capture_post_conv_ring",
    "check_accepted",
    "post_conv_rollback",
    "replay_rollback",
    "replay_rows",
    "restore_from_snapshots",
    "seed_rows",
    "step",
    "verify",
]


@dataclass(frozen=True)
class SeedRow:
    """One token's row as the seed lays it out: q, k, v and z (BF16), g and beta (FP32).

    In the ``FLOAT64`` pipeline every field is float64 instead. In an engine
    pipeline the row also keeps the gate's raw inputs ``a`` and ``b`` (BF16),
    which the engines' kernels take in place of g and beta; g and beta are
    what those kernels form from them.
    """

    qkv: Array
    z: Array
    g: Array
    beta: Array
    a: Array | None = None
    b: Array | None = None


@dataclass(frozen=True)
class MinimalRow:
    """The minimal replay row: the pre-conv q, k, v, and g and beta (RB-REPLAY-3).

    An engine pipeline's row also keeps ``a`` and ``b``, as :class:`SeedRow`.
    """

    qkv: Array
    g: Array
    beta: Array
    a: Array | None = None
    b: Array | None = None


@dataclass(frozen=True)
class PostConvRow:
    """A post-conv row: the post-SiLU k and v, and g and beta (RB-REPLAY-4)."""

    k_and_v: Array
    g: Array
    beta: Array


@dataclass(frozen=True)
class Verified:
    """What a verify of one window leaves: its rows, per-token snapshots and outputs.

    ``snapshots[i]`` is the state after tokens ``0..i``; the last is the live
    state. ``post_conv[i]`` is token i's post-SiLU q, k, v.
    """

    rows: tuple[SeedRow, ...]
    snapshots: tuple[LayerState, ...]
    post_conv: tuple[Array, ...]
    outputs: tuple[Array, ...]

    @property
    def live(self) -> LayerState:
        """The state after the whole window (what an accept of all K tokens keeps)."""
        return self.snapshots[-1]


class ReplayRollback(Protocol):
    """A rollback by replay: rebuild the state after ``accepted`` tokens of ``verified``.

    It may read ``verified`` only to capture what its ring holds.
    """

    def __call__(
        self, layer: GdnLayer, checkpoint: LayerState, verified: Verified, accepted: int, /
    ) -> LayerState:
        """The state after ``accepted`` tokens, rebuilt from the checkpoint and a ring."""
        ...


def seed_rows(
    layer: GdnLayer, tokens: Sequence[TokenInput], pipeline: Pipeline, /
) -> tuple[SeedRow, ...]:
    """The rows the verify kernel consumes: qkvz rounded to BF16, g and beta in FP32.

    RB-REPLAY-1, RB-REPLAY-3.
    """
    rows = []
    for token in tokens:
        g, beta = gate_and_beta(layer, token, pipeline)
        qkv: Array
        z: Array
        if pipeline is Pipeline.FLOAT64:
            qkv, z = np.asarray(token.qkv, dtype=np.float64), np.asarray(token.z, dtype=np.float64)
        else:
            qkv, z = bf16_round(token.qkv), bf16_round(token.z)
        a = b = None
        if pipeline.engine:
            a, b = as_module_holds(token.a, np.float32), as_module_holds(token.b, np.float32)
        rows.append(SeedRow(qkv=qkv, z=z, g=g, beta=beta, a=a, b=b))
    return tuple(rows)


def step(
    layer: GdnLayer, state: LayerState, qkv: Array, g: Array, beta: Array, /
) -> tuple[LayerState, Array]:
    """One token through the conv and the gated delta rule: the new state and the post-conv q, k, v.

    Both paths run this same function, so in one pipeline they do the same
    arithmetic in the same order (RB-REPLAY-1).
    """
    conv, post = conv_step(layer, state.conv, qkv)
    h = delta_rule_step(layer, state.h, post[layer.key_dim :], g, beta)
    return LayerState(conv=conv, h=h), post


def verify(layer: GdnLayer, checkpoint: LayerState, rows: Sequence[SeedRow], /) -> Verified:
    """Run a window of rows from the checkpoint, writing a snapshot after every token.

    The chain carries the state as it computes it; each snapshot is the state
    as the pipeline stores it (:func:`.layer.stored`: vLLM's h in BF16).

    Raises:
        ValueError: the window is empty (K is at least 1).

    RB-REPLAY-1.
    """
    if not rows:
        raise ValueError("verify: a window has at least one token")
    state = checkpoint
    snapshots, post_conv, outputs = [], [], []
    for row in rows:
        state, post = step(layer, state, row.qkv, row.g, row.beta)
        snapshots.append(stored(layer, state))
        post_conv.append(post)
        outputs.append(gated_output(layer, read_out(layer, state.h, post), row.z))
    return Verified(tuple(rows), tuple(snapshots), tuple(post_conv), tuple(outputs))


def check_accepted(verified: Verified, accepted: int, /) -> int:
    """The accepted count, checked to be in ``1..K``.

    Raises:
        ValueError: ``accepted`` is outside ``1..K``.

    RB-REPLAY-2.
    """
    if not 1 <= accepted <= len(verified.rows):
        raise ValueError(f"accepted must be in 1..{len(verified.rows)}, got {accepted}")
    return accepted


def restore_from_snapshots(verified: Verified, accepted: int, /) -> LayerState:
    """The snapshot path: the state after ``accepted`` tokens, as the verify wrote it.

    Raises:
        ValueError: ``accepted`` is outside ``1..K``.

    RB-REPLAY-1.
    """
    return verified.snapshots[check_accepted(verified, accepted) - 1]


def capture_minimal_ring(verified: Verified, /) -> tuple[MinimalRow, ...]:
    """The replay ring of a window: its first K - 1 rows, without z.

    RB-REPLAY-2, RB-REPLAY-3.
    """
    return tuple(MinimalRow(row.qkv, row.g, row.beta, row.a, row.b) for row in verified.rows[:-1])


def replay_rows(
    layer: GdnLayer, checkpoint: LayerState, ring: Sequence[MinimalRow], count: int, /
) -> LayerState:
    """Restore the checkpoint and run the first ``count`` ring rows through :func:`step`.

    One call, as one kernel launch: the result is stored once, at the end.

    Raises:
        ValueError: the ring holds fewer than ``count`` rows.

    RB-REPLAY-1.
    """
    if count > len(ring):
        raise ValueError(f"replay_rows: {count} rows asked of a ring of {len(ring)}")
    state = checkpoint
    for row in ring[:count]:
        state, _ = step(layer, state, row.qkv, row.g, row.beta)
    return stored(layer, state)


def replay_rollback(
    layer: GdnLayer, checkpoint: LayerState, verified: Verified, accepted: int, /
) -> LayerState:
    """The replay path: keep the live state on a full accept, else replay ``accepted`` rows.

    Raises:
        ValueError: ``accepted`` is outside ``1..K``.

    RB-REPLAY-1, RB-REPLAY-2.
    """
    if check_accepted(verified, accepted) == len(verified.rows):
        return verified.live
    return replay_rows(layer, checkpoint, capture_minimal_ring(verified), accepted)


def capture_post_conv_ring(layer: GdnLayer, verified: Verified, /) -> tuple[PostConvRow, ...]:
    """A post-conv ring: the first K - 1 tokens' post-SiLU k and v, g and beta.

    k and v are stored as :func:`.rows.post_conv_row_bytes` counts them: BF16
    values in the BF16 pipelines (which their SiLU output already is, so
    nothing is lost), float64 in ``FLOAT64``.

    Raises:
        ValueError: a value is not finite.

    RB-REPLAY-4.
    """
    return tuple(
        PostConvRow(as_module_holds(post[layer.key_dim :], post.dtype.type), row.g, row.beta)
        for post, row in zip(verified.post_conv[:-1], verified.rows[:-1], strict=True)
    )


def capture_conv_window(verified: Verified, /) -> Array:
    """The conv window a post-conv ring keeps beside it: the first K - 1 pre-conv columns.

    RB-REPLAY-4.
    """
    dtype = verified.live.conv.dtype
    columns = [row.qkv.astype(dtype) for row in verified.rows[:-1]]
    if not columns:
        return np.zeros((verified.live.conv.shape[0], 0), dtype=dtype)
    return np.stack(columns, axis=1)


def post_conv_rollback(
    layer: GdnLayer, checkpoint: LayerState, verified: Verified, accepted: int, /
) -> LayerState:
    """The post-conv layout's rollback: h from post-conv rows, conv from the conv window.

    Raises:
        ValueError: ``accepted`` is outside ``1..K``.

    RB-REPLAY-4.
    """
    if check_accepted(verified, accepted) == len(verified.rows):
        return verified.live
    h = checkpoint.h
    for row in capture_post_conv_ring(layer, verified)[:accepted]:
        h = delta_rule_step(layer, h, row.k_and_v, row.g, row.beta)
    columns = np.concatenate([checkpoint.conv, capture_conv_window(verified)], axis=1)
    kept = layer.conv_kernel - 1
    conv = np.ascontiguousarray(columns[:, accepted : accepted + kept])
    return stored(layer, LayerState(conv=conv, h=h))
