# SPDX-License-Identifier: MIT OR Apache-2.0
"""Each replay design's reference decoder: one table (the replay profile; RB-REPLAY-6)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ..replay_rows import ReplayDesign
from .designs.minimal_pre_conv import MinimalRing
from .designs.post_conv import PostConvRing
from .designs.replayssm import ReplaySsm
from .designs.seed_row import SeedRowRing
from .designs.sglang import SglangGdnReplaySsm, sglang_ring_length

if TYPE_CHECKING:
    from .layer import GdnLayer, LayerState, Pipeline
    from .rounds import Decoder, DecoderFactory, PerVerifyRing

__all__ = ["reference_decoder"]


_PER_VERIFY: Final[dict[ReplayDesign, type[PerVerifyRing]]] = {
    ReplayDesign.SEED_ROW: SeedRowRing,
    ReplayDesign.MINIMAL_PRE_CONV: MinimalRing,
    ReplayDesign.POST_CONV_WITH_CONV_WINDOW: PostConvRing,
}


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
