# SPDX-License-Identifier: MIT OR Apache-2.0
"""Design (e): SGLang 0.5.23's GDN ReplaySSM as it runs (the replay profile; RB-REPLAY-11).

Source: the SGLang 0.5.23 wheel (``gdn_replayssm_spec_decode.py``,
``memory_pool.py``), cited line by line below.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, cast

import numpy as np

from ...replay_rows import REPLAYSSM_RING_LENGTH, ReplayDesign
from ..layer import (
    GdnLayer,
    LayerState,
    Pipeline,
    bf16_round,
    conv_step,
    normed_keys,
    repeat_heads,
)
from ..portable import exp, ordered_sum
from ..rounds import RecordRing, check_round, conv_from_window

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..layer import Array
    from ..paths import SeedRow

__all__ = ["SglangGdnReplaySsm", "SplitRecord", "sglang_ring_length"]


def _split(values: Array, /) -> tuple[Array, Array]:
    """A BF16 high part and the BF16 rounding of what it missed, both in ``values``' dtype."""
    high = bf16_round(values).astype(values.dtype)
    low = bf16_round(values - high).astype(values.dtype)
    return high, low


def _running(gates: Sequence[Array], /) -> list[Array]:
    """The running sums of ``gates``, added left to right."""
    running = [gates[0]]
    for gate in gates[1:]:
        running.append(running[-1] + gate)
    return running


@dataclass(frozen=True)
class SplitRecord:
    """One record of SGLang's GDN ReplaySSM ring: u and the normed k in two BF16 parts, g FP32.

    ``d_high`` and ``d_low`` (per value head) are u's BF16 rounding and the
    BF16 rounding of what it missed; ``k_high`` and ``k_low`` (per key head)
    the same of the L2-normed key; ``g`` per value head, FP32.
    """

    d_high: Array
    d_low: Array
    k_high: Array
    k_low: Array
    g: Array


