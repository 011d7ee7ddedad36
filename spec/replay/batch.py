# SPDX-License-Identifier: MIT OR Apache-2.0
"""Replay over a batch: many sequences verified together on a pool of slots (the replay profile).

An engine verifies a batch, not a sequence. Each step is one verify of every
scheduled sequence at once: the batch's tokens are laid out flat, one window
after another (vLLM's ``query_start_loc``); each sequence names the slot
that holds its state (``state_indices``) and how many of its tokens it
accepted (``num_accepted_tokens``). Windows differ within a step: a
sequence with no drafts (a plain decode: vLLM's non-speculative rows, an
ngram step that proposed nothing) has a window of one token, others one or
several drafts. Sequences join (from a checkpoint, after a prefill or not)
and finish across steps, and a finished sequence's slot is taken by a new
one. (RB-REPLAY-12.)

What the batch must keep is simple to state: after every step, each
sequence's state is its own replay, as if it ran alone
(:func:`batch_oracle`: :func:`.rounds.decode_round` over its rounds, the
prefill a round that accepts everything). The bookkeeping that gets it
there is where engines' rollback bugs shipped (vLLM #39273, a decode with no
drafts reading slot 0; vLLM #51812, the gates gathered at the wrong token
indices), so :class:`SlotPool` keeps it as a runtime does, in overridable
steps the self-test gets wrong one at a time: a pool of slots, each with its
state, checkpoint and ring; one flat gather of the batch's gates; every
verify reading its slot before any commit writes one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol, cast

import numpy as np

from .layer import GdnLayer, LayerState, Pipeline, stored
from .paths import MinimalRow, replay_rows, step
from .rounds import Slot, decode_round

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .layer import Array
    from .paths import SeedRow

__all__ = [
    "BatchEntry",
    "BatchRuntime",
    "BatchRuntimeFactory",
    "FlatBatch",
    "SlotPool",
    "batch_oracle",
]


@dataclass(frozen=True)
class BatchEntry:
    """One sequence's part of a step: its slot, its window and how many tokens it accepted.

    ``checkpoint`` is given on the sequence's first entry only (it joins:
    the slot is taken from then on). ``prefill`` rows, on any entry before
    the sequence's first verify, run before its window and are all kept: a
    prompt, or one chunk of a prompt split over steps. An entry with no
    ``rows`` (``accepted`` 0) is such a chunk alone, a prompt row of the step
    beside the others' verifies. ``finish`` frees the slot after the step.
    """

    sequence: str
    slot: int
    rows: tuple[SeedRow, ...]
    accepted: int
    checkpoint: LayerState | None = None
    prefill: tuple[SeedRow, ...] = ()
    finish: bool = False


class BatchRuntime(Protocol):
    """A runtime's batch verify: one step in, each entry's state after it out, in entry order."""

    def step(self, batch: Sequence[BatchEntry], /) -> list[LayerState]:
        """Verify ``batch``, commit each entry's accepted tokens, and report each entry's state."""
        ...


class BatchRuntimeFactory(Protocol):
    """Builds a batch runtime for a layer, a pipeline, a slot count and a K ceiling."""

    def __call__(
        self, layer: GdnLayer, pipeline: Pipeline, slots: int, k_ceiling: int, /
    ) -> BatchRuntime:
        """A runtime with ``slots`` empty slots, windows of at most ``k_ceiling`` tokens."""
        ...


def batch_oracle(
    layer: GdnLayer, pipeline: Pipeline, steps: Sequence[Sequence[BatchEntry]], /
) -> list[list[LayerState]]:
    """Each entry's state after each step, each sequence replayed alone.

    A sequence starts from its checkpoint, keeps all of its prefill rows (in
    one chunk or several), and then each of its windows' accepted rows, one
    :func:`.rounds.decode_round` a round; no other sequence, slot or step
    enters it.

    Raises:
        ValueError: a sequence's first entry has no checkpoint.

    RB-REPLAY-12.
    """
    layer = replace(layer, pipeline=pipeline)
    states: dict[str, LayerState] = {}
    out: list[list[LayerState]] = []
    for batch in steps:
        after: list[LayerState] = []
        for entry in batch:
            if entry.checkpoint is not None:
                state = entry.checkpoint
            elif entry.sequence in states:
                state = states[entry.sequence]
            else:
                raise ValueError(f"sequence {entry.sequence!r} has no checkpoint")
            if entry.prefill:
                state = decode_round(layer, state, entry.prefill)
            if entry.rows:
                state = decode_round(layer, state, entry.rows[: entry.accepted])
            states[entry.sequence] = state
            after.append(states[entry.sequence])
        out.append(after)
    return out


@dataclass(frozen=True)
class FlatBatch:
    """A step's batch as a kernel takes it: the tokens one window after another.

    ``starts[i]`` is entry ``i``'s first token (``query_start_loc``),
    ``state_indices[i]`` its slot, ``num_accepted[i]`` its accepted count;
    ``g`` and ``beta`` are the gates of every token, ``tokens x value heads``.
    """

    rows: tuple[SeedRow, ...]
    starts: tuple[int, ...]
    lengths: tuple[int, ...]
    state_indices: tuple[int, ...]
    num_accepted: tuple[int, ...]
    g: Array
    beta: Array


def _flatten(batch: Sequence[BatchEntry], /) -> FlatBatch:
    rows = tuple(row for entry in batch for row in entry.rows)
    lengths = tuple(len(entry.rows) for entry in batch)
    starts = tuple(int(start) for start in np.cumsum((0, *lengths[:-1])))
    return FlatBatch(
        rows=rows,
        starts=starts,
        lengths=lengths,
        state_indices=tuple(entry.slot for entry in batch),
        num_accepted=tuple(entry.accepted for entry in batch),
        g=np.stack([row.g for row in rows]),
        beta=np.stack([row.beta for row in rows]),
    )


class SlotPool:
    """The reference batch runtime: a pool of slots, each with its state, checkpoint and ring.

    A step admits the joining sequences (the checkpoint written into the
    slot, the prefill run there), flattens the batch, verifies every entry
    from the state its slot holds (capturing the window's first K - 1 rows,
    with the gates gathered from the flat batch, into the slot's ring), then
    commits: an entry that accepted all K tokens keeps the live state, one
    that accepted fewer restores the slot's checkpoint and replays its
    ring's first rows. Each entry's reported state is what its slot holds.

    Raises:
        ValueError: ``slots`` or ``k_ceiling`` is below 1.

    RB-REPLAY-12.
    """

    def __init__(self, layer: GdnLayer, pipeline: Pipeline, slots: int, k_ceiling: int, /) -> None:
        if slots < 1 or k_ceiling < 1:
            raise ValueError(f"a pool needs slots and k_ceiling of 1 or more: {slots}, {k_ceiling}")
        self.layer = replace(layer, pipeline=pipeline)
        self.pipeline, self.k_ceiling = pipeline, k_ceiling
        empty = self.layer.zero_state(pipeline)
        self.slots = [Slot(empty, empty, self._zero_ring(), 0) for _ in range(slots)]
        self.owners: list[str | None] = [None] * slots

    def _zero_ring(self) -> list[object]:
        """A slot's ring as allocated: K - 1 zeroed rows, outliving the rounds that write them."""
        layer, dtype = self.layer, self.pipeline.dtype
        zeros = np.zeros(layer.num_value_heads, dtype=dtype)
        row = MinimalRow(np.zeros(layer.conv_dim, dtype=dtype), zeros, zeros)
        return [row] * (self.k_ceiling - 1)

    def _admit(self, entry: BatchEntry, /) -> None:
        """Seat the entry's sequence in its slot, then run its prompt rows there.

        A joining sequence takes the slot; a running one must hold it.
        """
        owner = self.owners[entry.slot]
        slot = self.slots[entry.slot]
        if entry.checkpoint is None:
            if owner != entry.sequence:
                raise ValueError(f"sequence {entry.sequence!r} does not hold slot {entry.slot}")
        elif owner is not None:
            raise ValueError(f"slot {entry.slot} is held by sequence {owner!r}")
        else:
            self.owners[entry.slot] = entry.sequence
            slot.state = slot.checkpoint = entry.checkpoint
        if entry.prefill:
            prefill = [_minimal(row) for row in entry.prefill]
            slot.state = slot.checkpoint = replay_rows(
                self.layer, slot.state, prefill, len(prefill)
            )

    def _read_index(self, flat: FlatBatch, entry: int, /) -> int:
        """The slot entry ``entry``'s verify reads its state from."""
        return flat.state_indices[entry]

    def _gate_index(self, flat: FlatBatch, entry: int, token: int, /) -> int:
        """The flat token index of token ``token`` of entry ``entry``'s window."""
        return flat.starts[entry] + token

    def _accepted(self, flat: FlatBatch, entry: int, /) -> int:
        """How many tokens entry ``entry`` accepted."""
        return flat.num_accepted[entry]

    def _commit_full(self, slot: Slot, live: LayerState, /) -> None:
        """An accept of the whole window: the live state becomes the slot's."""
        slot.state = stored(self.layer, live)

    def _verify(self, flat: FlatBatch, entry: int, /) -> LayerState:
        """Run entry ``entry``'s window from its slot's state, capturing its ring rows."""
        length = flat.lengths[entry]
        if not 1 <= length <= self.k_ceiling:
            raise ValueError(f"a window has 1..{self.k_ceiling} tokens, got {length}")
        slot = self.slots[flat.state_indices[entry]]
        live = self.slots[self._read_index(flat, entry)].state
        slot.checkpoint, slot.cursor = live, 0
        for token in range(length):
            row = flat.rows[flat.starts[entry] + token]
            at = self._gate_index(flat, entry, token)
            g, beta = flat.g[at], flat.beta[at]
            live, _ = step(self.layer, live, row.qkv, g, beta)
            if token < length - 1:
                slot.ring[slot.cursor] = MinimalRow(row.qkv, g, beta)
                slot.cursor += 1
        return live

    def _commit(self, flat: FlatBatch, entry: int, live: LayerState, /) -> None:
        slot = self.slots[flat.state_indices[entry]]
        accepted = self._accepted(flat, entry)
        if not 1 <= accepted <= flat.lengths[entry]:
            raise ValueError(f"accepted must be in 1..{flat.lengths[entry]}, got {accepted}")
        if accepted == flat.lengths[entry]:
            self._commit_full(slot, live)
        else:
            ring = cast("list[MinimalRow]", slot.ring)
            slot.state = replay_rows(self.layer, slot.checkpoint, ring, accepted)

    def step(self, batch: Sequence[BatchEntry], /) -> list[LayerState]:
        """Admit, verify every entry, then commit every entry; each entry's slot state.

        Raises:
            ValueError: an entry's slot is held by another sequence, a running
                sequence names a slot it does not hold, or a window or an
                accepted count is out of range.

        RB-REPLAY-12.
        """
        for entry in batch:
            self._admit(entry)
        # A prompt chunk alone has no window: only the verifying entries are flattened.
        verifying = [entry for entry in batch if entry.rows]
        if verifying:
            flat = _flatten(verifying)
            # Every verify reads its slot before any commit writes one, as one kernel call does.
            lives = [self._verify(flat, index) for index in range(len(verifying))]
            for index, live in enumerate(lives):
                self._commit(flat, index, live)
        states = [self.slots[entry.slot].state for entry in batch]
        for entry in batch:
            if entry.finish:
                self.owners[entry.slot] = None
        return states


def _minimal(row: SeedRow, /) -> MinimalRow:
    return MinimalRow(row.qkv, row.g, row.beta)
