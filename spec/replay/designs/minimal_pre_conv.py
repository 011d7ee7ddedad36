# SPDX-License-Identifier: MIT OR Apache-2.0
"""Design (b): minimal pre-conv rows in a per-verify ring (the replay profile; RB-REPLAY-5, -7)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import numpy as np

from ...replay_rows import ReplayDesign
from ..paths import MinimalRow, replay_rows
from ..rounds import PerVerifyRing

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..layer import Array, LayerState
    from ..paths import SeedRow

__all__ = ["MinimalRing"]


class MinimalRing(PerVerifyRing):
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
