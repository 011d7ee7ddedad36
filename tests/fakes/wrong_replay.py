# SPDX-License-Identifier: MIT OR Apache-2.0
"""Deliberately wrong replays: the replay properties must reject every one.

Each is the reference replay (``spec/replay/paths.py``) with one plausible
mistake in what its ring keeps. ``test_wrong_replays.py`` runs the property
factories of ``tests/replay/checks.py`` on each, in-process, and requires a
failure from every property named in ``rejected_by``.

The wrong lifecycles (:data:`WRONG_LIFECYCLES`) are the reference designs of
``spec/replay/rounds.py`` with one mistake each across verify rounds, the
kinds real replay implementations shipped; the decode machine of
``tests/replay/machines.py`` must reject each.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

import numpy as np

from ssm_rollback_spec.replay.designs.replayssm import Fold, ReplaySsm
from ssm_rollback_spec.replay.designs.seed_row import SeedRowRing
from ssm_rollback_spec.replay.layer import LayerState, delta_rule_step, stored
from ssm_rollback_spec.replay.paths import (
    MinimalRow,
    capture_minimal_ring,
    capture_post_conv_ring,
    check_accepted,
    replay_rows,
    step,
)
from ssm_rollback_spec.replay.rounds import Slot
from ssm_rollback_spec.replay_rows import RecordStorage
from tests.replay import checks

if TYPE_CHECKING:
    from collections.abc import Callable

    from ssm_rollback_spec.replay.layer import GdnLayer, Pipeline
    from ssm_rollback_spec.replay.paths import ReplayRollback, Verified
    from ssm_rollback_spec.replay.rounds import Decoder, DecoderFactory

__all__ = [
    "CONTROLS",
    "LIFECYCLE_CONTROLS",
    "WRONG_LIFECYCLES",
    "WRONG_REPLAYS",
    "WRONG_ROW_BYTES",
    "Property",
    "WrongReplay",
]


class Property(enum.Enum):
    """A property factory of ``tests/replay/checks.py``."""

    SNAPSHOT_EQUALS_REPLAY = "snapshot_equals_replay"
    K_MINUS_1_ROWS_SUFFICE = "k_minus_1_rows_suffice"
    STATE_FIELDS_ARE_READ = "state_fields_are_read"
    POST_CONV_REBUILD = "post_conv_rebuild"

    def build(self, replay: ReplayRollback, /) -> Callable[[], None]:
        """The property, judging ``replay``."""
        factory: Callable[[ReplayRollback], Callable[[], None]] = getattr(checks, self.value)
        return factory(replay)


@dataclass(frozen=True)
class WrongReplay:
    """A wrong replay and the properties that must reject it."""

    replay: ReplayRollback
    rejected_by: tuple[Property, ...]


def _one_row_short(
    layer: GdnLayer, checkpoint: LayerState, verified: Verified, accepted: int, /
) -> LayerState:
    """A ring of K - 2 rows, replaying what it has."""
    if check_accepted(verified, accepted) == len(verified.rows):
        return verified.live
    ring = capture_minimal_ring(verified)[:-1]
    return replay_rows(layer, checkpoint, ring, min(accepted, len(ring)))


def _dropping(field: checks.Field, /) -> ReplayRollback:
    """A ring that does not keep ``field``, and so replays it as zeros."""

    def without(row: MinimalRow, layer: GdnLayer, /) -> MinimalRow:
        if field is checks.Field.G:
            return replace(row, g=np.zeros_like(row.g))
        if field is checks.Field.BETA:
            return replace(row, beta=np.zeros_like(row.beta))
        start = {checks.Field.Q: 0, checks.Field.K: layer.key_dim}.get(field, 2 * layer.key_dim)
        width = layer.value_dim if field is checks.Field.V else layer.key_dim
        qkv = row.qkv.copy()
        qkv[start : start + width] = 0
        return replace(row, qkv=qkv)

    def replay(
        layer: GdnLayer, checkpoint: LayerState, verified: Verified, accepted: int, /
    ) -> LayerState:
        if check_accepted(verified, accepted) == len(verified.rows):
            return verified.live
        ring = [without(row, layer) for row in capture_minimal_ring(verified)]
        return replay_rows(layer, checkpoint, ring, accepted)

    return replay


def _post_conv_without_conv_window(
    layer: GdnLayer, checkpoint: LayerState, verified: Verified, accepted: int, /
) -> LayerState:
    """A post-conv ring alone: h rebuilt exactly, the conv state left at the checkpoint's."""
    if check_accepted(verified, accepted) == len(verified.rows):
        return verified.live
    h = checkpoint.h
    for row in capture_post_conv_ring(layer, verified)[:accepted]:
        h = delta_rule_step(layer, h, row.k_and_v, row.g, row.beta)
    return replace(checkpoint, h=h)


