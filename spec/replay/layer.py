# SPDX-License-Identifier: MIT OR Apache-2.0
"""A small reference Gated DeltaNet layer, as Qwen3-Next runs it (draft; informative).

Sources:

- Yang, Kautz and Hatamizadeh, 2024, "Gated Delta Networks: Improving Mamba2
  with Delta Rule" (arXiv:2412.06464): the gated delta rule
  ``S_t = S_{t-1} (alpha_t (I - beta_t k_t k_t^T)) + beta_t v_t k_t^T``.
- Hugging Face transformers,
  ``src/transformers/models/qwen3_next/modeling_qwen3_next.py``:
  ``Qwen3NextGatedDeltaNet.forward`` (a depthwise causal conv1d with no bias
  over ``concat(q, k, v)``, SiLU after it, z bypassing it; ``beta =
  b.sigmoid()``; ``g = -A_log.exp() * softplus(a + dt_bias)``; q and k
  repeated from key heads to value heads), ``torch_causal_conv1d_update``
  (the conv state is the last ``conv_kernel - 1`` pre-conv columns),
  ``l2norm`` (``x * rsqrt(sum(x * x) + 1e-6)``),
  ``torch_recurrent_gated_delta_rule`` (q scaled by ``1 / sqrt(head_k_dim)``;
  per token ``S <- exp(g) S``, ``S <- S + k (beta (v - S^T k))^T``, output
  ``S^T q``) and ``Qwen3NextRMSNormGated`` (the output RMS-normed, scaled and
  gated by ``silu(z)``).

The state ``S`` of one value head is ``head_k_dim x head_v_dim`` (the paper's
``S`` transposed). Only numpy is needed; this module is the ``replay`` extra.
Its ``exp``, ``log1p`` and sums are :mod:`.portable`'s, so every bit it
computes is the same on every machine (docs/replay.md, "What the last bits
depend on").
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np

from .portable import Array, exp, log1p, ordered_sum

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = [
    "L2NORM_EPS",
    "Array",
    "GdnLayer",
    "LayerState",
    "Pipeline",
    "TokenInput",
    "bf16_round",
    "conv_step",
    "delta_rule_step",
    "gate_and_beta",
    "gated_output",
    "read_out",
]

#: The epsilon of transformers' ``l2norm`` (and of FLA's kernel it mirrors).
L2NORM_EPS: Final = 1e-6
_RMS_EPS: Final = 1e-6


class Pipeline(enum.Enum):
    """The dtypes a verify and a replay both run with.

    ``FLOAT64``: rows, states and arithmetic in float64 (the exactness property).
    ``BF16_ROWS_FP32_STATE``: q, k, v and z rounded to BF16 as the ring stores
    them, g and beta in FP32, the conv state in BF16 values, h and all
    arithmetic in float32 (the bit-identity property): the seed's row dtypes.
    """

    FLOAT64 = "float64"
    BF16_ROWS_FP32_STATE = "bf16-rows-fp32-state"

    @property
    def dtype(self) -> type[np.floating]:
        """The dtype of the arithmetic and of the state."""
        return np.float64 if self is Pipeline.FLOAT64 else np.float32


def bf16_round(values: Array, /) -> NDArray[np.float32]:
    """Round to the nearest BF16 value, ties to even, held in float32.

    Raises:
        ValueError: a value is not finite (the model draws finite inputs only).

    RB-REPLAY-1 (the same rounding on both paths).
    """
    single = np.asarray(values, dtype=np.float32)
    if not np.all(np.isfinite(single)):
        raise ValueError("bf16_round: the model only rounds finite values")
    bits = single.view(np.uint32).astype(np.uint64)
    # Round to nearest, ties to even, on the 16 bits BF16 drops.
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


@dataclass(frozen=True)
class GdnLayer:
    """The weights and head shapes of one GDN layer (after the input projections).

    ``conv_weight`` is ``(conv_dim, conv_kernel)``, the depthwise conv1d
    weight (``conv1d.weight.squeeze(1)``), tap ``conv_kernel - 1`` on the
    newest column. ``a_log`` and ``dt_bias`` are per value head; ``norm_weight``
    is per value channel of a head.
    """

    num_key_heads: int
    key_head_dim: int
    num_value_heads: int
    value_head_dim: int
    conv_kernel: int
    conv_weight: Array
    a_log: Array
    dt_bias: Array
    norm_weight: Array

    @property
    def key_dim(self) -> int:
        """Channels of q, and of k."""
        return self.num_key_heads * self.key_head_dim

    @property
    def value_dim(self) -> int:
        """Channels of v, and of z."""
        return self.num_value_heads * self.value_head_dim

    @property
    def conv_dim(self) -> int:
        """Channels of the causal convolution: q, k and v."""
        return 2 * self.key_dim + self.value_dim

    def zero_state(self, pipeline: Pipeline, /) -> LayerState:
        """The state of a sequence that has seen no token."""
        return LayerState(
            conv=np.zeros((self.conv_dim, self.conv_kernel - 1), dtype=pipeline.dtype),
            h=np.zeros(
                (self.num_value_heads, self.key_head_dim, self.value_head_dim),
                dtype=pipeline.dtype,
            ),
        )


@dataclass(frozen=True)
class TokenInput:
    """One token's projected inputs: what ``in_proj_qkvz`` and ``in_proj_ba`` give.

    ``qkv`` is the deinterleaved pre-conv q, k, v (``conv_dim``), ``z`` the
    output gate (``value_dim``), ``a`` and ``b`` per value head.
    """

    qkv: Array
    z: Array
    a: Array
    b: Array


@dataclass(frozen=True)
class LayerState:
    """The recurrent state a snapshot holds: the conv window and h.

    ``conv`` is ``(conv_dim, conv_kernel - 1)`` pre-conv columns, oldest first;
    ``h`` is ``(num_value_heads, head_k_dim, head_v_dim)``.
    """

    conv: Array
    h: Array

    def equals(self, other: LayerState, /) -> bool:
        """Bit for bit the same state (dtypes and shapes included)."""
        return (
            self.conv.dtype == other.conv.dtype
            and self.h.dtype == other.h.dtype
            and np.array_equal(self.conv, other.conv)
            and np.array_equal(self.h, other.h)
        )


def _silu(x: Array, /) -> Array:
    result: Array = x / (1 + exp(-x))
    return result


def _softplus(x: Array, /) -> Array:
    """``ln(1 + e**x)`` as ``np.logaddexp(0, x)`` arranges it, from exact exp and log1p."""
    positive = x > 0
    result: Array = np.where(positive, x, 0.0) + log1p(exp(-np.abs(x)))
    return result


def gate_and_beta(layer: GdnLayer, token: TokenInput, pipeline: Pipeline, /) -> tuple[Array, Array]:
    """The decay gate g and the write strength beta of one token, per value head.

    ``g = -exp(A_log) * softplus(a + dt_bias)`` and ``beta = sigmoid(b)``,
    computed in float64 and stored in the pipeline's FP32 (or float64).

    RB-REPLAY-3 (the ring's gate/beta row).
    """
    a = np.asarray(token.a, dtype=np.float64)
    b = np.asarray(token.b, dtype=np.float64)
    g = -exp(np.asarray(layer.a_log, dtype=np.float64)) * _softplus(
        a + np.asarray(layer.dt_bias, dtype=np.float64)
    )
    beta = 1.0 / (1.0 + exp(-b))
    return g.astype(pipeline.dtype), beta.astype(pipeline.dtype)


def conv_step(layer: GdnLayer, conv: Array, qkv: Array, /) -> tuple[Array, Array]:
    """One token through the causal depthwise conv1d and the SiLU.

    Returns the new conv state (the last ``conv_kernel - 1`` pre-conv columns)
    and the post-conv q, k, v (``conv_dim``), as ``torch_causal_conv1d_update``.
    """
    window = np.concatenate([conv, qkv.astype(conv.dtype)[:, None]], axis=1)
    weight = np.asarray(layer.conv_weight, dtype=conv.dtype)
    mixed = ordered_sum(window * weight, axis=1)
    return np.ascontiguousarray(window[:, 1:]), _silu(mixed)


def _l2norm(x: Array, /) -> Array:
    result: Array = x / np.sqrt(ordered_sum(x * x, axis=-1, keepdims=True) + L2NORM_EPS)
    return result


def _key_heads(layer: GdnLayer, post_conv: Array, start: int, /) -> Array:
    """L2-normed q or k channels from ``start``, repeated from key heads to value heads."""
    nk, dk = layer.num_key_heads, layer.key_head_dim
    heads = _l2norm(post_conv[start : start + layer.key_dim].reshape(nk, dk))
    return heads.repeat(layer.num_value_heads // nk, axis=0)


def delta_rule_step(layer: GdnLayer, h: Array, k_and_v: Array, g: Array, beta: Array, /) -> Array:
    """One token of the gated delta rule on every value head; returns the new h.

    ``k_and_v`` is the post-conv k then v (``key_dim + value_dim`` channels).
    ``S <- exp(g) S``; ``S <- S + k (beta (v - S^T k))^T``, the arrangement of
    ``torch_recurrent_gated_delta_rule``. h never reads q.
    """
    k = _key_heads(layer, k_and_v, 0)
    v = k_and_v[layer.key_dim :].reshape(layer.num_value_heads, layer.value_head_dim)
    decayed = h * exp(g.astype(h.dtype))[:, None, None]
    remembered = ordered_sum(decayed * k[:, :, None], axis=1)
    delta = (v - remembered) * beta.astype(h.dtype)[:, None]
    updated: Array = decayed + k[:, :, None] * delta[:, None, :]
    return updated


def read_out(layer: GdnLayer, h: Array, post_conv: Array, /) -> Array:
    """The core output ``S^T q`` per value head, q L2-normed and scaled by ``1/sqrt(dk)``."""
    q = _key_heads(layer, post_conv, 0) * post_conv.dtype.type(1.0 / np.sqrt(layer.key_head_dim))
    core: Array = ordered_sum(h * q[:, :, None], axis=1)
    return core


def gated_output(layer: GdnLayer, core: Array, z: Array, /) -> Array:
    """The layer's output before ``out_proj``: RMS-normed per head, scaled, gated by silu(z).

    As ``Qwen3NextRMSNormGated``; z enters here and nowhere else.
    """
    z_heads = z.astype(core.dtype).reshape(layer.num_value_heads, layer.value_head_dim)
    variance = ordered_sum(core * core, axis=-1, keepdims=True) / layer.value_head_dim
    normed = core / np.sqrt(variance + _RMS_EPS)
    result: Array = normed * np.asarray(layer.norm_weight, dtype=core.dtype) * _silu(z_heads)
    return result.reshape(-1)
