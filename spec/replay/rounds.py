# SPDX-License-Identifier: MIT OR Apache-2.0
"""Replay across verify rounds: the ring's lifecycle in five designs (draft; informative).

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
- :class:`ReplaySsm` (c): the ReplaySSM idea, parameterised: one checkpoint
  and a ring of L (k, u, g) records, u = beta (v - S^T k), L independent of
  K; rollback moves the cursor, a fold moves the committed records into the
  checkpoint before a window that would not fit, and the conv state is
  rebuilt from a conv window kept apart. Its exact folds (FP32 records
  folded record by record, or the raw inputs replayed) are what a ReplaySSM
  needs for bit identity; no engine's GDN path runs them as modelled here.
- :class:`PostConvRing` (d): post-SiLU k and v with g and beta, K - 1 rows,
  and a conv window (RB-REPLAY-4).
- :class:`SglangGdnReplaySsm` (e): SGLang 0.5.23's GDN ReplaySSM as its
  released code runs it: a circular ring with a moving ``cache_base``,
  records of BF16 high and low parts, u from the chunked UT transform, a
  fold by the closed form after the commit that leaves no room for two
  windows (RB-REPLAY-11).

Sources: the seed ``000_fd8074ae8876e187.txt`` (``rollback.rs``, the replay
mode's checkpoint and K - 1 ring); ReplaySSM (Dao AI Lab with NVIDIA, 2026);
SGLang's PR #28695 (the closed-loop exact fold over raw inputs, which the
0.5.23 wheel enables for KDA models only: ``replayssm_spec_fold`` is set
when ``cache_params.is_kda``, ``sglang/srt/mem_cache/memory_pool.py`` lines
675-677, and ``gdn_backend.py`` lines 632-636 take that path only with it)
and PR #28451 (the copy-into-slot cursor reset); the SGLang 0.5.23 wheel
itself for design (e). Every operation is :mod:`.portable`'s or a basic
one, so the model's bits are the same on every machine.
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
    normed_keys,
    repeat_heads,
    stored,
    write,
)
from .paths import MinimalRow, PostConvRow, SeedRow, replay_rows, step
from .portable import exp, ordered_sum
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
    "SglangGdnReplaySsm",
    "Slot",
    "SplitRecord",
    "check_round",
    "decode_round",
    "plain_decode",
    "reference_decoder",
    "sglang_ring_length",
    "store",
]


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

    Each token is its own kernel call, so each state is stored
    (:func:`.layer.stored`) before the next token reads it.

    RB-REPLAY-6.
    """
    for row in rows:
        state, _ = step(layer, state, row.qkv, row.g, row.beta)
        state = stored(layer, state)
    return state


def decode_round(layer: GdnLayer, state: LayerState, rows: Sequence[SeedRow], /) -> LayerState:
    """The state a verify keeps after ``rows``, its accepted rows: one call, stored once.

    What a snapshot engine keeps after a round (vLLM 0.33.0: h carried in
    FP32 through the window, the accepted token's snapshot stored). In every
    pipeline whose stored h is the computed one this is :func:`plain_decode`
    bit for bit; in ``vllm-bf16`` plain decoding rounds h after every token
    and this rounds it once a round.

    RB-REPLAY-6.
    """
    for row in rows:
        state, _ = step(layer, state, row.qkv, row.g, row.beta)
    return stored(layer, state)


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
        self.layer = replace(layer, pipeline=pipeline)
        self.pipeline, self.k_ceiling = pipeline, k_ceiling
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
            slot.state = stored(self.layer, live)
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
        return stored(self.layer, LayerState(conv=conv, h=h))


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


class SglangGdnReplaySsm(Decoder):
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

    @property
    def capacity(self) -> int:
        """Records the ring holds: L, whatever K."""
        return self.ring_length

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
        slot = self.slot
        slot.checkpoint = LayerState(conv=slot.state.conv, h=self.materialize())
        self.cache_base = self.physical(slot.cursor)
        slot.cursor = 0

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
            conv = _conv_from_window(layer, before, [r.qkv for r in rows[:-1]], accepted)
        slot.state = replace(slot.state, conv=conv)
        if self._folds_after_commit():
            self.fold()

    def state(self) -> LayerState:
        """The conv state and h materialized from the checkpoint and the history.

        RB-REPLAY-11.
        """
        return LayerState(conv=self.slot.state.conv, h=self.materialize())

    def reuse_slot(self) -> None:
        """A fresh request row: the state as checkpoint, ``write_pos`` and ``cache_base`` 0.

        SGLang 0.5.23 keys the GDN spec cursors by request row and zeroes
        them when a fresh row is allocated (``memory_pool.py`` lines
        1578-1589); the ring's records stay.

        RB-REPLAY-11.
        """
        current = self.state()
        self.slot = Slot(current, current, list(self.slot.ring), 0)
        self.cache_base = 0


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


def reference_decoder(design: ReplayDesign, /) -> DecoderFactory:
    """The reference decoder factory of ``design`` (ReplaySSM: FP32 records, the recurrent fold).

    SGLang's GDN ReplaySSM takes :func:`sglang_ring_length` of the L asked.

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
        if design is ReplayDesign.SGLANG_GDN_REPLAYSSM:
            length = sglang_ring_length(k_ceiling, ring_length)
            return SglangGdnReplaySsm(layer, pipeline, initial, k_ceiling, ring_length=length)
        return _PER_VERIFY[design](layer, pipeline, initial, k_ceiling)

    return make
