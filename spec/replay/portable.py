# SPDX-License-Identifier: MIT OR Apache-2.0
"""Arithmetic that rounds the same on every machine (the replay profile).

The replay vectors record exact bits, so the model must not inherit the last
bits of whichever ``exp`` kernel numpy dispatches to on the CPU at hand
(AVX-512, AVX2 and baseline SSE kernels round differently), nor the order a
BLAS or a SIMD reduction sums in. Three rules make every result a function of
its inputs alone:

- **Correctly rounded transcendentals.** :func:`exp`, :func:`log` and
  :func:`log1p`, the only three the model uses, are computed in
  :mod:`decimal` at :data:`DECIMAL_DIGITS` significant digits and rounded
  once, to nearest with ties to even, to the dtype of their argument. Fifty
  digits (about 166 bits) are far more than the hardest-to-round binary64
  arguments of these functions need (Lefèvre and Muller's worst cases are within about 2**-120 of a
  midpoint), so the result is the correctly rounded one, which any correctly
  rounded library (CORE-MATH, CRlibm, MPFR) also returns.
- **Basic operations only, elementwise.** Everything else is ``+ - * /`` and
  ``sqrt`` on numpy arrays, which IEEE 754 rounds exactly in every SIMD width;
  numpy evaluates ``a * b + c`` as two roundings, never a fused multiply-add.
- **Sums in a fixed order.** :func:`ordered_sum` adds left to right along an
  axis, one elementwise addition at a time, where ``ndarray.sum`` may pair,
  unroll or vectorise as the build sees fit. No matrix product is used.
"""

from __future__ import annotations

import decimal
import math
from fractions import Fraction
from typing import TYPE_CHECKING, Final

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["DECIMAL_DIGITS", "Array", "exp", "log", "log1p", "ordered_sum"]

#: What every array of the model is: float64, or float32 holding BF16/FP32 values.
Array = NDArray[np.floating]

#: Significant decimal digits of the intermediate result before the one rounding.
DECIMAL_DIGITS: Final = 50

# Significand bits, and the least and greatest normal exponents, per dtype.
_FORMATS: Final = {
    np.dtype(np.float64): (53, -1022, 1023),
    np.dtype(np.float32): (24, -126, 127),
}
# A context of its own, so the caller's decimal settings never reach the model.
_CONTEXT: Final = decimal.Context(prec=DECIMAL_DIGITS, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
# Enough digits to hold 1 + x exactly for any binary64 x, so log1p rounds once.
_EXACT_SUM_DIGITS: Final = 1200


def _format(dtype: np.dtype[np.floating], /) -> tuple[int, int, int]:
    try:
        return _FORMATS[dtype]
    except KeyError:
        raise TypeError(f"the portable arithmetic has no {dtype} format") from None


def _round_to(value: Fraction, dtype: np.dtype[np.floating], /) -> float:
    """The ``dtype`` value nearest ``value``, ties to even, overflow to infinity."""
    if value == 0:
        return 0.0
    bits, min_exponent, max_exponent = _format(dtype)
    sign = -1.0 if value < 0 else 1.0
    magnitude = abs(value)
    numerator, denominator = magnitude.numerator, magnitude.denominator
    exponent = numerator.bit_length() - denominator.bit_length()
    # bit_length brackets the exponent within one: settle it exactly.
    if (numerator << max(0, -exponent)) < (denominator << max(0, exponent)):
        exponent -= 1
    exponent = max(exponent, min_exponent)  # subnormals keep the least exponent
    scale = bits - 1 - exponent
    significand = round(magnitude * Fraction(2) ** scale)  # Fraction rounds half to even
    if significand >= 1 << bits:
        exponent += 1
    if exponent > max_exponent:
        return math.copysign(math.inf, sign)
    return math.copysign(math.ldexp(significand, -scale), sign)


def _exp(x: float, dtype: np.dtype[np.floating], /) -> float:
    if not math.isfinite(x):
        return math.exp(x)  # inf, 0 and nan are exact on every machine
    return _round_to(Fraction(decimal.Decimal(x).exp(_CONTEXT)), dtype)


def _log1p(x: float, dtype: np.dtype[np.floating], /) -> float:
    if math.isnan(x) or x == math.inf:
        return x
    if x <= -1:
        return -math.inf if x == -1 else math.nan
    exact = decimal.Context(prec=_EXACT_SUM_DIGITS).add(1, decimal.Decimal(x))
    return _round_to(Fraction(exact.ln(_CONTEXT)), dtype)


def _log(x: float, dtype: np.dtype[np.floating], /) -> float:
    if math.isnan(x) or x == math.inf:
        return x
    if x <= 0:
        return -math.inf if x == 0 else math.nan
    return _round_to(Fraction(decimal.Decimal(x).ln(_CONTEXT)), dtype)


def _elementwise(
    values: Array, function: Callable[[float, np.dtype[np.floating]], float], /
) -> Array:
    array = np.asarray(values)
    _format(array.dtype)
    # tolist() gives each float32 or float64 element as the exact Python float.
    results = [function(x, array.dtype) for x in array.ravel().tolist()]
    return np.array(results, dtype=array.dtype).reshape(array.shape)


def exp(values: Array, /) -> Array:
    """``e**x`` elementwise, correctly rounded to the dtype of ``values``.

    Raises:
        TypeError: ``values`` is neither float64 nor float32.

    RB-REPLAY-1 (both paths, and every port, round the same bits).
    """
    return _elementwise(values, _exp)


def log1p(values: Array, /) -> Array:
    """``ln(1 + x)`` elementwise, correctly rounded to the dtype of ``values``.

    Raises:
        TypeError: ``values`` is neither float64 nor float32.

    RB-REPLAY-1.
    """
    return _elementwise(values, _log1p)


def log(values: Array, /) -> Array:
    """``ln(x)`` elementwise, correctly rounded to the dtype of ``values``.

    The engines' softplus is ``log(1 + exp(x))``, not ``log1p(exp(x))``.

    Raises:
        TypeError: ``values`` is neither float64 nor float32.

    RB-REPLAY-1.
    """
    return _elementwise(values, _log)


def ordered_sum(values: Array, /, axis: int, *, keepdims: bool = False) -> Array:
    """The sum along ``axis``, added left to right in the dtype of ``values``.

    Raises:
        ValueError: the axis is empty (the model never sums nothing).

    RB-REPLAY-1.
    """
    moved = np.moveaxis(np.asarray(values), axis, 0)
    if moved.shape[0] == 0:
        raise ValueError("ordered_sum: the model never sums an empty axis")
    total: Array = moved[0].copy()
    for part in moved[1:]:
        total = total + part
    return np.expand_dims(total, axis) if keepdims else total