def _replay_in_float64(
    layer: GdnLayer, checkpoint: LayerState, verified: Verified, accepted: int, /
) -> LayerState:
    """The right rows replayed in float64 and cast back: not the verify's dtype pipeline."""
    if check_accepted(verified, accepted) == len(verified.rows):
        return verified.live
    wide = LayerState(conv=checkpoint.conv.astype(np.float64), h=checkpoint.h.astype(np.float64))
    ring = [
        MinimalRow(
            row.qkv.astype(np.float64), row.g.astype(np.float64), row.beta.astype(np.float64)
        )
        for row in capture_minimal_ring(verified)
    ]
    rebuilt = replay_rows(
        replace(layer, conv_weight=layer.conv_weight.astype(np.float64)), wide, ring, accepted
    )
    dtype = checkpoint.h.dtype
    return LayerState(conv=rebuilt.conv.astype(dtype), h=rebuilt.h.astype(dtype))


def _seed_row_replay(
    layer: GdnLayer, checkpoint: LayerState, verified: Verified, accepted: int, /
) -> LayerState:
    """Not wrong: the seed's rows, z included, replayed (z is read by nothing)."""
    if check_accepted(verified, accepted) == len(verified.rows):
        return verified.live
    state = checkpoint
    for row in verified.rows[:accepted]:
        state, _ = step(layer, state, row.qkv, row.g, row.beta)
    return stored(layer, state)  # as the pipeline stores it (vLLM's h in BF16)


_EVERY_FIELD_REJECTED_BY: Final = (
    Property.SNAPSHOT_EQUALS_REPLAY,
    Property.STATE_FIELDS_ARE_READ,
)

#: Every wrong replay, by name.
WRONG_REPLAYS: Final = {
    "one_row_short": WrongReplay(
        _one_row_short, (Property.SNAPSHOT_EQUALS_REPLAY, Property.K_MINUS_1_ROWS_SUFFICE)
    ),
    **{
        f"dropping_{field.value}": WrongReplay(_dropping(field), _EVERY_FIELD_REJECTED_BY)
        for field in checks.STATE_FIELDS
    },
    "replay_in_float64": WrongReplay(_replay_in_float64, (Property.SNAPSHOT_EQUALS_REPLAY,)),
    "post_conv_without_conv_window": WrongReplay(
        _post_conv_without_conv_window,
        (Property.SNAPSHOT_EQUALS_REPLAY, Property.POST_CONV_REBUILD),
    ),
}

#: Replays that differ from the reference and are still right: every property passes.
CONTROLS: Final = {"seed_row_with_z": _seed_row_replay}


def _without_beta(conv_dim: int, nv: int, /) -> int:
    """A row size that forgets beta: one FP32 per value head."""
    return conv_dim * 2 + nv * 4


