# SPDX-License-Identifier: MIT OR Apache-2.0
"""Design (c): ReplaySSM, one checkpoint and a ring of L records (the replay profile; RB-REPLAY-8).

The records are (k, u, g), u = beta (v - S^T k); how they are kept
(:class:`..rows.RecordStorage`, :func:`store`) and folded (:class:`Fold`)
are parameters. Sources: ReplaySSM (Dao AI Lab with NVIDIA, 2026); SGLang's
PR #28695 (the raw-input fold) and PR #28451 (the copy-into-slot cursor
reset).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, cast

import numpy as np

from ...replay_rows import REPLAYSSM_RING_LENGTH, RecordStorage, ReplayDesign
from ..layer import (
    GdnLayer,
    LayerState,
    Pipeline,
    as_module_holds,
    bf16_round,
    conv_step,
    decay,
    delta_rule_step,
    delta_rule_update,
    repeat_heads,
    write,
)
from ..paths import PostConvRow
from ..portable import exp
from ..rounds import RecordRing, check_round, conv_from_window

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..layer import Array
    from ..paths import SeedRow

__all__ = ["Fold", "Record", "ReplaySsm", "store"]


class Fold(enum.Enum):
    """How ReplaySSM turns a checkpoint and committed records into a state.

    ``RECURRENT``: every (k, u, g) record through the second half of the
    per-token update in the same order (``decay`` then ``write``), so it
    equals the recurrent update bit for bit when the records hold the
    step's own k and u unrounded (FP32). ``RAW_INPUTS``: the closed-loop
    exact fold of SGLang PR #28695 (in the 0.5.23 wheel reachable for KDA
    models only, ``memory_pool.py`` lines 675-677): the records also keep
    the token's raw inputs (post-conv k and v, g, beta), and the fold runs
    them through the whole per-token step (:func:`.layer.delta_rule_step`),
    so it is the recurrent update's arithmetic whatever u's storage.
    ``CLOSED_FORM``:
    ``S_h = exp(G_h) S_0 + sum_j exp(G_h - G_j) k_j u_j^T`` with ``G`` the
    running sum of g: the same value in exact arithmetic, other roundings.
    """

    RECURRENT = "recurrent"
    RAW_INPUTS = "raw-inputs"
    CLOSED_FORM = "closed-form"


def store(values: Array, storage: RecordStorage, /) -> Array:
    """``values`` as a record of ``storage`` keeps them, back in their own dtype.

    ``FP32`` keeps them as they are (the state's dtype); ``BF16`` rounds to
    BF16; ``BF16_HI_LO`` keeps a BF16 high part and the BF16 rounding of what
    it missed, and reads back their sum.

    Raises:
        ValueError: a value is not finite.

    RB-REPLAY-8.
    """
    if storage is RecordStorage.FP32:
        return values.copy()
    high = bf16_round(values).astype(values.dtype)
    if storage is RecordStorage.BF16:
        return high
    low = bf16_round(values - high).astype(values.dtype)
    summed: Array = high + low
    return summed


@dataclass(frozen=True)
class Record:
    """One ReplaySSM record: the normed k per key head, u per value head, g per value head.

    ``raw`` is the token's raw inputs (post-conv k and v, g, beta) that the
    ``RAW_INPUTS`` fold replays; ``None`` for the other folds.
    """

    k: Array
    u: Array
    g: Array
    raw: PostConvRow | None = None


class ReplaySsm(RecordRing):
    """Design (c): one checkpoint, a ring of L (k, u, g) records, a fold, a conv window apart.

    The verify runs the per-token step from the state the checkpoint and the
    committed records give, and writes each token's record at ``cursor + i``;
    an accept of ``a`` moves the cursor by ``a`` (the rejected tokens' records
    stay, to be overwritten). Before a window that would not fit in the ring,
    a fold moves the committed records into the checkpoint and resets the
    cursor. The conv state is rebuilt from the round's conv window (the
    window's pre-conv columns) as the post-conv design does. A slot reused by
    copy gets the copied state as its checkpoint and a cursor reset to 0.

    Raises:
        ValueError: ``ring_length`` is below ``k_ceiling`` (a window must fit).

    RB-REPLAY-8.
    """

    design = ReplayDesign.REPLAYSSM

    def __init__(  # noqa: PLR0913 (the design's parameters, each its own)
        self,
        layer: GdnLayer,
        pipeline: Pipeline,
        initial: LayerState,
        k_ceiling: int,
        /,
        *,
        ring_length: int = REPLAYSSM_RING_LENGTH,
        storage: RecordStorage = RecordStorage.FP32,
        fold: Fold = Fold.RECURRENT,
    ) -> None:
        if ring_length < k_ceiling:
            raise ValueError(f"ring_length {ring_length} cannot hold a window of {k_ceiling}")
        self.ring_length, self.storage, self.fold_kind = ring_length, storage, fold
        super().__init__(layer, pipeline, initial, k_ceiling)

    def _zero_row(self) -> object:
        layer, dtype = self.layer, self.pipeline.dtype
        gates = np.zeros(layer.num_value_heads, dtype=dtype)
        raw = None
        if self.fold_kind is Fold.RAW_INPUTS:
            raw = PostConvRow(np.zeros(layer.key_dim + layer.value_dim, dtype=dtype), gates, gates)
        return Record(
            np.zeros((layer.num_key_heads, layer.key_head_dim), dtype=dtype),
            np.zeros((layer.num_value_heads, layer.value_head_dim), dtype=dtype),
            gates,
            raw,
        )

    def _records(self, count: int, /) -> list[Record]:
        # The ring holds only this design's rows.
        return cast("list[Record]", self.slot.ring[:count])

    def materialize(self, count: int | None = None, /) -> Array:
        """The h of the checkpoint and the first ``count`` records (default: the committed ones).

        Raises:
            ValueError: the raw-input fold meets a record without raw inputs.

        RB-REPLAY-8.
        """
        records = self._records(self.slot.cursor if count is None else count)
        h = self.slot.checkpoint.h
        if self.fold_kind is Fold.RAW_INPUTS:
            for record in records:
                if record.raw is None:
                    raise ValueError("the raw-input fold met a record without raw inputs")
                raw = record.raw
                h = delta_rule_step(self.layer, h, raw.k_and_v, raw.g, raw.beta)
            return h
        if self.fold_kind is Fold.RECURRENT or not records:
            for record in records:
                h = write(decay(h, record.g), repeat_heads(self.layer, record.k), record.u)
            return h
        return self._closed_form(h, records)

    def _closed_form(self, h: Array, records: Sequence[Record], /) -> Array:
        running = [records[0].g]
        for record in records[1:]:
            running.append(running[-1] + record.g)
        total: Array = h * exp(running[-1])[:, None, None]
        for record, cumulative in zip(records, running, strict=True):
            k = repeat_heads(self.layer, record.k)
            scale = exp(running[-1] - cumulative)[:, None, None]
            total = total + scale * (k[:, :, None] * record.u[:, None, :])
        return total

    def _before_window(self, window: int, /) -> None:
        """The fold a window needs first: when it would not fit after the committed records."""
        if self.slot.cursor + window > self.ring_length:
            self.fold()

    def verify_round(self, rows: Sequence[SeedRow], accepted: int, /) -> None:
        """Fold if needed, verify with capture of (k, u, g), move the cursor by ``accepted``.

        Raises:
            ValueError: the window or ``accepted`` is out of range.

        RB-REPLAY-8.
        """
        window = check_round(rows, accepted, self.k_ceiling)
        self._before_window(window)
        slot, layer = self.slot, self.layer
        conv, h = slot.state.conv, self.materialize()
        before = conv
        for index, row in enumerate(rows):
            conv, post = conv_step(layer, conv, row.qkv)
            k_and_v = post[layer.key_dim :]
            h, keys, u = delta_rule_update(layer, h, k_and_v, row.g, row.beta)
            raw = None
            if self.fold_kind is Fold.RAW_INPUTS:
                raw = PostConvRow(as_module_holds(k_and_v, k_and_v.dtype.type), row.g, row.beta)
            slot.ring[slot.cursor + index] = Record(
                store(keys, self.storage), store(u, self.storage), row.g, raw
            )
        slot.cursor += accepted
        if accepted < window:
            # The conv window: the pre-conv columns of the window's first K - 1 tokens.
            conv = conv_from_window(layer, before, [r.qkv for r in rows[:-1]], accepted)
        slot.state = replace(slot.state, conv=conv)
