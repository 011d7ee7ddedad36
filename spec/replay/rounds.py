# SPDX-License-Identifier: MIT OR Apache-2.0
"""Replay across verify rounds: the ring's lifecycle, shared by every design (the replay profile).

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
and a slot reused by copy. (RB-REPLAY-7 to RB-REPLAY-9.) A
:class:`PerVerifyRing` is the lifecycle of the designs whose checkpoint
advances to the state before every verify, :class:`RecordRing` of those
whose fold advances it; the designs themselves are in
:mod:`ssm_rollback_spec.replay.designs`, and
:func:`ssm_rollback_spec.replay.decoders.reference_decoder` gives each one's
decoder.

Sources: the seed ``000_fd8074ae8876e187.txt`` (``rollback.rs``, the replay
mode's checkpoint and K - 1 ring). Every operation is :mod:`.portable`'s or a
basic one, so the model's bits are the same on every machine.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

import numpy as np

from .layer import GdnLayer, LayerState, Pipeline, stored
from .paths import SeedRow, step

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..replay_rows import ReplayDesign
    from .layer import Array

__all__ = [
    "Decoder",
    "DecoderFactory",
    "PerVerifyRing",
    "RecordRing",
    "Slot",
    "check_round",
    "conv_from_window",
    "decode_round",
    "plain_decode",
]


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


def conv_from_window(
    layer: GdnLayer, conv: Array, columns: Sequence[Array], accepted: int, /
) -> Array:
    """The conv state after ``accepted`` tokens: the checkpoint's columns, then the window's.

    RB-REPLAY-4, RB-REPLAY-9.
    """
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


class PerVerifyRing(Decoder):
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


class RecordRing(Decoder):
    """One checkpoint and a ring of L records that a fold moves into it: designs (c) and (e).

    The state is the checkpoint and the records committed since the last
    fold; a slot reused by copy takes the copied state as its checkpoint and
    a cursor of 0. A design sets ``ring_length`` before this initialiser.

    RB-REPLAY-8.
    """

    ring_length: int

    @property
    def capacity(self) -> int:
        """Records the ring holds: L, whatever K."""
        return self.ring_length

    @abc.abstractmethod
    def materialize(self) -> Array:
        """The h of the checkpoint and the committed records."""

    def fold(self) -> None:
        """Move the committed records into the checkpoint and reset the cursor.

        RB-REPLAY-8.
        """
        slot = self.slot
        slot.checkpoint = LayerState(conv=slot.state.conv, h=self.materialize())
        slot.cursor = 0

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
