# SPDX-License-Identifier: MIT OR Apache-2.0
"""What the replay corpus's generators draw from (the replay profile).

The seeded streams' :func:`drawer` (no clock, no numpy random stream), the
small layers' shapes, the pipelines the model's own cases use, and the
design each engine pipeline's decodes follow. :mod:`.replay_cases` writes
the files from them.
"""

from __future__ import annotations

from math import prod
from typing import TYPE_CHECKING, Final

import numpy as np

from .. import replay_rows as rows
from ..replay.cases import DrawnCase, make_case, make_layer
from ..replay.layer import Pipeline

if TYPE_CHECKING:
    import random
    from collections.abc import Mapping

    from numpy.typing import NDArray

    from ..replay.cases import Draw
    from ..replay_rows import GdnShape

__all__ = [
    "ENGINE_DESIGNS",
    "ENGINE_SHAPE",
    "K_CEILING",
    "MODEL_PIPELINES",
    "SHAPES",
    "SNAPSHOT",
    "drawer",
    "model_cases",
]

#: The largest window of the decodes and the batches (their K ceiling).
K_CEILING: Final = 4
#: The pipelines the model's own cases use, generated first and unchanged by the engines'.
MODEL_PIPELINES: Final = (Pipeline.FLOAT64, Pipeline.TRANSFORMERS_BF16)
#: The layer of the engine cases: SGLang's verify kernel needs a key head of
#: at least 32 (``gdn_replayssm_spec_decode.py`` lines 925-931: ``BKT = BK / nk
#: >= 16`` with ``nk`` 2).
ENGINE_SHAPE: Final = rows.GdnShape(
    num_key_heads=1, key_head_dim=32, num_value_heads=2, value_head_dim=4, conv_kernel=4
)
#: The design each engine's decodes follow: vLLM restores per-token
#: snapshots, SGLang runs its GDN ReplaySSM, FLA's adapter replays minimal rows.
SNAPSHOT: Final = "snapshot"
ENGINE_DESIGNS: Final[Mapping[Pipeline, str]] = {
    Pipeline.VLLM_BF16: SNAPSHOT,
    Pipeline.SGLANG_BF16: rows.ReplayDesign.SGLANG_GDN_REPLAYSSM.value,
    Pipeline.FLA_BF16: rows.ReplayDesign.MINIMAL_PRE_CONV.value,
}

# The small layers the cases use: one key head; two value heads sharing it;
# two key heads and four value heads.
SHAPES: Final = (
    rows.GdnShape(
        num_key_heads=1, key_head_dim=2, num_value_heads=1, value_head_dim=2, conv_kernel=2
    ),
    rows.GdnShape(
        num_key_heads=1, key_head_dim=3, num_value_heads=2, value_head_dim=2, conv_kernel=3
    ),
    rows.GdnShape(
        num_key_heads=2, key_head_dim=2, num_value_heads=4, value_head_dim=2, conv_kernel=4
    ),
)


def drawer(rng: random.Random, /) -> Draw:
    """A :class:`..replay.cases.Draw` of uniform values from ``rng``'s stream."""

    def drawn(shape: tuple[int, ...], low: float, high: float, /) -> NDArray[np.float64]:
        values = [rng.uniform(low, high) for _ in range(prod(shape))]
        return np.array(values, dtype=np.float64).reshape(shape)

    return drawn


def model_cases(
    rng: random.Random, windows: tuple[int, ...], shapes: tuple[GdnShape, ...], /
) -> list[DrawnCase]:
    """The model pipelines' single windows: each shape, window and partial accept."""
    draw = drawer(rng)
    built = []
    for shape in shapes:
        layer = make_layer(shape, draw)
        for pipeline in MODEL_PIPELINES:
            for window in windows:
                base = make_case(layer, pipeline, window, 1, draw)
                built += [
                    DrawnCase(layer, pipeline, base.checkpoint, base.rows, accepted)
                    for accepted in range(1, window)
                ]
    return built
