# SPDX-License-Identifier: MIT OR Apache-2.0
"""Replay across verify rounds: the ring's lifecycle in four designs (draft; informative).

A decode is a loop of verify rounds. Round ``r`` runs a window of ``K_r =
drafts_r + 1`` tokens (the draft count may change every round: adaptive
drafting), the first being the previous round's bonus token; it accepts
``1 <= a_r <= K_r`` of them and samples a bonus token, which opens the next
window. The state the sequence must hold after round ``r`` is plain,
non-speculative decoding's over every accepted token so far
(:func:`ssm_rollback_spec.replay.paths.step`, one token at a time). (RB-REPLAY-6.)

Each design is a :class:`Decoder` that owns one verify slot (a
:class:`Slot`: the state buffer, a checkpoint, a ring and its write cursor)
and goes through the ring's whole lifecycle: checkpoint, capture, accept (a
replay, or a cursor move), fold or advance, reuse of the ring across rounds,
and a slot reused by copy. (RB-REPLAY-7 to RB-REPLAY-9.)

- :class:`SeedRowRing` (a): the seed's row, qkvz and g, beta, K - 1 rows; the
  checkpoint advances to the state before every verify.
- :class:`MinimalRing` (b): the same with z left out (RB-REPLAY-5).
- :class:`ReplaySsm` (c): one checkpoint and a ring of L (k, u, g) records,
  u = beta (v - S^T k), L independent of K; rollback moves the cursor, a fold
  moves the committed records into the checkpoint when the next window would
  not fit, and the conv state is rebuilt from a conv window kept apart.
- :class:`PostConvRing` (d): post-SiLU k and v with g and beta, K - 1 rows,
  and a conv window (RB-REPLAY-4).

Sources: the seed ``000_fd8074ae8876e187.txt`` (``rollback.rs``, the replay
mode's checkpoint and K - 1 ring); ReplaySSM (Dao AI Lab with NVIDIA, 2026)
as SGLang ships it (``sgl-project/sglang`` PR #28695, the closed-loop exact
fold; PR #28451, the copy-into-slot cursor reset). Every operation is
:mod:`.portable`'s or a basic one, so the model's bits are the same on every
machine.
"""

from __future__ import annotations

import abc
import enum
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final, Protocol, cast

import numpy as np

