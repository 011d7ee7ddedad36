# SPDX-License-Identifier: MIT OR Apache-2.0
"""The seed's replay ring, where the module reserves and allocates it, and the minimal ring.

The seed's ring is the contract's (``ssm_replay_row_bytes`` and
``ssm_replay_ring_bytes`` in :mod:`ssm_rollback_spec.rollback`). The minimal ring
(RB-REPLAY-5, :mod:`ssm_rollback_spec.replay_rows`) keeps the pre-conv q, k, v and g, beta
of each token: it is minimal for the seed's design, which replays from a
checkpoint, not for SGLang's ReplaySSM, which keeps other records
(:mod:`.engines.replayssm`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypedDict

# Relative, as the rest of the package's lower floors: the sizing floor
# leans on the contract and the replay rows, never on the tools above it.
from ..replay_rows import (
    DESIGN_MINIMAL_FOR,
    ReplayDesign,
    minimal_replay_ring_bytes,
    minimal_replay_row_bytes,
)
from ..rollback import (
    SsmReplayBytesOverflowError,
    UsizeRangeError,
    ssm_replay_ring_bytes,
    ssm_replay_row_bytes,
)

if TYPE_CHECKING:
    from .dimensions import GdnDimensions

__all__ = [
    "MINIMAL_RING_SCOPE",
    "ReplayFigures",
    "ReplaySizing",
    "SizingOverflowError",
    "minimal_ring_bytes",
    "seed_ring_bytes",
    "size_replay",
]

#: What the minimal ring is minimal for, said wherever a figure calls it minimal.
#: The replay model's design (b) and its own words for its minimality.
MINIMAL_RING_SCOPE: Final = (
    f"design {ReplayDesign.MINIMAL_PRE_CONV.value}:"
    f" {DESIGN_MINIMAL_FOR[ReplayDesign.MINIMAL_PRE_CONV]}; RB-REPLAY-5; not minimal for"
    f" {ReplayDesign.REPLAYSSM.value}, whose ring is L records whatever K"
)


class SizingOverflowError(OverflowError):
    """A figure whose exact value does not fit the runtime's 64-bit usize.

    ``figure`` names it: ``row``, ``preflight``, ``pool``, ``batch`` or, in a
    sweep, ``ring``.
    """

    def __init__(self, figure: str, /) -> None:
        super().__init__(f"the {figure} size exceeds the 64-bit usize range")
        self.figure: Final = figure


def seed_ring_bytes(dimensions: GdnDimensions, k: int, slots: int, /) -> int:
    """The seed's ring: ``slots x (k - 1) x layers x row``, through the contract.

    Raises:
        SizingOverflowError: the row (``row``) or the ring (``ring``) exceeds usize.
    """
    try:
        row = ssm_replay_row_bytes(dimensions.qkvz_elems, dimensions.num_value_heads)
    except (SsmReplayBytesOverflowError, UsizeRangeError):
        raise SizingOverflowError("row") from None
    try:
        return ssm_replay_ring_bytes(dimensions.num_gdn_layers, row, k, slots)
    except (SsmReplayBytesOverflowError, UsizeRangeError):
        raise SizingOverflowError("ring") from None


def minimal_ring_bytes(dimensions: GdnDimensions, k: int, slots: int, /) -> int:
    """The ring of minimal rows (RB-REPLAY-5), over the same rows and slots as the seed's.

    Raises:
        SizingOverflowError: the ring exceeds usize (``ring``).
    """
    try:
        return minimal_replay_ring_bytes(
            dimensions.num_gdn_layers, dimensions.conv_dim, dimensions.num_value_heads, k, slots
        )
    except (SsmReplayBytesOverflowError, UsizeRangeError):
        raise SizingOverflowError("ring") from None


class ReplayFigures(TypedDict):
    """The replay figures as JSON."""

    num_gdn_layers: int
    qkvz_elems: int
    row_bytes: int
    preflight_k: int
    preflight_slots: int
    preflight_ring_bytes: int
    pool_k: int
    pool_slots: int
    pool_ring_bytes: int
    preflight_covers_pool: bool
    shortfall_bytes: int
    batch: int | None
    batch_ring_bytes: int | None
    #: Review note (docs/replay.md): the row with z left out, which is all a rebuild reads.
    minimal_replay_row_bytes: int
    #: The pool's ring of minimal rows.
    minimal_pool_ring_bytes: int
    #: What the minimal ring is minimal for.
    minimal_for: str


@dataclass(frozen=True)
class ReplaySizing:
    """The replay-ring figures a design review compares; ``*_bytes`` are exact."""

    num_gdn_layers: int
    qkvz_elems: int
    row_bytes: int
    preflight_k: int
    preflight_slots: int
    preflight_ring_bytes: int
    pool_k: int
    pool_slots: int
    pool_ring_bytes: int
    preflight_covers_pool: bool
    shortfall_bytes: int
    minimal_replay_row_bytes: int
    minimal_pool_ring_bytes: int
    batch: int | None = None
    batch_ring_bytes: int | None = None

    def as_dict(self) -> ReplayFigures:
        """The figures as a JSON-ready mapping."""
        return ReplayFigures(
            num_gdn_layers=self.num_gdn_layers,
            qkvz_elems=self.qkvz_elems,
            row_bytes=self.row_bytes,
            preflight_k=self.preflight_k,
            preflight_slots=self.preflight_slots,
            preflight_ring_bytes=self.preflight_ring_bytes,
            pool_k=self.pool_k,
            pool_slots=self.pool_slots,
            pool_ring_bytes=self.pool_ring_bytes,
            preflight_covers_pool=self.preflight_covers_pool,
            shortfall_bytes=self.shortfall_bytes,
            batch=self.batch,
            batch_ring_bytes=self.batch_ring_bytes,
            minimal_replay_row_bytes=self.minimal_replay_row_bytes,
            minimal_pool_ring_bytes=self.minimal_pool_ring_bytes,
            minimal_for=MINIMAL_RING_SCOPE,
        )


def size_replay(  # noqa: PLR0913 - each is a separate dimension of the review
    dimensions: GdnDimensions,
    /,
    *,
    num_drafts: int,
    mtp_slots: int,
    mtp_state_slots: int,
    num_intermediates: int,
    batch: int | None = None,
) -> ReplaySizing:
    """Size the replay ring where the module says it is reserved and allocated.

    Preflight reserves with ``k = num_drafts + 1`` and ``mtp_state_slots``;
    the pool allocates with ``k = num_intermediates`` and ``mtp_slots + 1``
    (the dummy slot). ``batch`` adds the pool's ring for that many requests.

    Raises:
        SizingOverflowError: a size, or an argument of the module's functions,
            exceeds the usize range.
    """
    layers = dimensions.num_gdn_layers
    preflight_k, pool_k, pool_slots = num_drafts + 1, num_intermediates, mtp_slots + 1
    figure = "row"
    try:
        row = ssm_replay_row_bytes(dimensions.qkvz_elems, dimensions.num_value_heads)
        figure = "preflight"
        preflight = ssm_replay_ring_bytes(layers, row, preflight_k, mtp_state_slots)
        figure = "pool"
        pool = ssm_replay_ring_bytes(layers, row, pool_k, pool_slots)
        figure = "batch"
        batch_ring = None if batch is None else ssm_replay_ring_bytes(layers, row, pool_k, batch)
        figure = "row"
        conv = dimensions.conv_dim
        minimal_row = minimal_replay_row_bytes(conv, dimensions.num_value_heads)
        figure = "pool"
        minimal_ring = minimal_replay_ring_bytes(
            layers, conv, dimensions.num_value_heads, pool_k, pool_slots
        )
    except (SsmReplayBytesOverflowError, UsizeRangeError):
        raise SizingOverflowError(figure) from None
    return ReplaySizing(
        num_gdn_layers=layers,
        qkvz_elems=dimensions.qkvz_elems,
        row_bytes=row,
        preflight_k=preflight_k,
        preflight_slots=mtp_state_slots,
        preflight_ring_bytes=preflight,
        pool_k=pool_k,
        pool_slots=pool_slots,
        pool_ring_bytes=pool,
        preflight_covers_pool=preflight >= pool,
        shortfall_bytes=max(pool - preflight, 0),
        batch=batch,
        batch_ring_bytes=batch_ring,
        minimal_replay_row_bytes=minimal_row,
        minimal_pool_ring_bytes=minimal_ring,
    )
