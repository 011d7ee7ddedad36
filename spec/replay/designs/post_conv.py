# SPDX-License-Identifier: MIT OR Apache-2.0
"""Design (d): post-conv rows and a conv window (the replay profile; RB-REPLAY-4, -9)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np

from ...replay_rows import ReplayDesign
from ..layer import LayerState, as_module_holds, delta_rule_step, stored
from ..paths import PostConvRow
from ..rounds import PerVerifyRing, conv_from_window

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..layer import Array
    from ..paths import SeedRow

__all__ = ["PostConvRing"]


@dataclass(frozen=True)
class _PostConvEntry:
    """A post-conv row and its token's pre-conv column (the conv window's)."""

    row: PostConvRow
    column: Array


class PostConvRing(PerVerifyRing):
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
        conv = conv_from_window(self.layer, checkpoint.conv, columns, len(rows))
        return stored(self.layer, LayerState(conv=conv, h=h))
