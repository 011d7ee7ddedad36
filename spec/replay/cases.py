# SPDX-License-Identifier: MIT OR Apache-2.0
"""One replay case built from any source of numbers (the replay profile).

The properties draw the numbers with Hypothesis; the vector generator draws
them from a seeded :class:`random.Random`. Both build cases here, so the
vectors are cases the properties could have drawn.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

import numpy as np

from .layer import GdnLayer, LayerState, Pipeline, TokenInput, bf16_round, stored
from .paths import SeedRow, Verified, seed_rows, verify

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from ..replay_rows import GdnShape

__all__ = ["Draw", "DrawnCase", "make_case", "make_layer"]


class Draw(Protocol):
    """A source of float64 arrays of a shape, each value in ``[low, high]``."""

    def __call__(self, shape: tuple[int, ...], low: float, high: float, /) -> NDArray[np.float64]:
        """An array of ``shape``, every value in ``[low, high]``."""
        ...


@dataclass(frozen=True)
class DrawnCase:
    """A layer, a pre-verify checkpoint, a verified window and an accepted count, drawn.

    The model's own case, from which the corpus's cases are written; a case
    as the corpus sends it over the protocol is
    :class:`ssm_rollback_spec.corpus.replay_run.ReplayCase`.
    """

    layer: GdnLayer
    pipeline: Pipeline
    checkpoint: LayerState
    rows: tuple[SeedRow, ...]
    accepted: int

    @property
    def window(self) -> int:
        """K, the tokens of the verify window."""
        return len(self.rows)

    def verified(self) -> Verified:
        """The verify of this window from the checkpoint."""
        return verify(self.layer, self.checkpoint, self.rows)


def make_layer(shape: GdnShape, draw: Draw, /, *, generic: bool = False) -> GdnLayer:
    """A layer of ``shape`` with drawn weights.

    ``generic`` draws every conv tap in ``[0.25, 1]``, so that (with
    :func:`make_case`'s generic inputs) no post-conv channel is zero.

    Raises:
        ValueError: value heads are not a multiple of key heads, or the kernel is below 2.

    RB-REPLAY-1.
    """
    nk, nv = shape["num_key_heads"], shape["num_value_heads"]
    if nk < 1 or nv % nk or shape["conv_kernel"] < 2:
        raise ValueError(f"make_layer: unsupported shape {shape}")
    channels = 2 * nk * shape["key_head_dim"] + nv * shape["value_head_dim"]
    return GdnLayer(
        num_key_heads=nk,
        key_head_dim=shape["key_head_dim"],
        num_value_heads=nv,
        value_head_dim=shape["value_head_dim"],
        conv_kernel=shape["conv_kernel"],
        conv_weight=draw((channels, shape["conv_kernel"]), 0.25 if generic else -1.0, 1.0),
        a_log=draw((nv,), -2.0, 1.0),
        dt_bias=draw((nv,), -1.0, 1.0),
        norm_weight=draw((shape["value_head_dim"],), 0.5, 1.5),
    )


def make_case(  # noqa: PLR0913 (the case's parts, each drawn by the caller)
    layer: GdnLayer,
    pipeline: Pipeline,
    window: int,
    accepted: int,
    draw: Draw,
    /,
    *,
    generic: bool = False,
) -> DrawnCase:
    """A case: a drawn checkpoint and ``window`` drawn tokens, rounded as the pipeline stores them.

    ``generic`` keeps every entry of the checkpoint's h at least 0.25 from
    zero, so that a decay gate has something to decay in every head, and
    draws the pre-conv inputs (checkpoint columns and q, k, v) in
    ``[0.25, 2]``, so that with a generic layer every post-conv value is
    positive: every token writes, so beta has something to scale.

    Raises:
        ValueError: ``window`` is below 1 or ``accepted`` is outside ``1..window``.

    RB-REPLAY-1.
    """
    if window < 1 or not 1 <= accepted <= window:
        raise ValueError(f"make_case: window {window}, accepted {accepted}")
    zero = layer.zero_state(pipeline)
    low = 0.25 if generic else -2.0
    conv = draw(zero.conv.shape, low, 2.0)
    h = draw(zero.h.shape, -2.0, 2.0)
    if generic:
        h = np.where(h < 0, -1.0, 1.0) * draw(zero.h.shape, 0.25, 2.0)
    layer = replace(layer, pipeline=pipeline)
    stored_conv = conv if pipeline is Pipeline.FLOAT64 else bf16_round(conv)
    checkpoint = stored(
        layer,
        LayerState(conv=np.asarray(stored_conv, dtype=pipeline.dtype), h=h.astype(pipeline.dtype)),
    )
    tokens = [
        TokenInput(
            qkv=draw((layer.conv_dim,), low, 2.0),
            z=draw((layer.value_dim,), -2.0, 2.0),
            a=draw((layer.num_value_heads,), -2.0, 2.0),
            b=draw((layer.num_value_heads,), -2.0, 2.0),
        )
        for _ in range(window)
    ]
    return DrawnCase(layer, pipeline, checkpoint, seed_rows(layer, tokens, pipeline), accepted)
