# SPDX-License-Identifier: MIT OR Apache-2.0
"""Replay row and ring sizes: exact values, K-1 saturating at zero, overflow."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from .conformance import exchange
from .strategies import (
    USIZE_MAX,
    small_usizes,
    usize_max_factorizations,
    usizes,
)

if TYPE_CHECKING:
    from ssm_rollback_spec.harness.driver import Implementation

RING_FIELDS: Final = ("num_ssm_layers", "row_bytes", "k_ceiling", "mtp_state_slots")
ROW_FIELDS: Final = ("qkvz_elems", "nv")
OVERFLOW: Final = "overflow"


def ring(impl: Implementation, layers: int, row: int, k: int, slots: int) -> int | str:
    """The ring size, or "overflow"; the reply must already agree with the model."""
    request = {"op": "ring_bytes", "num_ssm_layers": layers, "row_bytes": row}
    request |= {"k_ceiling": k, "mtp_state_slots": slots}
    reply = exchange(impl, request)
    return OVERFLOW if "error" in reply else reply["ok"]  # type: ignore[return-value]


def row(impl: Implementation, qkvz_elems: int, nv: int) -> int | str:
    """The row size, or "overflow"; the reply must already agree with the model."""
    reply = exchange(impl, {"op": "row_bytes", "qkvz_elems": qkvz_elems, "nv": nv})
    return OVERFLOW if "error" in reply else reply["ok"]  # type: ignore[return-value]


def not_smaller(before: int | str, after: int | str) -> bool:
    """Monotonic order on sizes, with overflow above every number."""
    if after == OVERFLOW:
        return True
    return before != OVERFLOW and int(before) <= int(after)


# --- row bytes ---------------------------------------------------------------


@pytest.mark.clause("RB-SIZE-1", "RB-SIZE-3")
@given(qkvz_elems=usizes, nv=usizes)
@example(qkvz_elems=0, nv=0)
@example(qkvz_elems=1, nv=1)
@example(qkvz_elems=(USIZE_MAX - 1) // 2, nv=0)
@example(qkvz_elems=(USIZE_MAX + 1) // 2, nv=0)
@example(qkvz_elems=0, nv=USIZE_MAX // 8)
@example(qkvz_elems=0, nv=USIZE_MAX // 8 + 1)
@example(qkvz_elems=3, nv=USIZE_MAX // 8)
@example(qkvz_elems=USIZE_MAX, nv=USIZE_MAX)
def test_row_bytes_is_the_exact_value_or_overflow(
    impl: Implementation, qkvz_elems: int, nv: int
) -> None:
    row(impl, qkvz_elems, nv)


@pytest.mark.clause("RB-SIZE-1")
@given(qkvz_elems=small_usizes, nv=small_usizes)
def test_row_bytes_of_real_dimensions(impl: Implementation, qkvz_elems: int, nv: int) -> None:
    assert row(impl, qkvz_elems, nv) == 2 * qkvz_elems + 8 * nv


@pytest.mark.clause("RB-SIZE-1", "RB-SIZE-3")
@given(qkvz_elems=usizes, nv=usizes, which=st.sampled_from(ROW_FIELDS), growth=usizes)
def test_row_bytes_never_shrinks_as_an_argument_grows(
    impl: Implementation, qkvz_elems: int, nv: int, which: str, growth: int
) -> None:
    grown = {"qkvz_elems": qkvz_elems, "nv": nv}
    grown[which] = min(grown[which] + growth, USIZE_MAX)
    assert not_smaller(row(impl, qkvz_elems, nv), row(impl, **grown))


@pytest.mark.clause("RB-SIZE-3")
@given(nv=st.integers(0, (USIZE_MAX - 1) // 8))
@example(nv=0)
@example(nv=(USIZE_MAX - 1) // 8)
def test_row_bytes_overflows_exactly_one_step_past_the_largest_size(
    impl: Implementation, nv: int
) -> None:
    # 2q + 8nv is even and USIZE_MAX odd, so USIZE_MAX - 1 is the largest size.
    qkvz_elems = (USIZE_MAX - 1 - 8 * nv) // 2
    assert row(impl, qkvz_elems, nv) == USIZE_MAX - 1
    assert row(impl, qkvz_elems + 1, nv) == OVERFLOW
    if nv < USIZE_MAX:
        assert row(impl, qkvz_elems, nv + 1) == OVERFLOW


# --- ring bytes --------------------------------------------------------------


@pytest.mark.clause("RB-SIZE-2", "RB-SIZE-3")
@given(layers=usizes, row_bytes=usizes, k=usizes, slots=usizes)
@example(layers=1, row_bytes=1, k=0, slots=1)
@example(layers=1, row_bytes=1, k=1, slots=1)
@example(layers=1, row_bytes=1, k=2, slots=1)
@example(layers=USIZE_MAX, row_bytes=USIZE_MAX, k=0, slots=USIZE_MAX)
@example(layers=USIZE_MAX, row_bytes=USIZE_MAX, k=1, slots=USIZE_MAX)
@example(layers=0, row_bytes=USIZE_MAX, k=USIZE_MAX, slots=USIZE_MAX)
@example(layers=USIZE_MAX, row_bytes=0, k=USIZE_MAX, slots=USIZE_MAX)
@example(layers=USIZE_MAX, row_bytes=USIZE_MAX, k=USIZE_MAX, slots=0)
@example(layers=2**32, row_bytes=2**32, k=2, slots=1)
def test_ring_bytes_is_the_exact_value_or_overflow(
    impl: Implementation, layers: int, row_bytes: int, k: int, slots: int
) -> None:
    ring(impl, layers, row_bytes, k, slots)


@pytest.mark.clause("RB-SIZE-2")
@given(layers=small_usizes, row_bytes=small_usizes, k=st.integers(0, 64), slots=st.integers(0, 64))
def test_ring_bytes_of_real_dimensions(
    impl: Implementation, layers: int, row_bytes: int, k: int, slots: int
) -> None:
    assert ring(impl, layers, row_bytes, k, slots) == slots * max(k - 1, 0) * layers * row_bytes


@pytest.mark.clause("RB-SIZE-2")
@given(layers=usizes, row_bytes=usizes, slots=usizes, k=st.sampled_from([0, 1]))
@example(layers=USIZE_MAX, row_bytes=USIZE_MAX, slots=USIZE_MAX, k=0)
@example(layers=USIZE_MAX, row_bytes=USIZE_MAX, slots=USIZE_MAX, k=1)
def test_k_ceiling_zero_and_one_give_an_empty_ring(
    impl: Implementation, layers: int, row_bytes: int, slots: int, k: int
) -> None:
    assert ring(impl, layers, row_bytes, k, slots) == 0


@pytest.mark.clause("RB-SIZE-2", "RB-SIZE-3")
@given(
    layers=usizes,
    row_bytes=usizes,
    k=usizes,
    slots=usizes,
    which=st.sampled_from(RING_FIELDS),
    growth=usizes,
)
@example(layers=1, row_bytes=1, k=0, slots=1, which="k_ceiling", growth=1)
@example(layers=1, row_bytes=1, k=1, slots=1, which="k_ceiling", growth=1)
def test_ring_bytes_never_shrinks_as_an_argument_grows(
    impl: Implementation, layers: int, row_bytes: int, k: int, slots: int, which: str, growth: int
) -> None:
    before = {"num_ssm_layers": layers, "row_bytes": row_bytes, "k_ceiling": k}
    before["mtp_state_slots"] = slots
    after = dict(before)
    after[which] = min(after[which] + growth, USIZE_MAX)
    assert not_smaller(
        ring(impl, layers, row_bytes, k, slots),
        ring(impl, *(after[name] for name in RING_FIELDS)),
    )


@pytest.mark.clause("RB-SIZE-3")
@given(factors=usize_max_factorizations(4), bumped=st.sampled_from(RING_FIELDS))
@example(factors=(USIZE_MAX, 1, 1, 1), bumped="num_ssm_layers")
@example(factors=(1, 1, USIZE_MAX, 1), bumped="mtp_state_slots")
def test_ring_bytes_of_exactly_usize_max_fits_and_one_more_overflows(
    impl: Implementation, factors: tuple[int, ...], bumped: str
) -> None:
    layers, row_bytes, replayed, slots = factors
    exact = {"num_ssm_layers": layers, "row_bytes": row_bytes}
    exact |= {"k_ceiling": replayed + 1, "mtp_state_slots": slots}
    assume(exact["k_ceiling"] <= USIZE_MAX)
    assert ring(impl, *(exact[name] for name in RING_FIELDS)) == USIZE_MAX
    exact[bumped] += 1
    assume(exact[bumped] <= USIZE_MAX)
    assert ring(impl, *(exact[name] for name in RING_FIELDS)) == OVERFLOW


@pytest.mark.clause("RB-SIZE-2", "RB-SIZE-3")
@given(huge=st.lists(usizes, min_size=3, max_size=3), zero_at=st.sampled_from(RING_FIELDS))
@example(huge=[USIZE_MAX, USIZE_MAX, USIZE_MAX], zero_at="num_ssm_layers")
@example(huge=[USIZE_MAX, USIZE_MAX, USIZE_MAX], zero_at="row_bytes")
@example(huge=[USIZE_MAX, USIZE_MAX, USIZE_MAX], zero_at="mtp_state_slots")
def test_a_zero_factor_beside_huge_ones_gives_zero_not_overflow(
    impl: Implementation, huge: list[int], zero_at: str
) -> None:
    values = dict(zip([name for name in RING_FIELDS if name != zero_at], huge, strict=True))
    # k_ceiling's zero is k_ceiling 1: K-1 is the factor.
    values[zero_at] = 1 if zero_at == "k_ceiling" else 0
    assert ring(impl, *(values[name] for name in RING_FIELDS)) == 0
