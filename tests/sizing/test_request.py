# SPDX-License-Identifier: MIT OR Apache-2.0
"""The flags' values to a review's request, and a review's errors back to the flags as typed."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Final

import pytest

from ssm_rollback_spec.sizing import dimensions as dims
from ssm_rollback_spec.sizing import request
from ssm_rollback_spec.sizing.dtypes import Dtype, UnsupportedDtypeError
from ssm_rollback_spec.sizing.memory import FitFlagsError
from ssm_rollback_spec.sizing.review import OneReviewError, ReviewOverflowError
from ssm_rollback_spec.tools.size import add_arguments

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

DIMENSIONS: Final = [
    "--gdn-layers", "48", "--key-heads", "16", "--key-head-dim", "128",
    "--value-heads", "32", "--value-head-dim", "128", "--conv-kernel", "4",
]  # fmt: skip


def _values(*typed: str) -> dict[str, Any]:
    """The values the command line parses for ``typed``, as :mod:`.request` is given them."""
    parser = argparse.ArgumentParser(prog="ssm-rollback-spec size")
    add_arguments(parser)
    return vars(parser.parse_args(list(typed)))


def _refused(call: Callable[..., object], *arguments: object) -> str:
    with pytest.raises(request.FlagsError) as raised:
        call(*arguments)
    return str(raised.value)


def test_a_flag_is_named_as_typed_else_as_ours() -> None:
    values = _values("--num-speculative-tokens", "3", *DIMENSIONS)
    assert request.spelling(values, "num_drafts") == "--num-speculative-tokens"
    assert request.spelling(values, "tp") == "--tp"
    assert request.spelling({}, "state_dtype") == "--state-dtype"


@pytest.mark.parametrize(
    ("typed", "line"),
    [
        (
            ["--num-drafts", "3", "--context", "32K"],
            "--context needs --batch: the requests to size the memory for",
        ),
        (
            ["--speculative-num-steps", "1-3", "--max-model-len", "128K"],
            "--max-model-len sizes one review; leave it out of a --speculative-num-steps sweep",
        ),
        (
            ["--num-drafts", "3", "--kv-cache-memory-bytes", "10G", "--mem-fraction-static", "0.8"],
            "give --kv-cache-memory-bytes or --mem-fraction-static, not both",
        ),
    ],
)
def test_flags_that_make_no_request_are_one_line(typed: list[str], line: str) -> None:
    values = _values(*DIMENSIONS, *typed)
    assert _refused(request.memory_fit, values) == line


def test_no_memory_flag_asks_for_no_fit() -> None:
    assert request.memory_fit(_values("--num-drafts", "3", *DIMENSIONS)) is None


def test_the_request_holds_the_flags_values_and_records_every_sizing_flag() -> None:
    values = _values("--num-drafts", "1-2", *DIMENSIONS, "--tp", "2", "--batch", "4", "--json", "-")
    made = request.size_request(values, None, config=None, config_path=None)
    assert made.num_drafts == (1, 2)
    assert made.mtp_slots == 4
    assert made.tp == 2
    assert made.dimensions == dims.GdnDimensions(48, 16, 128, 32, 128, 4)
    assert made.config_path is None
    assert made.flags["--num-drafts"] == [1, 2]
    assert made.flags["--no-enable-prefix-caching"] is False
    assert not {"--json", "--format", "--run", "--spelling"} & set(made.flags)


def test_the_request_resolves_the_config_path(tmp_path: Path) -> None:
    values = _values("--num-drafts", "3", "--config", "qwen3.5-27b", "--state-dtype", "fp32")
    made = request.size_request(values, None, config={}, config_path=tmp_path / "c.json")
    assert made.config_path == str((tmp_path / "c.json").resolve())
    assert made.mtp_slots == 1
    assert made.setup.recurrent is Dtype.FP32


def test_the_model_is_the_config_or_every_dimension_never_both() -> None:
    both = _values("--num-drafts", "3", *DIMENSIONS)
    assert (
        _refused(lambda: request.size_request(both, None, config={}, config_path=None))
        == "give either --config or the explicit dimensions, not both"
    )
    short = _values("--num-drafts", "3", *DIMENSIONS[:-2])
    assert (
        _refused(lambda: request.size_request(short, None, config=None, config_path=None))
        == "give --config, or every dimension (missing --conv-kernel)"
    )


@pytest.mark.parametrize(
    ("typed", "error", "line"),
    [
        (
            ["--speculative-num-steps", "3", "--batch", "8"],
            ReviewOverflowError("preflight", 3, None, None),
            (
                "the preflight reservation exceeds the runtime's 64-bit usize with"
                " --speculative-num-steps 3, --batch 8, --config qwen3.5-27b"
            ),
        ),
        (
            ["--num-drafts", "1-8", "--mtp-slots", "2"],
            ReviewOverflowError("ring", 5, None, None),
            (
                "the replay ring exceeds the runtime's 64-bit usize with --num-drafts 5,"
                " --mtp-slots 2, --config qwen3.5-27b"
            ),
        ),
        (
            ["--num-drafts", "3", "--batch", "4", "--linear-replayssm-cache-len", str(2**60)],
            ReviewOverflowError("state:sglang-replayssm", 3, None, None),
            (
                "the sglang-replayssm view's state exceeds 2^64 - 1 bytes, a 64-bit address"
                f" space, with --num-drafts 3, --batch 4, --linear-replayssm-cache-len {2**60},"
                " --config qwen3.5-27b"
            ),
        ),
        (
            ["--num-drafts", "3", "--mamba-ssm-dtype", "float16"],
            UnsupportedDtypeError("vLLM 0.1", Dtype.FP16, "fp32"),
            "--mamba-ssm-dtype fp16: vLLM 0.1 offers no fp16 state dtype (only fp32)",
        ),
        (
            ["--num-drafts", "3", "--tp-size", "3"],
            dims.TensorParallelError(3, 16, "key heads"),
            "--tp-size 3 does not divide the 16 key heads of --config qwen3.5-27b",
        ),
        (
            ["--num-speculative-tokens", "1-3"],
            OneReviewError("num_intermediates"),
            (
                "--num-intermediates sizes one review; leave it out of a --num-speculative-tokens"
                " sweep"
            ),
        ),
        (["--num-drafts", "3"], FitFlagsError("--a needs --b"), "--a needs --b"),
        (
            ["--num-drafts", "3"],
            dims.ConfigError("no GDN layers"),
            "--config qwen3.5-27b: no GDN layers",
        ),
    ],
)
def test_an_error_of_the_review_is_worded_by_the_flags_as_typed(
    typed: list[str], error: Exception, line: str
) -> None:
    values = _values("--config", "qwen3.5-27b", *typed)
    assert isinstance(error, request.REVIEW_ERRORS)
    assert request.error_line(error, values) == line