def _counting_z(conv_dim: int, nv: int, /) -> int:
    """A row size that keeps z too, guessing its width as half the conv channels."""
    return (conv_dim + conv_dim // 2) * 2 + nv * 8


#: Wrong minimal-row sizes that ``checks.minimal_row_bytes_match_the_ring`` must reject.
WRONG_ROW_BYTES: Final = {"without_beta": _without_beta, "counting_z": _counting_z}


# --- Wrong lifecycles across verify rounds ------------------------------------


class _AnchoredToRoundBase(ReplaySsm):
    """A round shorter than the window re-anchors the checkpoint (a llama.cpp fork's issue #345).

    Its checkpoint advance assumed every round ran the full window: on a
    shorter round it takes the round's base state as the checkpoint but keeps
    the cursor, so the records committed before the round are replayed again.
    """

    def _before_window(self, window: int, /) -> None:
        if window < self.k_ceiling:
            self.slot.checkpoint = self.state()
        super()._before_window(window)


class _CursorKeptOnReuse(ReplaySsm):
    """SGLang PR #28451's review: a slot reused by copy keeps the earlier occupant's cursor."""

    def reuse_slot(self) -> None:
        current, cursor = self.state(), self.slot.cursor
        self.slot = Slot(current, current, list(self.slot.ring), cursor)


class _FoldMissesTheLastRecord(ReplaySsm):
    """A fold that moves every committed record into the checkpoint but the last."""

    def fold(self) -> None:
        slot = self.slot
        slot.checkpoint = replace(slot.checkpoint, h=self.materialize(max(slot.cursor - 1, 0)))
        slot.cursor = 0


class _StaleRowsOfAnEarlierRound(SeedRowRing):
    """The round's rows looked up as if every round wrote a full window of K ceiling - 1 rows.

    On a shorter round the replay starts past this round's first rows, in
    slots an earlier round wrote: stale rows replayed.
    """

    def _first_slot(self, window: int, /) -> int:
        return self.capacity - (window - 1)


class _FoldingBeforeEveryWindow(ReplaySsm):
    """Not wrong: a fold before every window, whatever room the ring has left."""

    def _before_window(self, window: int, /) -> None:
        del window
        self.fold()


def _replayssm(
    design: type[ReplaySsm] = ReplaySsm,
    /,
    *,
    storage: RecordStorage = RecordStorage.FP32,
    fold: Fold = Fold.RECURRENT,
) -> DecoderFactory:
    def make(
        layer: GdnLayer,
        pipeline: Pipeline,
        initial: LayerState,
        k_ceiling: int,
        ring_length: int,
        /,
    ) -> Decoder:
        return design(
            layer, pipeline, initial, k_ceiling, ring_length=ring_length, storage=storage, fold=fold
        )

    return make


def _stale_rows(
    layer: GdnLayer, pipeline: Pipeline, initial: LayerState, k_ceiling: int, ring_length: int, /
) -> Decoder:
    del ring_length
    return _StaleRowsOfAnEarlierRound(layer, pipeline, initial, k_ceiling)


#: Every wrong lifecycle, by name; the decode machine must reject each.
WRONG_LIFECYCLES: Final = {
    "checkpoint_anchored_to_a_short_round_s_base": _replayssm(_AnchoredToRoundBase),
    "cursor_kept_when_a_slot_is_reused": _replayssm(_CursorKeptOnReuse),
    "fold_misses_the_last_committed_record": _replayssm(_FoldMissesTheLastRecord),
    "stale_rows_of_an_earlier_round_replayed": _stale_rows,
    "fold_of_u_stored_in_bf16": _replayssm(storage=RecordStorage.BF16),
    "fold_of_u_stored_in_bf16_hi_lo": _replayssm(storage=RecordStorage.BF16_HI_LO),
    "closed_form_fold": _replayssm(fold=Fold.CLOSED_FORM),
}

#: Lifecycles that differ from the references and are still right: the machine passes.
LIFECYCLE_CONTROLS: Final = {
    "replayssm_folding_before_every_window": _replayssm(_FoldingBeforeEveryWindow),
    # The closed-loop exact fold replays raw inputs: u's storage is no longer read.
    "replayssm_raw_input_fold_with_bf16_u": _replayssm(
        storage=RecordStorage.BF16, fold=Fold.RAW_INPUTS
    ),
}
