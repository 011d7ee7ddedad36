# SPDX-License-Identifier: MIT OR Apache-2.0
"""Byte and token counts read one way: vLLM's suffixes, the unit names, plain digits."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import pytest

from ssm_rollback_spec.sizing.units import SizeTextError, byte_count, token_count

if TYPE_CHECKING:
    from collections.abc import Callable

#: What a refused byte count is told to give, written out once.
_GIVE: Final = "(give digits, 10G or 10GiB (x 2^30), 10g or 10GB (x 10^9))"


@pytest.mark.parametrize(
    ("typed", "value"),
    [
        ("4096", 4096),
        (" 7 ", 7),
        ("10G", 10 * 2**30),
        ("10g", 10 * 10**9),
        ("10GiB", 10 * 2**30),
        ("10GB", 10 * 10**9),
        ("512MiB", 512 * 2**20),
        ("512MB", 512 * 10**6),
        ("2TiB", 2 * 2**40),
        ("2TB", 2 * 10**12),
        ("1KiB", 1024),
        ("1KB", 1000),
        ("40.5GiB", 43_486_543_872),
        ("1.5GB", 1_500_000_000),
        ("25.6k", 25_600),
    ],
)
def test_a_byte_count_reads_every_spelling_with_its_meaning(typed: str, value: int) -> None:
    assert byte_count(typed) == value


@pytest.mark.parametrize(
    ("typed", "value"),
    [("32768", 32_768), ("32K", 32_768), ("32k", 32_000), ("1M", 2**20), ("1m", 10**6)],
)
def test_a_token_count_reads_k_and_m_as_vllm_does(typed: str, value: int) -> None:
    assert token_count(typed) == value


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        (
            "10 GB",
            f"not a byte count: '10 GB' {_GIVE}",
        ),
        ("10gb", f"not a byte count: '10gb' {_GIVE}"),
        ("-1", f"not a byte count: '-1' {_GIVE}"),
        ("0", "must be at least 1, got '0'"),
        ("0GiB", "must be at least 1, got '0GiB'"),
        ("1.5G", "vLLM takes no decimals with G (did you mean g?): '1.5G'"),
        ("0.1GiB", "not a whole number of bytes: '0.1GiB' is 107,374,182.4 B"),
        ("\u0661\u0662", f"not a byte count: '\u0661\u0662' {_GIVE}"),
    ],
)  # fmt: skip
def test_a_byte_count_it_cannot_read_is_refused_quoting_the_text(typed: str, message: str) -> None:
    with pytest.raises(SizeTextError) as raised:
        byte_count(typed)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        ("32KiB", "not a token count: '32KiB' (give digits, 128K (x 1024) or 128k (x 1000))"),
        ("1.5K", "vLLM takes no decimals with K (did you mean k?): '1.5K'"),
        ("0k", "must be at least 1, got '0k'"),
        ("10X", "not a token count: '10X' (give digits, 128K (x 1024) or 128k (x 1000))"),
    ],
)
def test_a_token_count_it_cannot_read_is_refused_quoting_the_text(typed: str, message: str) -> None:
    with pytest.raises(SizeTextError) as raised:
        token_count(typed)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("read", "typed", "unit"),
    [
        (byte_count, str(2**64), "bytes"),
        (byte_count, "16777216T", "bytes"),
        (byte_count, "17179869184GiB", "bytes"),
        (token_count, str(2**64), "tokens"),
        (token_count, "99999999999999999999999", "tokens"),
    ],
)
def test_a_count_past_64_bits_is_one_line_naming_the_text(
    read: Callable[[str], int], typed: str, unit: str
) -> None:
    with pytest.raises(SizeTextError) as raised:
        read(typed)
    assert str(raised.value) == (
        f"{typed!r} is past 2^64 - 1 {unit}, more than a 64-bit machine addresses"
    )


def test_the_largest_count_is_read() -> None:
    assert byte_count(str(2**64 - 1)) == token_count(str(2**64 - 1)) == 2**64 - 1
