# SPDX-License-Identifier: MIT OR Apache-2.0
"""Deliberately wrong replays: the replay properties must reject every one.

Each is the reference replay (``spec/replay/paths.py``) with one plausible
mistake in what its ring keeps. ``test_wrong_replays.py`` runs the property
factories of ``tests/replay/checks.py`` on each, in-process, and requires a
failure from every property named in ``rejected_by``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

import numpy as np

from spec.replay.layer import LayerState, delta_rule_step
from spec.replay.paths import (
    MinimalRow,
    capture_minimal_ring,
    capture_post_conv_ring,
    check_accepted,
    replay_rows,
    step,
)
from tests.replay import checks

if TYPE_CHECKING:
    from collections.abc import Callable

    from spec.replay.layer import GdnLayer
    from spec.replay.paths import ReplayRollback, Verified

__all__ = ["CONTROLS", "WRONG_REPLAYS", "WRONG_ROW_BYTES", "Property", "WrongReplay"]


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
    return state


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