from .layer import (
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
from .paths import MinimalRow, PostConvRow, SeedRow, replay_rows, step
from .portable import exp
from .rows import REPLAYSSM_RING_LENGTH, RecordStorage, ReplayDesign

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .layer import Array

__all__ = [
    "Decoder",
    "DecoderFactory",
    "Fold",
    "MinimalRing",
    "PostConvRing",
    "Record",
    "ReplaySsm",
    "SeedRowRing",
    "Slot",
    "check_round",
    "plain_decode",
    "reference_decoder",
    "store",
]


class Fold(enum.Enum):
    """How ReplaySSM turns a checkpoint and committed records into a state.

    ``RECURRENT``: every (k, u, g) record through the second half of the
    per-token update in the same order (``decay`` then ``write``), so it
    equals the recurrent update bit for bit when the records hold the
    step's own k and u unrounded (FP32). ``RAW_INPUTS``: the closed-loop
    exact fold of SGLang PR #28695: the records also keep the token's raw
    inputs (post-conv k and v, g, beta), and the fold runs them through the
    whole per-token step (:func:`.layer.delta_rule_step`), so it is the
    recurrent update's arithmetic whatever u's storage. ``CLOSED_FORM``:
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


@dataclass
class Slot:
    """One verify slot's storage: the state buffer, the checkpoint, the ring and its cursor.

    ``state`` is what the verify kernel reads and writes (per-verify designs;
    ReplaySSM keeps only the conv state there). ``checkpoint`` is what the
    ring's rows start from. ``ring`` has a fixed capacity; a slot's ring starts
    zeroed, and its rows outlive the rounds that wrote them. ``cursor`` counts
    the rows written since the checkpoint (per-verify designs) or the records
    committed since the last fold (ReplaySSM).
    """

    state: LayerState
    checkpoint: LayerState
    ring: list[object]
    cursor: int


def check_round(rows: Sequence[SeedRow], accepted: int, k_ceiling: int, /) -> int:
    """The window's K, checked against the accepted count and the slot's K ceiling.

    Raises:
        ValueError: the window is empty or longer than ``k_ceiling``, or
            ``accepted`` is outside ``1..K``.

    RB-REPLAY-6.
    """
    if not 1 <= len(rows) <= k_ceiling:
        raise ValueError(f"a window has 1..{k_ceiling} tokens, got {len(rows)}")
    if not 1 <= accepted <= len(rows):
        raise ValueError(f"accepted must be in 1..{len(rows)}, got {accepted}")
    return len(rows)


def plain_decode(layer: GdnLayer, state: LayerState, rows: Sequence[SeedRow], /) -> LayerState:
    """Non-speculative decoding: every row through :func:`.paths.step`, one at a time.

    RB-REPLAY-6.
    """
    for row in rows:
        state, _ = step(layer, state, row.qkv, row.g, row.beta)
    return state


def _conv_from_window(
    layer: GdnLayer, conv: Array, columns: Sequence[Array], accepted: int, /
) -> Array:
    """The conv state after ``accepted`` tokens: the checkpoint's columns, then the window's."""
    joined = np.concatenate([conv, *(c.astype(conv.dtype)[:, None] for c in columns)], axis=1)
    return np.ascontiguousarray(joined[:, accepted : accepted + layer.conv_kernel - 1])


class Decoder(abc.ABC):
    """A design's decode loop over verify rounds, on one slot.

    Raises:
        ValueError: ``k_ceiling`` is below 1.

    RB-REPLAY-6, RB-REPLAY-7.
    """

    design: ReplayDesign

    def __init__(
        self, layer: GdnLayer, pipeline: Pipeline, initial: LayerState, k_ceiling: int, /
    ) -> None:
        if k_ceiling < 1:
            raise ValueError(f"k_ceiling must be at least 1, got {k_ceiling}")
        self.layer, self.pipeline, self.k_ceiling = layer, pipeline, k_ceiling
        self.slot = Slot(
            state=initial,
            checkpoint=initial,
            ring=[self._zero_row() for _ in range(self.capacity)],
            cursor=0,
        )

    @property
    def capacity(self) -> int:
        """Rows the slot's ring holds: K - 1 for a per-verify ring."""
        return self.k_ceiling - 1

    @abc.abstractmethod
    def _zero_row(self) -> object:
        """A ring row as a freshly allocated (zeroed) ring holds it."""

    @abc.abstractmethod
    def verify_round(self, rows: Sequence[SeedRow], accepted: int, /) -> None:
        """Verify a window of ``rows`` and keep the state after ``accepted`` of them."""

    @abc.abstractmethod
    def state(self) -> LayerState:
        """The (conv, h) state the design's rollback yields for the sequence."""

    def reuse_slot(self) -> None:
        """Copy the sequence's state into a slot whose ring an earlier occupant left.

        The new slot's ring keeps the rows and the cursor it was left with
        (here, this slot's own); what a design must reset, it resets.
        """
        current = self.state()
        self.slot = Slot(current, self.slot.checkpoint, list(self.slot.ring), self.slot.cursor)


class _PerVerifyRing(Decoder):
    """A ring of the window's first K - 1 rows and a checkpoint taken before every verify.

    Capture writes row ``i`` of the window at slot ``cursor``, the cursor
    reset at the checkpoint; a full accept keeps the live state, a partial
    one restores the checkpoint and replays the round's first ``a`` rows.
    """

    def _first_slot(self, window: int, /) -> int:
        """Where this round's rows start in the ring: where the checkpoint reset the cursor."""
        del window
        return 0

    @abc.abstractmethod
    def _capture(self, row: SeedRow, post: Array, /) -> object:
        """What the ring keeps of one window token (its row and its post-conv q, k, v)."""

    @abc.abstractmethod
    def _replay(self, checkpoint: LayerState, rows: Sequence[object], /) -> LayerState:
        """The state after running ``rows`` of the ring from ``checkpoint``."""

    def verify_round(self, rows: Sequence[SeedRow], accepted: int, /) -> None:
        """Checkpoint, verify with capture, then keep the live state or replay ``accepted`` rows.

        Raises:
            ValueError: the window or ``accepted`` is out of range.

        RB-REPLAY-7.
        """
        window = check_round(rows, accepted, self.k_ceiling)
        slot = self.slot
        slot.checkpoint, slot.cursor = slot.state, 0
        live = slot.checkpoint
        for index, row in enumerate(rows):
            live, post = step(self.layer, live, row.qkv, row.g, row.beta)
            if index < window - 1:
                slot.ring[slot.cursor] = self._capture(row, post)
                slot.cursor += 1
        if accepted == window:
            slot.state = live
            return
        start = self._first_slot(window)
        slot.state = self._replay(slot.checkpoint, slot.ring[start : start + accepted])

    def state(self) -> LayerState:
        """The slot's state buffer, after the round's accept.

        RB-REPLAY-7.
        """
        return self.slot.state


class SeedRowRing(_PerVerifyRing):
    """Design (a): the seed's rows, qkvz in BF16 and g, beta in FP32, K - 1 of them.

    RB-REPLAY-7.
    """

    design = ReplayDesign.SEED_ROW

    def _zero_row(self) -> object:
        layer, dtype = self.layer, self.pipeline.dtype
        zeros = np.zeros(layer.num_value_heads, dtype=dtype)
        return SeedRow(
            np.zeros(layer.conv_dim, dtype=dtype),
            np.zeros(layer.value_dim, dtype=dtype),
            zeros,
            zeros,
        )

    def _capture(self, row: SeedRow, post: Array, /) -> object:
        del post
        return row

    def _replay(self, checkpoint: LayerState, rows: Sequence[object], /) -> LayerState:
        # A replay never reads z (RB-REPLAY-3): the seed's rows replay as minimal ones.
        minimal = [MinimalRow(r.qkv, r.g, r.beta) for r in cast("Sequence[SeedRow]", rows)]
        return replay_rows(self.layer, checkpoint, minimal, len(minimal))


class MinimalRing(_PerVerifyRing):
    """Design (b): the minimal pre-conv row, q, k, v and g, beta (RB-REPLAY-5), K - 1 of them.

    RB-REPLAY-7.
    """

    design = ReplayDesign.MINIMAL_PRE_CONV

    def _zero_row(self) -> object:
        layer, dtype = self.layer, self.pipeline.dtype
        zeros = np.zeros(layer.num_value_heads, dtype=dtype)
        return MinimalRow(np.zeros(layer.conv_dim, dtype=dtype), zeros, zeros)

    def _capture(self, row: SeedRow, post: Array, /) -> object:
        del post
        return MinimalRow(row.qkv, row.g, row.beta)

    def _replay(self, checkpoint: LayerState, rows: Sequence[object], /) -> LayerState:
        return replay_rows(self.layer, checkpoint, cast("Sequence[MinimalRow]", rows), len(rows))


@dataclass(frozen=True)
class _PostConvEntry:
    """A post-conv row and its token's pre-conv column (the conv window's)."""

    row: PostConvRow
    column: Array


class PostConvRing(_PerVerifyRing):
    """Design (d): post-SiLU k and v, g and beta, and a conv window of pre-conv columns.

    RB-REPLAY-4, RB-REPLAY-9.
    """

    design = ReplayDesign.POST_CONV_WITH_CONV_WINDOW

    def _zero_row(self) -> object:
        layer, dtype = self.layer, self.pipeline.dtype
        zeros = np.zeros(layer.num_value_heads, dtype=dtype)
        row = PostConvRow(np.zeros(layer.key_dim + layer.value_dim, dtype=dtype), zeros, zeros)
        return _PostConvEntry(row, np.zeros(layer.conv_dim, dtype=dtype))

    def _capture(self, row: SeedRow, post: Array, /) -> object:
        # Stored as the row bytes count them: BF16 k and v in the BF16 pipeline.
        k_and_v = as_module_holds(post[self.layer.key_dim :], post.dtype.type)
        return _PostConvEntry(PostConvRow(k_and_v, row.g, row.beta), row.qkv)

    def _replay(self, checkpoint: LayerState, rows: Sequence[object], /) -> LayerState:
        h = checkpoint.h
        columns = []
        for entry in cast("Sequence[_PostConvEntry]", rows):
            h = delta_rule_step(self.layer, h, entry.row.k_and_v, entry.row.g, entry.row.beta)
            columns.append(entry.column)
        conv = _conv_from_window(self.layer, checkpoint.conv, columns, len(rows))
        return LayerState(conv=conv, h=h)


class ReplaySsm(Decoder):
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

    @property
    def capacity(self) -> int:
        """Records the ring holds: L, whatever K."""
        return self.ring_length

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

    def fold(self) -> None:
        """Move the committed records into the checkpoint and reset the cursor.

        RB-REPLAY-8.
        """
        slot = self.slot
        slot.checkpoint = LayerState(conv=slot.state.conv, h=self.materialize())
        slot.cursor = 0

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
            conv = _conv_from_window(layer, before, [r.qkv for r in rows[:-1]], accepted)
        slot.state = replace(slot.state, conv=conv)

    def state(self) -> LayerState:
        """The conv state and h from the checkpoint and the committed records.

        RB-REPLAY-8.
        """
        return LayerState(conv=self.slot.state.conv, h=self.materialize())

    def reuse_slot(self) -> None:
        """Copy the state into a slot an earlier occupant left: checkpoint it, reset the cursor.

        RB-REPLAY-7 (SGLang PR #28451's cursor reset).
        """
        current = self.state()
        self.slot = Slot(current, current, list(self.slot.ring), 0)


class DecoderFactory(Protocol):
    """Builds a decoder for a layer, a pipeline, a start state, a K ceiling and an L."""

    def __call__(
        self,
        layer: GdnLayer,
        pipeline: Pipeline,
        initial: LayerState,
        k_ceiling: int,
        ring_length: int,
        /,
    ) -> Decoder:
        """A decoder on one fresh slot (a per-verify design ignores ``ring_length``)."""
        ...


_PER_VERIFY: Final[dict[ReplayDesign, type[_PerVerifyRing]]] = {
    ReplayDesign.SEED_ROW: SeedRowRing,
    ReplayDesign.MINIMAL_PRE_CONV: MinimalRing,
    ReplayDesign.POST_CONV_WITH_CONV_WINDOW: PostConvRing,
}


def reference_decoder(design: ReplayDesign, /) -> DecoderFactory:
    """The reference decoder factory of ``design`` (ReplaySSM: FP32 records, the recurrent fold).

    RB-REPLAY-6.
    """

    def make(
        layer: GdnLayer,
        pipeline: Pipeline,
        initial: LayerState,
        k_ceiling: int,
        ring_length: int,
        /,
    ) -> Decoder:
        if design is ReplayDesign.REPLAYSSM:
            return ReplaySsm(layer, pipeline, initial, k_ceiling, ring_length=ring_length)
        return _PER_VERIFY[design](layer, pipeline, initial, k_ceiling)

    return make
