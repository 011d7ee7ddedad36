# SPDX-License-Identifier: MIT OR Apache-2.0
"""Hypothesis strategies for the replay model: small layers, windows and accepted counts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from ssm_rollback_spec.replay.cases import Draw, DrawnCase, make_case, make_layer
from ssm_rollback_spec.replay.layer import Pipeline
from ssm_rollback_spec.replay_rows import GdnShape

if TYPE_CHECKING:
    from collections.abc import Callable

    from numpy.typing import NDArray

MAX_WINDOW = 6


@st.composite
def shapes(draw: st.DrawFn) -> GdnShape:
    key_heads = draw(st.integers(1, 2))
    return GdnShape(
        num_key_heads=key_heads,
        key_head_dim=draw(st.integers(2, 4)),
        num_value_heads=key_heads * draw(st.integers(1, 4 // key_heads)),
        value_head_dim=draw(st.integers(2, 4)),
        conv_kernel=draw(st.integers(2, 4)),
    )


def drawer(
    draw: Callable[[st.SearchStrategy[NDArray[np.float64]]], NDArray[np.float64]], /
) -> Draw:
    """Numbers drawn by Hypothesis: float64 arrays in [low, high], no subnormals."""

    def drawn(shape: tuple[int, ...], low: float, high: float, /) -> NDArray[np.float64]:
        elements = st.floats(
            low, high, allow_nan=False, allow_infinity=False, allow_subnormal=False
        )
        return draw(arrays(np.float64, shape, elements=elements))

    return drawn


def _any_accepted(window: int, /) -> st.SearchStrategy[int]:
    return st.integers(1, window)


#: The pipelines a post-conv row keeps exactly: it holds k and v in BF16 (what
#: the row bytes count), which ggml-f32's FP32 SiLU output is not.
POST_CONV_PIPELINES: Final = tuple(p for p in Pipeline if p is not Pipeline.GGML_F32)


@st.composite
def replay_cases(
    draw: st.DrawFn,
    *,
    min_window: int = 1,
    accepted: Callable[[int], st.SearchStrategy[int]] = _any_accepted,
    generic: bool = False,
    pipelines: tuple[Pipeline, ...] = tuple(Pipeline),
) -> DrawnCase:
    """A case of any of ``pipelines``, window ``min_window..MAX_WINDOW`` and accepted count."""
    pipeline = draw(st.sampled_from(pipelines))
    numbers = drawer(draw)
    layer = make_layer(draw(shapes()), numbers, generic=generic)
    window = draw(st.integers(min_window, MAX_WINDOW))
    count = draw(accepted(window))
    return make_case(layer, pipeline, window, count, numbers, generic=generic)


def partial_accept(window: int, /) -> st.SearchStrategy[int]:
    """Any accepted count that needs a replay: ``1..K-1``."""
    return st.integers(1, window - 1)