class SglangGdnReplaySsm(RecordRing):
    """Design (e): SGLang 0.5.23's GDN ReplaySSM (``--enable-linear-replayssm-spec``), as it runs.

    The slot keeps an FP32 checkpoint h, a circular ring of L records
    (:class:`SplitRecord`) and two cursors: ``cache_base``, where the
    committed history starts, and ``slot.cursor`` (SGLang's ``write_pos``),
    the records committed since the last fold. Record ``i`` of the history
    is at ``(cache_base + i) & (L - 1)``.

    - **Verify** (``gdn_replayssm_spec_circular_kernel``): the state before
      the window is never formed; ``S^T k`` is the checkpoint's read decayed
      by the history's total gate plus each history record's high part of u
      decayed to the window, times its high key part's product with k. u of
      the window's tokens comes from the chunked UT transform: ``A[i, j] =
      beta_i exp(G_i - G_j) k_i . k_j`` below the diagonal, ``T = (I + A)^-1``
      by forward substitution, ``R_s = beta_s (v_s - exp(G_s) S^T k_s)``,
      ``u = T R``. Each window token's record is written at ``(cache_base +
      write_pos + s) & (L - 1)``; g and beta are formed in FP32 inside the
      kernel, the L2 norm multiplies by the reciprocal.
    - **Commit** (``_advance_gdn_spec_cursors_kernel``): ``write_pos`` grows
      by the accepted count; then, *after* the commit, a fold when
      ``write_pos + 2 K > L`` (an FP32 checkpoint), or whenever ``write_pos >
      0`` (a checkpoint that is not FP32: ``fold_every_commit``).
    - **Fold** (``gdn_replayssm_compact_commit_kernel``): the closed form
      ``S = exp(G) S_0 + sum_j k_j (exp(G - G_j) u_j)^T``, u read back as high
      plus low, each decayed u split again into high and low parts, and the
      four products of key parts and u parts summed; then ``cache_base``
      moves past the folded records and ``write_pos`` is 0
      (``_finish_gdn_replayssm_circular_fold_kernel``).

    The state the design yields is the checkpoint and the committed history
    materialized by the fold's arithmetic (what SGLang's track rows store).
    The conv state is rebuilt from the round's conv window, as design (c).
    ``k_ceiling`` is SGLang's ``max_spec_len`` (the draft token count, K).

    Only an FP32 checkpoint's verify arithmetic is modelled (SGLang's
    default ``mamba_ssm_dtype``); ``fold_every_commit`` gives the other
    checkpoint dtypes' fold schedule, not their BF16 tensor-core verify.

    Raises:
        ValueError: ``ring_length`` is not a power of two of at least ``2 * k_ceiling``.

    RB-REPLAY-8, RB-REPLAY-11.
    """

    design = ReplayDesign.SGLANG_GDN_REPLAYSSM

    def __init__(  # noqa: PLR0913 (the design's parameters, each its own)
        self,
        layer: GdnLayer,
        pipeline: Pipeline,
        initial: LayerState,
        k_ceiling: int,
        /,
        *,
        ring_length: int = REPLAYSSM_RING_LENGTH,
        fold_every_commit: bool = False,
    ) -> None:
        if ring_length < 2 * k_ceiling or ring_length & (ring_length - 1):
            raise ValueError(
                f"ring_length {ring_length} must be a power of two of at least "
                f"2 * k_ceiling = {2 * k_ceiling}"
            )
        self.ring_length, self.fold_every_commit, self.cache_base = (
            ring_length,
            fold_every_commit,
            0,
        )
        super().__init__(layer, pipeline, initial, k_ceiling)

    def _zero_row(self) -> object:
        layer, dtype = self.layer, self.pipeline.dtype
        values = np.zeros((layer.num_value_heads, layer.value_head_dim), dtype=dtype)
        keys = np.zeros((layer.num_key_heads, layer.key_head_dim), dtype=dtype)
        gates = np.zeros(layer.num_value_heads, dtype=dtype)
        return SplitRecord(values, values, keys, keys, gates)

    def physical(self, index: int, /) -> int:
        """The ring slot of history record ``index``: ``(cache_base + index) & (L - 1)``.

        RB-REPLAY-11.
        """
        return (self.cache_base + index) & (self.ring_length - 1)

    def history(self) -> list[SplitRecord]:
        """The committed records since the last fold, oldest first.

        RB-REPLAY-11.
        """
        ring = cast("list[SplitRecord]", self.slot.ring)
        return [ring[self.physical(index)] for index in range(self.slot.cursor)]

    def materialize(self) -> Array:
        """The h of the checkpoint and the committed history, by the fold's closed form.

        RB-REPLAY-11.
        """
        h = self.slot.checkpoint.h
        records = self.history()
        if not records:
            return h
        running = _running([record.g for record in records])
        total = running[-1]
        parts: list[tuple[Array, Array]] = []
        for record, cumulative in zip(records, running, strict=True):
            updates = (record.d_high + record.d_low) * exp(total - cumulative)[:, None]
            parts.append(_split(updates))
        delta: Array | None = None
        for key_part in (0, 1):
            for u_part in (0, 1):
                for record, split in zip(records, parts, strict=True):
                    keys = record.k_low if key_part else record.k_high
                    k = repeat_heads(self.layer, keys)
                    term = k[:, :, None] * split[u_part][:, None, :]
                    delta = term if delta is None else delta + term
        assert delta is not None
        folded: Array = h * exp(total)[:, None, None] + delta
        return folded.astype(h.dtype)

    def _read(self, k: Array, /) -> Array:
        """``S^T k`` of the state before the window, as the verify forms it (per value head)."""
        h = self.slot.checkpoint.h
        own = ordered_sum(h * k[:, :, None], axis=1)
        records = self.history()
        if not records:
            return own
        running = _running([record.g for record in records])
        total = running[-1]
        history: Array | None = None
        for record, cumulative in zip(records, running, strict=True):
            scaled = record.d_high * exp(total - cumulative)[:, None]
            score = ordered_sum(repeat_heads(self.layer, record.k_high) * k, axis=1)
            term = scaled * score[:, None]
            history = term if history is None else history + term
        assert history is not None
        read: Array = exp(total)[:, None] * own + history
        return read

    def window_records(
        self, rows: Sequence[SeedRow], posts: Sequence[Array], /
    ) -> list[SplitRecord]:
        """The records a verify writes for the window: u by the chunked UT transform.

        RB-REPLAY-11.
        """
        layer = self.layer
        keys = [normed_keys(layer, post, layer.key_dim) for post in posts]
        k = [repeat_heads(layer, key) for key in keys]
        nv, dv = layer.num_value_heads, layer.value_head_dim
        values = [post[2 * layer.key_dim :].reshape(nv, dv) for post in posts]
        running = _running([row.g for row in rows])
        size = len(rows)
        # A[i][j] = beta_i exp(G_i - G_j) k_i . k_j below the diagonal; T = I + N.
        n: list[list[Array]] = [[np.zeros(nv, dtype=running[0].dtype)] * size for _ in rows]
        for i in range(1, size):
            minus_a = [
                -(rows[i].beta * exp(running[i] - running[j]) * ordered_sum(k[i] * k[j], axis=1))
                if j < i
                else np.zeros(nv, dtype=running[0].dtype)
                for j in range(size)
            ]
            if i >= 2:  # rows 0 and 1 need no substitution
                minus_a = [
                    minus_a[c]
                    + ordered_sum(np.stack([minus_a[r] * n[r][c] for r in range(size)]), axis=0)
                    for c in range(size)
                ]
            n[i] = minus_a
        one = np.ones(nv, dtype=running[0].dtype)
        residuals = [
            row.beta[:, None] * (value - exp(cumulative)[:, None] * self._read(key))
            for row, value, cumulative, key in zip(rows, values, running, k, strict=True)
        ]
        records = []
        for i, row in enumerate(rows):
            d: Array = np.zeros_like(residuals[0])
            for j in range(size):
                t = n[i][j] + one if i == j else n[i][j]
                d = d + residuals[j] * t[:, None]
            d_high, d_low = _split(d)
            k_high, k_low = _split(keys[i])
            records.append(SplitRecord(d_high, d_low, k_high, k_low, row.g))
        return records

    def _folds_after_commit(self) -> bool:
        if self.fold_every_commit:
            return self.slot.cursor > 0
        return self.slot.cursor + 2 * self.k_ceiling > self.ring_length

    def fold(self) -> None:
        """Fold the history into the checkpoint, move ``cache_base`` past it, reset ``write_pos``.

        RB-REPLAY-11.
        """
        moved = self.physical(self.slot.cursor)
        super().fold()
        self.cache_base = moved

    def verify_round(self, rows: Sequence[SeedRow], accepted: int, /) -> None:
        """Verify (records by the UT transform), commit ``accepted``, fold if the schedule says.

        Raises:
            ValueError: the window or ``accepted`` is out of range.

        RB-REPLAY-11.
        """
        window = check_round(rows, accepted, self.k_ceiling)
        slot, layer = self.slot, self.layer
        conv = before = slot.state.conv
        posts = []
        for row in rows:
            conv, post = conv_step(layer, conv, row.qkv)
            posts.append(post)
        for index, record in enumerate(self.window_records(rows, posts)):
            slot.ring[self.physical(slot.cursor + index)] = record
        slot.cursor += accepted
        if accepted < window:
            conv = conv_from_window(layer, before, [r.qkv for r in rows[:-1]], accepted)
        slot.state = replace(slot.state, conv=conv)
        if self._folds_after_commit():
            self.fold()

    def reuse_slot(self) -> None:
        """A fresh request row: the state as checkpoint, ``write_pos`` and ``cache_base`` 0.

        SGLang 0.5.23 keys the GDN spec cursors by request row and zeroes
        them when a fresh row is allocated (``memory_pool.py`` lines
        1578-1589); the ring's records stay.

        RB-REPLAY-11.
        """
        super().reuse_slot()
        self.cache_base = 0


def sglang_ring_length(k_ceiling: int, ring_length: int, /) -> int:
    """The least power of two of at least ``ring_length`` and ``2 * k_ceiling``.

    SGLang's GDN ring must be a power of two (``gdn_replayssm_spec_decode.py``
    lines 917-919) holding two windows (its early fold's margin, lines
    854-864).

    RB-REPLAY-11.
    """
    length = 1
    while length < max(ring_length, 2 * k_ceiling):
        length *= 2
    return length
