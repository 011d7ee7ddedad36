# SPDX-License-Identifier: MIT OR Apache-2.0
"""A small reference Gated DeltaNet layer, as Qwen3-Next runs it (the replay profile).

Sources:

- Yang, Kautz and Hatamizadeh, 2024, "Gated Delta Networks: Improving Mamba2
  with Delta Rule" (arXiv:2412.06464): the gated delta rule
  ``S_t = S_{t-1} (alpha_t (I - beta_t k_t k_t^T)) + beta_t v_t k_t^T``.
- Hugging Face transformers 5.23.0,
  ``src/transformers/models/qwen3_next/modeling_qwen3_next.py``:
  ``Qwen3NextGatedDeltaNet.forward`` (a depthwise causal conv1d with no bias
  over ``concat(q, k, v)``, SiLU after it, z bypassing it; ``beta =
  b.sigmoid()``, line 725; ``g = -A_log.float().exp() * F.softplus(a.float()
  + dt_bias)``, line 727), ``causal_conv1d_update`` (lines 319-335: the
  state and the new column cast to the weight's dtype, ``F.conv1d``, SiLU,
  the result cast to the input's dtype), ``l2norm`` (line 363,
  ``x * rsqrt(sum(x * x) + 1e-6)``; the model divides, ``x / sqrt(sum(x * x)
  + 1e-6)``, as FLA's kernel and SGLang's exact fold do, which can differ
  from the multiply by ``rsqrt`` in the last bit),
  ``torch_recurrent_gated_delta_rule`` (q, k, v, beta and g cast to
  float32 first, line 538, then the L2 norm in float32, lines 543-544; q
  scaled by ``1 / sqrt(head_k_dim)``; per token
  ``S <- exp(g) S``, ``S <- S + k (beta (v - S^T k))^T``, lines 562-568;
  output ``S^T q``) and ``Qwen3NextRMSNormGated`` (the output RMS-normed,
  scaled and gated by ``silu(z)``).

The conv state. transformers keeps ``conv_kernel`` pre-conv columns per
channel (``cache_utils.py``'s ``update_conv_state`` copies the last
``conv_kernel_size`` columns, line 1226), but ``causal_conv1d_update``'s
``F.conv1d`` with no padding over those ``conv_kernel`` columns and the new
one reads only the last ``conv_kernel``: the oldest column kept is never
read. The model keeps the ``conv_kernel - 1`` columns that are read, which
is all a snapshot or a replay must rebuild.

The ``TRANSFORMERS_BF16`` pipeline rounds where a BF16 transformers
module rounds: its weights are BF16 parameters; the conv's output and the
SiLU's are BF16 tensors (``F.conv1d`` and ``F.silu`` on BF16 inputs); beta is
``sigmoid`` of a BF16 tensor, so BF16; g is FP32 (``.float()``), and so is
everything after the cast to float32 (the L2 norm, h, the delta rule).

The state ``S`` of one value head is ``head_k_dim x head_v_dim`` (the paper's
``S`` transposed). Only numpy is needed; this module is the ``replay`` extra.
Its ``exp``, ``log1p`` and sums are :mod:`.portable`'s, so every bit it
computes is the same on every machine (docs/replay-model.md, "What the last
bits depend on").
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

import numpy as np

from .activations import (
    SOFTPLUS_THRESHOLD,
    as_module_holds,
    bf16_round,
    engine_softplus,
    ggml_silu,
    silu,
    softplus,
)
from .portable import Array, exp, ordered_sum

__all__ = [
    "L2NORM_EPS",
    "SOFTPLUS_THRESHOLD",
    "Array",
    "GdnLayer",
    "L2Norm",
    "LayerState",
    "Pipeline",
    "TokenInput",
    "as_module_holds",
    "bf16_round",
    "conv_step",
    "decay",
    "delta_rule_step",
    "delta_rule_update",
    "engine_softplus",
    "gate_and_beta",
    "gated_output",
    "ggml_silu",
    "normed_keys",
    "read_out",
    "repeat_heads",
    "softplus",
    "stored",
    "write",
]

#: The epsilon of transformers' ``l2norm`` (and of FLA's kernel it mirrors).
L2NORM_EPS: Final = 1e-6
_RMS_EPS: Final = 1e-6


class Pipeline(enum.Enum):
    """The dtypes and arithmetic forms a verify and a replay both run with.

    ``FLOAT64``: rows, states and arithmetic in float64 (the exactness property).
    ``TRANSFORMERS_BF16``: as a BF16 transformers module computes: q, k, v,
    z, a and b rounded to BF16 as the projections give them, the weights BF16,
    the conv output, the SiLU and beta rounded to BF16, g in FP32, the conv
    state in BF16 values, h and the rest of the arithmetic in float32 (the
    bit-identity property); the seed's row dtypes (beta's BF16 value stored
    in its FP32 field). Its wire name was ``bf16-rows-fp32-state`` before.

    The engine pipelines compute as the engines' Triton kernels do, from BF16
    activations (pre-conv q, k, v, a, b) and BF16 weights: the conv's tap
    products rounded to BF16 (Triton's ``bf16 * bf16`` is BF16), summed in
    FP32, the SiLU in FP32 and one rounding to BF16; g and beta in FP32 inside
    the kernel, softplus as ``log(1 + exp(x))`` (``x`` itself above 20),
    beta ``1 / (1 + exp(-b))`` never rounded; h in FP32 inside a kernel call.
    ``VLLM_BF16`` (vLLM 0.33.0's Qwen3-Next defaults): the L2 norm multiplies
    by ``1 / sqrt(sum(x * x) + 1e-6)`` and h is stored in BF16 (every stored
    state, not the chain inside one call). ``SGLANG_BF16`` (SGLang 0.5.23's
    defaults): the same L2 norm, h stored in FP32. ``FLA_BF16`` (FLA 0.6.0's
    conv and its fused recurrent and chunk rules): the conv's products exact
    in FP32 and its SiLU ``y * sigmoid(y)``, the L2 norm a division by
    ``sqrt(sum(x * x) + 1e-6)``, h stored in FP32. ``GGML_F32`` (ggml's CPU
    kernels at llama.cpp 0c1e57098, built for baseline x86-64, as llama.cpp's
    Qwen3.5 graph calls them; :func:`conv_step`, :func:`delta_rule_update`):
    FP32 throughout, nothing rounded to BF16 after the inputs; the conv's
    products summed in FP32 from the oldest tap and its SiLU ggml's
    (:func:`ggml_silu`); g and beta as the engines' (``softplus`` is ``x``
    above 20, else ``logf(1 + expf(x))``; ``1 / (1 + expf(-b))``); the L2 norm
    ggml's RMS form (:attr:`L2Norm.GGML_RMS`); each dot product of the delta
    rule summed in double and rounded to FP32 once; h stored in FP32.
    """

    FLOAT64 = "float64"
    TRANSFORMERS_BF16 = "transformers-bf16"
    VLLM_BF16 = "vllm-bf16"
    SGLANG_BF16 = "sglang-bf16"
    FLA_BF16 = "fla-bf16"
    GGML_F32 = "ggml-f32"

    @property
    def dtype(self) -> type[np.floating]:
        """The dtype of the arithmetic and of the state."""
        return np.float64 if self is Pipeline.FLOAT64 else np.float32

    @property
    def engine(self) -> bool:
        """Whether the pipeline is an engine kernel's (g and beta formed inside the kernel)."""
        return self in _ENGINE_PIPELINES

    @property
    def stores_h_in_bf16(self) -> bool:
        """Whether a stored h is rounded to BF16 (the chain inside one call is not)."""
        return self is Pipeline.VLLM_BF16

    @property
    def l2norm(self) -> L2Norm:
        """How the pipeline's L2 norm of q and k is written."""
        return _L2NORM.get(self, L2Norm.DIVISION)


class L2Norm(enum.Enum):
    """The form of the L2 norm ``x / ||x||`` with ``eps`` inside the square root.

    ``DIVISION``: ``x / sqrt(sum(x * x) + eps)`` (FLA's fused recurrent
    kernel; the model's own choice for ``float64`` and transformers').
    ``RECIPROCAL``: ``x * (1 / sqrt(sum(x * x) + eps))``, the reciprocal
    rounded first (vLLM's ``x * rsqrt(...)``, SGLang's ``x * (1 / sqrt(...))``).
    """

    DIVISION = "division"
    RECIPROCAL = "reciprocal"
    #: llama.cpp's ``build_gdn_l2_norm`` (``src/models/models.h`` lines 13-18 at
    #: 0c1e57098): ``ggml_rms_norm(x, eps / n)`` then ``ggml_scale`` by
    #: ``1 / sqrtf(n)``. ggml's CPU ``rms_norm`` (``ggml-cpu/ops.cpp`` lines
    #: 4140-4147) sums the FP32 squares in double, rounds ``sum / n`` to FP32
    #: and multiplies by ``1 / sqrtf(mean + eps / n)``.
    GGML_RMS = "ggml-rms"


_ENGINE_PIPELINES: Final = frozenset(
    {Pipeline.VLLM_BF16, Pipeline.SGLANG_BF16, Pipeline.FLA_BF16, Pipeline.GGML_F32}
)
_L2NORM: Final = {
    Pipeline.VLLM_BF16: L2Norm.RECIPROCAL,
    Pipeline.SGLANG_BF16: L2Norm.RECIPROCAL,
    Pipeline.GGML_F32: L2Norm.GGML_RMS,
}


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
    pipeline: Pipeline | None = None

    def pipeline_of(self, dtype: np.dtype[np.floating] | type[np.floating], /) -> Pipeline:
        """The pipeline the layer computes in: its own, else ``float64`` or transformers' by dtype.

        RB-REPLAY-1.
        """
        if self.pipeline is not None:
            return self.pipeline
        return Pipeline.FLOAT64 if np.dtype(dtype) == np.float64 else Pipeline.TRANSFORMERS_BF16

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


def gate_and_beta(layer: GdnLayer, token: TokenInput, pipeline: Pipeline, /) -> tuple[Array, Array]:
    """The decay gate g and the write strength beta of one token, per value head.

    ``g = -exp(A_log) * softplus(a + dt_bias)`` and ``beta = sigmoid(b)``, as
    ``Qwen3NextGatedDeltaNet.forward`` computes them (transformers 5.23.0,
    ``modeling_qwen3_next.py`` lines 725-727). In the ``TRANSFORMERS_BF16``
    pipeline a, b, ``A_log`` and ``dt_bias`` are BF16 values, g is computed in
    FP32 (the module's ``.float()``), and beta is the sigmoid of a BF16 tensor,
    so it is computed in FP32 and rounded to BF16. In the engine pipelines the
    same BF16 inputs enter the kernel and g and beta stay FP32, softplus being
    :func:`engine_softplus` (vLLM 0.33.0 ``fused_sigmoid_gating.py`` lines
    129-136). In ``FLOAT64`` both are float64 throughout.

    Raises:
        ValueError: an input is not finite.

    RB-REPLAY-3 (the ring's gate/beta row), RB-REPLAY-10.
    """
    dtype = pipeline.dtype
    a, b = as_module_holds(token.a, dtype), as_module_holds(token.b, dtype)
    a_log, dt_bias = as_module_holds(layer.a_log, dtype), as_module_holds(layer.dt_bias, dtype)
    gate = engine_softplus if pipeline.engine else softplus
    g: Array = -exp(a_log) * gate(a + dt_bias)
    sigmoid: Array = 1 / (1 + exp(-b))
    beta = sigmoid if pipeline.engine else as_module_holds(sigmoid, dtype)
    return g, beta


def conv_step(layer: GdnLayer, conv: Array, qkv: Array, /) -> tuple[Array, Array]:
    """One token through the causal depthwise conv1d and the SiLU.

    Returns the new conv state (the last ``conv_kernel - 1`` pre-conv columns)
    and the post-conv q, k, v (``conv_dim``), as ``causal_conv1d_update``
    (transformers 5.23.0, ``modeling_qwen3_next.py`` lines 319-335). In the
    ``TRANSFORMERS_BF16`` pipeline (float32 state) the weight is BF16, the
    taps are summed in float32 left to right (a BF16 product is exact in
    float32) and the conv output and the SiLU output are each rounded to BF16,
    as ``F.conv1d`` and ``F.silu`` on BF16 tensors return BF16. In the engine
    pipelines each tap's product is rounded to BF16 (Triton types ``bf16 *
    bf16`` as BF16: vLLM 0.33.0 ``causal_conv1d.py`` line 920, triton 3.9.0
    ``language/semantic.py`` lines 102-103), the products are summed in FP32
    from the oldest tap, and the SiLU ``x / (1 + exp(-x))`` is taken in FP32
    (line 944) and rounded to BF16 once, by the store (line 952); SGLang
    0.5.23's ``causal_conv1d_triton.py`` the same (lines 911 and 968, 997, 1008).
    FLA 0.6.0's own conv (``fla/modules/causal_conv1d/ops.py``) casts the
    window and the weight to FP32 first (lines 399, 405, 411-412), so its
    products are exact, and writes the SiLU as ``y * sigmoid(y)`` (line 420)
    before one rounding to BF16 (lines 424-428).

    Raises:
        ValueError: a value is not finite.

    RB-REPLAY-1.
    """
    dtype = conv.dtype.type
    window = np.concatenate([conv, qkv.astype(conv.dtype)[:, None]], axis=1)
    weight = as_module_holds(layer.conv_weight, dtype)
    products: Array = window * weight
    pipeline = layer.pipeline_of(conv.dtype)
    kept = np.ascontiguousarray(window[:, 1:])
    if pipeline is Pipeline.FLA_BF16:
        summed = ordered_sum(products, axis=1)
        sigmoid: Array = 1 / (1 + exp(-summed))
        return kept, bf16_round(summed * sigmoid)
    if pipeline is Pipeline.GGML_F32:
        # ggml_ssm_conv (ggml-cpu/ops.cpp lines 9973-9979): FP32 products and
        # an FP32 sum from the oldest tap; then ggml_silu over the row.
        return kept, ggml_silu(ordered_sum(products, axis=1))
    if pipeline.engine:
        summed = ordered_sum(bf16_round(products), axis=1)
        return kept, bf16_round(silu(summed))
    mixed = as_module_holds(ordered_sum(products, axis=1), dtype)
    return kept, as_module_holds(silu(mixed), dtype)


def _ggml_rms_l2norm(x: Array, /) -> Array:
    size = np.float32(x.shape[-1])
    squares = ordered_sum((x * x).astype(np.float64), axis=-1, keepdims=True)
    mean = (squares / x.shape[-1]).astype(np.float32)
    scale = np.float32(1) / np.sqrt(mean + np.float32(L2NORM_EPS) / size)
    scaled: Array = (x * scale) * (np.float32(1) / np.sqrt(size))
    return scaled


def _l2norm(x: Array, form: L2Norm, /) -> Array:
    if form is L2Norm.GGML_RMS:
        return _ggml_rms_l2norm(x)
    norm = np.sqrt(ordered_sum(x * x, axis=-1, keepdims=True) + L2NORM_EPS)
    if form is L2Norm.RECIPROCAL:
        scaled: Array = x * (1 / norm)
        return scaled
    result: Array = x / norm
    return result


def normed_keys(layer: GdnLayer, post_conv: Array, start: int, /) -> Array:
    """L2-normed q or k channels from ``start``, one row per key head (``nk x dk``).

    In the pipeline's form (:attr:`Pipeline.l2norm`): a division, or a
    multiply by the reciprocal (vLLM 0.33.0 ``fused_sigmoid_gating.py``
    lines 139-140; SGLang 0.5.23 ``fused_sigmoid_gating_recurrent.py`` lines
    443-446 and ``gdn_replayssm_spec_decode.py`` lines 240-241).

    RB-REPLAY-1.
    """
    nk, dk = layer.num_key_heads, layer.key_head_dim
    keys = post_conv[start : start + layer.key_dim].reshape(nk, dk)
    return _l2norm(keys, layer.pipeline_of(post_conv.dtype).l2norm)


def repeat_heads(layer: GdnLayer, keys: Array, /) -> Array:
    """Key-head rows repeated to value heads, as ``repeat_interleave`` does (an exact copy).

    RB-REPLAY-1.
    """
    return keys.repeat(layer.num_value_heads // layer.num_key_heads, axis=0)


def _key_heads(layer: GdnLayer, post_conv: Array, start: int, /) -> Array:
    """L2-normed q or k channels from ``start``, repeated from key heads to value heads."""
    return repeat_heads(layer, normed_keys(layer, post_conv, start))


def stored(layer: GdnLayer, state: LayerState, /) -> LayerState:
    """``state`` as the pipeline stores it between kernel calls: h in BF16 for vLLM's.

    vLLM 0.33.0 stores Qwen3-Next's h in the model dtype
    (``mamba_ssm_cache_dtype`` "auto", ``mamba_utils.py`` lines 98-110) after
    every token of a verify (``fused_sigmoid_gating.py`` line 166) while the
    kernel carries h in FP32 from token to token (lines 102-120). Every other
    pipeline stores h as it computes it.

    Raises:
        ValueError: a value of h is not finite.

    RB-REPLAY-1.
    """
    if not layer.pipeline_of(state.h.dtype).stores_h_in_bf16:
        return state
    return LayerState(conv=state.conv, h=bf16_round(state.h))


def decay(h: Array, g: Array, /) -> Array:
    """``S <- exp(g) S`` on every value head: the first half of a token's update.

    RB-REPLAY-1.
    """
    decayed: Array = h * exp(g.astype(h.dtype))[:, None, None]
    return decayed


def write(decayed: Array, k: Array, u: Array, /) -> Array:
    """``S <- S + k u^T`` on every value head (k per value head): the second half.

    RB-REPLAY-1.
    """
    updated: Array = decayed + k[:, :, None] * u[:, None, :]
    return updated


def delta_rule_update(
    layer: GdnLayer, h: Array, k_and_v: Array, g: Array, beta: Array, /
) -> tuple[Array, Array, Array]:
    """One token of the gated delta rule: the new h, the normed k per key head, and u.

    ``u = beta (v - S^T k)`` per value head, S being the decayed state: the
    post-correction update a ReplaySSM record keeps, so that the new h is
    ``write(decay(h, g), k, u)``.

    RB-REPLAY-1.
    """
    keys = normed_keys(layer, k_and_v, 0)
    k = repeat_heads(layer, keys)
    v = k_and_v[layer.key_dim :].reshape(layer.num_value_heads, layer.value_head_dim)
    decayed = decay(h, g)
    products = decayed * k[:, :, None]
    if layer.pipeline_of(h.dtype) is Pipeline.GGML_F32:
        # ggml_vec_dot_f32 with no SIMD (ggml-cpu/vec.cpp, its scalar branch):
        # FP32 products summed in double, rounded to FP32 once.
        remembered = ordered_sum(products.astype(np.float64), axis=1).astype(h.dtype)
    else:
        remembered = ordered_sum(products, axis=1)
    u: Array = (v - remembered) * beta.astype(h.dtype)[:, None]
    return write(decayed, k, u), keys, u


def delta_rule_step(layer: GdnLayer, h: Array, k_and_v: Array, g: Array, beta: Array, /) -> Array:
    """One token of the gated delta rule on every value head; returns the new h.

    ``k_and_v`` is the post-conv k then v (``key_dim + value_dim`` channels).
    ``S <- exp(g) S``; ``S <- S + k (beta (v - S^T k))^T``, the arrangement of
    ``torch_recurrent_gated_delta_rule``. h never reads q.

    RB-REPLAY-1.
    """
    return delta_rule_update(layer, h, k_and_v, g, beta)[0]


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
    result: Array = normed * np.asarray(layer.norm_weight, dtype=core.dtype) * silu(z_heads)
    return result.reshape(-1)
