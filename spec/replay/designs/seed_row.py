# SPDX-License-Identifier: MIT OR Apache-2.0
"""Design (a): the seed's rows in a per-verify ring (the replay profile; RB-REPLAY-7)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import numpy as np

from ...replay_rows import ReplayDesign
from ..paths import MinimalRow, SeedRow, replay_rows
from ..rounds import PerVerifyRing

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..layer import Array, LayerState

__all__ = ["SeedRowRing"]


class SeedRowRing(PerVerifyRing):
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
