# SPDX-License-Identifier: MIT OR Apache-2.0
"""The portable arithmetic rounds once, to nearest, ties to even, and sums left to right."""

from __future__ import annotations

import decimal
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ssm_rollback_spec.replay.portable import exp, log1p, ordered_sum

_FINITE = st.floats(allow_nan=False, allow_infinity=False)


def _nearest_float32(value: Fraction, /) -> np.float32:
    """The float32 nearest ``value`` by exact comparison of its neighbours; ties to even."""
    start = np.float32(float(value))
    candidates = [start]
    for direction in (np.float32(np.inf), np.float32(-np.inf)):
        step = start
        for _ in range(2):
            step = np.nextafter(step, direction)
            candidates.append(step)
    finite = [c for c in candidates if np.isfinite(c)]

    def distance(c: np.float32) -> tuple[Fraction, int]:
        even = int(np.array([c]).view(np.uint32)[0]) & 1
        return abs(Fraction(float(c)) - value), even

    return min(finite, key=distance)


def _exact_exp(x: float, /) -> Fraction:
    return Fraction(decimal.Decimal(x).exp(decimal.Context(prec=120, Emax=10**6, Emin=-(10**6))))


@given(x=st.floats(-700, 700))
@example(x=0.0)
@example(x=1.0)
@example(x=-745.0)  # underflows to the least subnormal
def test_exp_in_float64_is_the_nearest_double_to_the_exact_value(x: float) -> None:
    got = float(exp(np.array([x]))[0])
    assert got == float(_exact_exp(x))
    assert abs(got - math.exp(x)) <= math.ulp(math.exp(x))


@given(x=st.floats(-100, 88, width=32))
@example(x=0.5)
@example(x=-104.0)  # below half the least float32 subnormal: rounds to zero
def test_exp_in_float32_rounds_once_to_the_nearest_float32(x: float) -> None:
    got = exp(np.array([x], dtype=np.float32))
    assert got.dtype == np.float32
    assert got[0] == _nearest_float32(_exact_exp(x))


@given(x=st.floats(-0.999999, 1e300))
@example(x=1e-300)  # 1 + x must be exact, or the result is 0
@example(x=-0.5)
def test_log1p_is_the_nearest_double_to_the_exact_value(x: float) -> None:
    exact = decimal.Context(prec=2000).add(1, decimal.Decimal(x))
    expected = float(Fraction(exact.ln(decimal.Context(prec=120))))
    assert float(log1p(np.array([x]))[0]) == expected


def test_special_values_are_ieee_s() -> None:
    specials = np.array([np.inf, -np.inf, np.nan, 800.0])
    assert exp(specials)[:2].tolist() == [np.inf, 0.0]
    assert np.isnan(exp(specials)[2])
    assert exp(specials)[3] == np.inf  # overflow rounds to infinity
    logs = log1p(np.array([-1.0, -2.0, np.inf]))
    assert logs[0] == -np.inf
    assert np.isnan(logs[1])
    assert logs[2] == np.inf


def test_only_float64_and_float32_have_a_format() -> None:
    with pytest.raises(TypeError, match=r"^the portable arithmetic has no float16 format$"):
        exp(np.array([1.0], dtype=np.float16))


@given(values=st.lists(_FINITE.filter(lambda v: abs(v) < 1e300), min_size=1, max_size=9))
@example(values=[1e16, 1.0, -1e16])  # another order gives 0.0 or 2.0
def test_ordered_sum_adds_left_to_right(values: list[float]) -> None:
    total = values[0]
    for value in values[1:]:
        total += value
    array = np.array([values, values])
    assert ordered_sum(array, axis=1).tolist() == [total, total]
    assert ordered_sum(array.T, axis=0, keepdims=True).shape == (1, 2)


def test_ordered_sum_refuses_an_empty_axis() -> None:
    with pytest.raises(ValueError, match=r"^ordered_sum: the model never sums an empty axis$"):
        ordered_sum(np.zeros((2, 0)), axis=1)
