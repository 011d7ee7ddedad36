# SPDX-License-Identifier: MIT OR Apache-2.0
"""Deliberately wrong batch bookkeeping: the batch machine and the batch vectors must reject each.

Each is the reference pool (:class:`ssm_rollback_spec.replay.batch.SlotPool`)
with one mistake in the bookkeeping around the arithmetic, of the kinds
engines shipped. ``test_wrong_batches.py`` runs the batch machine of
``tests/replay/batch_machine.py`` and the cases of ``vectors/replay/batch.json``
on each.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Final

from ssm_rollback_spec.replay.batch import FlatBatch, SlotPool

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ssm_rollback_spec.replay.batch import BatchEntry, BatchRuntimeFactory
    from ssm_rollback_spec.replay.layer import LayerState
    from ssm_rollback_spec.replay.rounds import Slot

__all__ = ["WRONG_BATCHES"]

#: What an 8-bit slot index keeps of a slot.
_EIGHT_BITS: Final = 0xFF


class _ReadsSlotZeroWithoutDrafts(SlotPool):
    """A decode with no drafts reads slot 0, not its own (vLLM #39273 and #40875).

    vLLM's GDN metadata reads block ``num_accepted - 1`` of a speculative
    row's state, and a row that proposed nothing read the stale block 0.
    """

    def _read_index(self, flat: FlatBatch, entry: int, /) -> int:
        return 0 if flat.lengths[entry] == 1 else super()._read_index(flat, entry)


class _NeighbourSAcceptedCount(SlotPool):
    """Each entry takes the next entry's accepted count (capped at its own window)."""

    def _accepted(self, flat: FlatBatch, entry: int, /) -> int:
        neighbour = flat.num_accepted[(entry + 1) % len(flat.num_accepted)]
        return min(neighbour, flat.lengths[entry])


class _FullAcceptNotCommitted(SlotPool):
    """A window with drafts accepted whole is never committed: the slot keeps its checkpoint."""

    def _commit_full(self, slot: Slot, live: LayerState, /) -> None:
        if slot.cursor == 0:  # no drafts: a plain decode still commits
            super()._commit_full(slot, live)


class _GatesGatheredByLocalIndex(SlotPool):
    """The gates (a and b, so g and beta) gathered at the token's index in its own window.

    Not at its index in the flat batch, so every entry reads the first
    entry's gates (vLLM #51812: a and b not gathered with the speculative
    tokens' indices).
    """

    def _gate_index(self, flat: FlatBatch, entry: int, token: int, /) -> int:
        del flat, entry
        return token


class _EightBitSlotIndices(SlotPool):
    """Slot indices kept in 8 bits: slot 256 is slot 0's state, slot 4,095 slot 255's.

    Who holds which slot is kept right (a scheduler's table, checked by the
    request's validator); only the state each index reaches is wrong.
    """

    def _admit(self, entry: BatchEntry, /) -> None:
        # The scheduler's table is right, so the narrowed index is taken as the entry's own.
        self.owners[entry.slot] = None if entry.checkpoint is not None else entry.sequence
        super()._admit(entry)

    def step(self, batch: Sequence[BatchEntry], /) -> list[LayerState]:
        return super().step([replace(entry, slot=entry.slot & _EIGHT_BITS) for entry in batch])


#: Every wrong bookkeeping, by name.
WRONG_BATCHES: Final[dict[str, BatchRuntimeFactory]] = {
    "reads_slot_0_for_a_decode_without_drafts": _ReadsSlotZeroWithoutDrafts,
    "takes_the_neighbouring_entry_s_accepted_count": _NeighbourSAcceptedCount,
    "forgets_to_commit_a_full_accept": _FullAcceptNotCommitted,
    "gathers_the_gates_at_window_indices": _GatesGatheredByLocalIndex,
    "keeps_slot_indices_in_8_bits": _EightBitSlotIndices,
}
