# SPDX-License-Identifier: MIT OR Apache-2.0
"""The elementwise steps of the reference GDN layer, each rounded as its pipeline rounds it.

BF16 rounding (:func:`bf16_round`, :func:`as_module_holds`), SiLU (exact, and
ggml's baseline x86-64 CPU form, :func:`ggml_silu`) and softplus (torch's,
and the engines' kernels' form, :func:`engine_softplus`). Their ``exp``,
``log`` and ``log1p`` are :mod:`.portable`'s, so every bit is the same on
every machine (docs/replay-model.md, "What the last bits depend on"). :mod:`.layer`
builds the layer from them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import numpy as np

from .portable import Array, exp, log, log1p

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = [
    "SOFTPLUS_THRESHOLD",
    "as_module_holds",
    "bf16_round",
    "engine_softplus",
    "ggml_silu",
    "silu",
    "softplus",
]

#: ``torch.nn.functional.softplus``'s default threshold: above it, softplus(x) is x.
SOFTPLUS_THRESHOLD: Final = 20.0

# ggml's SSE2 expf (``ggml-cpu/vec.h`` lines 1293-1326 at 0c1e57098, from Arm's
# optimized routines): its constants, as the FP32 values the source spells.
_VEXPF_SHIFT: Final = np.float32(float.fromhex("0x1.8p23"))
_VEXPF_LOG2E: Final = np.float32(float.fromhex("0x1.715476p+0"))
_VEXPF_LN2_HI: Final = np.float32(float.fromhex("0x1.62e4p-1"))
_VEXPF_LN2_LO: Final = np.float32(float.fromhex("0x1.7f7d1cp-20"))
_VEXPF_POLY: Final = tuple(
    np.float32(float.fromhex(c))
    for c in ("0x1.0e4020p-7", "0x1.573e2ep-5", "0x1.555e66p-3", "0x1.fffdb6p-2", "0x1.ffffecp-1")
)
#: ggml's SSE2 SiLU takes lanes of four; the row's last ``n % 4`` take libm's expf.
_SSE2_LANES: Final = 4


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


def as_module_holds(values: Array, dtype: type[np.floating], /) -> Array:
    """``values`` as a module of the pipeline of ``dtype`` holds them.

    float32 (the BF16 pipelines): rounded to BF16, held in
    float32, as a BF16 module's parameters, projections and conv and SiLU
    outputs are. float64: unchanged.

    Raises:
        ValueError: a value is not finite.

    RB-REPLAY-1 (both paths round the same bits).
    """
    if np.dtype(dtype) == np.float32:
        return bf16_round(values)
    return np.asarray(values, dtype=dtype)


def silu(x: Array, /) -> Array:
    """SiLU, ``x / (1 + exp(-x))``, computed in the dtype of ``x`` (a BF16 module then rounds it).

    RB-REPLAY-1.
    """
    result: Array = x / (1 + exp(-x))
    return result


def _ggml_vexpf(x: NDArray[np.float32], /) -> NDArray[np.float32]:
    """The SSE2 ``ggml_v_expf`` of ggml, lane by lane: FP32 operations, no FMA (baseline x86-64)."""
    with np.errstate(over="ignore", under="ignore"):
        z = x * _VEXPF_LOG2E + _VEXPF_SHIFT
        n = z - _VEXPF_SHIFT
        b = (x - n * _VEXPF_LN2_HI) - n * _VEXPF_LN2_LO
        e = z.view(np.uint32) << np.uint32(23)
        k = (e + np.float32(1).view(np.uint32)).view(np.float32)
        u = b * b
        c5, c4, c3, c2, c1 = _VEXPF_POLY
        j = ((c5 * b + c4) * u + (c3 * b + c2)) * u + c1 * b
        far = np.abs(n) > np.float32(126)
        g = np.where(n <= 0, np.uint32(0x82000000), np.uint32(0))
        s1 = (g + np.uint32(0x7F000000)).view(np.float32)
        s2 = (e - g).view(np.float32)
        result = np.where(far, (s2 * j + s2) * s1, k * j + k)
        return np.where(np.abs(n) > np.float32(192), s1 * s1, result).astype(np.float32)


def ggml_silu(x: Array, /) -> Array:
    """The CPU SiLU of ggml over one FP32 row, as a baseline x86-64 build computes it.

    ``ggml_vec_silu_f32`` (``ggml-cpu/vec.cpp`` lines 379-415 at 0c1e57098)
    takes the row in lanes of four through ``x / (1 + ggml_v_expf(0 - x))``
    (SSE2, part of baseline x86-64) and the last ``n % 4`` values through
    ``x / (1 + expf(-x))`` (libm's expf; the model's correctly rounded one).

    RB-REPLAY-1.
    """
    row = np.asarray(x, dtype=np.float32)
    lanes = row.shape[-1] - row.shape[-1] % _SSE2_LANES
    head = row[..., :lanes]
    out = np.empty_like(row)
    out[..., :lanes] = head / (np.float32(1) + _ggml_vexpf(np.float32(0) - head))
    out[..., lanes:] = silu(row[..., lanes:])
    return out


def softplus(x: Array, /) -> Array:
    """``torch.nn.functional.softplus(x)`` (beta 1, threshold 20), from exact exp and log1p.

    torch returns ``x`` itself where ``x > 20`` and ``log1p(exp(x))``
    elsewhere; each operation is rounded in the dtype of ``x``.

    Raises:
        TypeError: ``x`` is neither float64 nor float32.

    RB-REPLAY-3 (g, through the gate).
    """
    values = np.asarray(x)
    below = np.minimum(values, values.dtype.type(SOFTPLUS_THRESHOLD))
    # exp of the clipped value: the branch np.where drops must not overflow.
    result: Array = np.where(values > SOFTPLUS_THRESHOLD, values, log1p(exp(below)))
    return result


def engine_softplus(x: Array, /) -> Array:
    """The engines' softplus: ``x`` itself above 20, else ``log(1 + exp(x))``, each op rounded.

    vLLM 0.33.0 ``fused_sigmoid_gating.py`` lines 129-132 and SGLang 0.5.23
    ``fused_sigmoid_gating_recurrent.py`` lines 357-360 (``x <= 20`` takes the
    log form; beta 1), FLA 0.6.0 ``ops/utils/softplus.py`` line 86 (``x < 20``:
    at 20 both give 20 in FP32). ``1 + exp(x)`` is rounded before the log,
    where torch's ``log1p`` is not.

    Raises:
        TypeError: ``x`` is neither float64 nor float32.

    RB-REPLAY-10.
    """
    values = np.asarray(x)
    below = np.minimum(values, values.dtype.type(SOFTPLUS_THRESHOLD))
    result: Array = np.where(values > SOFTPLUS_THRESHOLD, values, log(1 + exp(below)))
    return result
