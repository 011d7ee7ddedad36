# SPDX-License-Identifier: MIT OR Apache-2.0
"""Each flag's value read one way, below the command line; the engines' names for our flags."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from ssm_rollback_spec.sizing import options, units
from ssm_rollback_spec.sizing.memory import flags as memory_flags

if TYPE_CHECKING:
    from collections.abc import Callable


@pytest.mark.parametrize(("typed", "value"), [("0", 0), ("7", 7), (" 12 ", 12), ("+3", 3)])
def test_a_whole_number_is_read_from_zero(typed: str, value: int) -> None:
    assert options.whole_number(typed) == value


@pytest.mark.parametrize(
    ("read", "typed", "message"),
    [
        (options.whole_number, "x", "not a whole number: 'x'"),
        (options.whole_number, "-1", "must not be negative: -1"),
        (options.whole_number, "1.5", "not a whole number: '1.5'"),
        (options.positive, "0", "must be at least 1, got 0"),
        (options.positive, "1.5", "not a whole number: '1.5'"),
        (options.draft_counts, "8-1", "a range runs upward, got '8-1'"),
        (options.draft_counts, "1-x", "not a whole number or range: '1-x'"),
        (options.draft_counts, "-3", "must not be negative: -3"),
        (options.draft_counts, "0-1024", "at most 1024 values, got '0-1024'"),
        (options.fraction, "0", "a fraction above 0 and at most 1, got '0'"),
        (options.fraction, "1.5", "a fraction above 0 and at most 1, got '1.5'"),
        (options.fraction, "half", "a fraction above 0 and at most 1, got 'half'"),
        (options.ratio, "-2", "a number above 0, got '-2'"),
        (
            options.engine_dtype,
            "float8",
            "invalid choice: 'float8' (choose from 'auto', 'float32', 'bfloat16', 'float16')",
        ),
    ],
)
def test_a_value_no_flag_reads_is_refused_with_the_flags_line(
    read: Callable[[str], object], typed: str, message: str
) -> None:
    with pytest.raises(units.SizeTextError) as raised:
        read(typed)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("typed", "counts"),
    [("3", (3,)), ("1,3,7", (1, 3, 7)), ("1-4", (1, 2, 3, 4)), ("7,1-3,3", (1, 2, 3, 7))],
)
def test_draft_counts_are_values_ranges_or_a_mix_sorted_once(
    typed: str, counts: tuple[int, ...]
) -> None:
    assert options.draft_counts(typed) == counts


def test_a_sweep_takes_at_most_its_cap_of_values() -> None:
    assert len(options.draft_counts(f"1-{options.MAX_SWEEP_VALUES}")) == options.MAX_SWEEP_VALUES


def test_a_fraction_is_at_most_one_and_a_ratio_any_number_above_zero() -> None:
    assert options.fraction("1") == 1.0
    assert options.fraction("0.9") == 0.9
    assert options.ratio("2.5") == 2.5


@pytest.mark.parametrize(
    ("typed", "dtype"),
    [("auto", None), ("float32", "fp32"), ("bfloat16", "bf16"), ("float16", "fp16"),
     ("fp8", "fp8")],
)  # fmt: skip
def test_an_engines_dtype_name_is_read_as_ours(typed: str, dtype: str | None) -> None:
    assert options.engine_dtype(typed) == dtype


def test_every_memory_flag_has_a_reader_or_is_a_count() -> None:
    metavars = {flag.metavar for flag in memory_flags()}
    assert metavars - set(options.READERS) == {"N"}
    assert options.READERS["BYTES"]("10G") == 10 * 2**30
    assert options.READERS["TOKENS"]("128k") == 128_000


def test_each_engine_alias_stands_for_one_flag_of_ours() -> None:
    aliases = [alias for names in options.ENGINE_ALIASES.values() for alias in names]
    assert len(aliases) == len(set(aliases))
    assert all(alias.startswith("--") for alias in aliases)
