# SPDX-License-Identifier: MIT OR Apache-2.0
"""A review's figures that hold up: vLLM's length check, nothing speculative at 0 drafts, large
figures read (spec/sizing/review.py, and the wording its report takes).

In-process: ``size`` is called through ``main``. vLLM 0.33.0's own length
check is cited by file and line (``vllm.SOURCES["max_model_len check"]``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

from ssm_rollback_spec.sizing import dimensions as dims
from ssm_rollback_spec.sizing.engines.vllm import facts as vllm
from ssm_rollback_spec.sizing.presentation import rejoined
from ssm_rollback_spec.sizing.registry import ENGINES
from ssm_rollback_spec.sizing.wording import human, short
from ssm_rollback_spec.tools.cli import main

if TYPE_CHECKING:
    from collections.abc import Mapping

EXAMPLES: Final = Path(__file__).resolve().parents[2] / "examples"


def _config(tmp_path: Path, **text: object) -> str:
    config = json.loads((EXAMPLES / "qwen3.5-27b.config.json").read_text(encoding="utf-8"))
    config["text_config"] |= text
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return str(path)


def _start(capsys: pytest.CaptureFixture[str], config: str, length: str) -> Mapping[str, Any]:
    arguments = [
        "size", "--config", config, "--num-drafts", "3", "--engine", "vllm",
        "--kv-cache-memory-bytes", "40G", "--max-model-len", length, "--max-num-seqs", "8",
        "--json", "-",
    ]  # fmt: skip
    assert main(arguments) == 0
    start: Mapping[str, Any] = json.loads(capsys.readouterr().out)["start"]
    return start


def test_vllm_refuses_a_max_model_len_above_the_models(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, max_position_embeddings=262_144)
    start = _start(capsys, config, "1M")
    assert start == {
        "starts": False,
        "says": 'vLLM raises "User-specified max_model_len (1048576) is greater than the derived'
        ' max_model_len (max_position_embeddings=262144 ...)" for --max-model-len 1,048,576',
        "source": "vllm/config/model.py:2657-2683",
        "largest": "largest --max-model-len that starts: 262,144"
        " (VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 lets more through)",
        "smallest_memory": None,
    }
    # At the model's own length the check passes, and the blocks decide.
    assert _start(capsys, config, "256K")["starts"] is True


@pytest.mark.parametrize(
    ("text", "longest"),
    [
        ({"max_position_embeddings": 4096}, 4096),
        # The smallest of the keys vLLM reads wins.
        ({"max_position_embeddings": 8192, "seq_length": 4096}, 4096),
        # A RoPE factor scales the length, unless its type is already scaled.
        ({"max_position_embeddings": 4096, "rope_parameters": {"rope_type": "linear", "factor": 2}},
         8192),
        ({"max_position_embeddings": 4096, "rope_parameters": {"rope_type": "yarn", "factor": 4}},
         4096),
        ({}, None),
    ],
)  # fmt: skip
def test_the_models_length_is_derived_as_vllm_derives_it(
    text: dict[str, object], longest: int | None
) -> None:
    found = vllm.model_length(text)
    assert (None if found is None else found.tokens) == longest
    if found is not None:
        assert found.refuses(longest + 1) if longest else False
        assert not found.refuses(found.tokens)


def test_the_text_configs_model_max_length_is_the_length_and_a_top_configs_is_not_read() -> None:
    # vLLM reads model_max_length from the text config alone, where it is the
    # derived length (the planners tier checks it against vLLM's own code).
    longer = vllm.model_length({"max_position_embeddings": 4096, "model_max_length": 16_384})
    assert longer is not None
    assert (longer.key, longer.refuses(16_384), longer.refuses(16_385)) == (
        "model_max_length",
        False,
        True,
    )
    config = {"model_max_length": 16_384, "text_config": {"max_position_embeddings": 4096}}
    found = vllm.model_length(dims.text_config(config))
    assert found is not None
    assert (found.refuses(4096), found.refuses(4097)) == (False, True)


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_no_view_holds_speculative_state_at_0_drafts(
    capsys: pytest.CaptureFixture[str], engine: str
) -> None:
    arguments = ["size", "--config", "qwen3.5-27b", "--num-drafts", "0", "--engine", engine]
    assert main([*arguments, "--json", "-"]) == 0
    snapshot = json.loads(capsys.readouterr().out)["snapshot"]
    assert (snapshot["speculative_bytes"], snapshot["speculative_bytes_per_request"]) == (0, 0)


def test_a_sweep_from_0_drafts_shows_no_ring_and_no_speculative_state_there(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["size", "--config", "qwen3.5-27b", "--num-drafts", "0,1", "--json", "-"]) == 0
    zero, one = json.loads(capsys.readouterr().out)["rows"]
    assert zero["replayssm_ring"] == {"per_request": 0, "per_gpu": 0}
    assert set(zero["speculative"]) == set(ENGINES)
    assert all(view["per_gpu"] == 0 for view in zero["speculative"].values())
    assert all(view["per_gpu"] > 0 for view in one["speculative"].values())


@pytest.mark.parametrize(
    ("size", "said"),
    [
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (434_182 * 2**40, "424.0 PiB"),
        (5 * 2**60, "5.0 EiB"),
        (2**75, "32,768.0 EiB"),
    ],
)
def test_a_large_figure_takes_the_unit_that_keeps_it_short(size: int, said: str) -> None:
    assert short(size) == said
    assert human(size) == (f"{size:,} B" if size < 1024 else f"{size:,} B ({said})")


def test_a_concurrency_past_a_million_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    arguments = [
        "size", "--config", "qwen3.5-27b", "--num-drafts", "3", "--engine", "vllm",
        "--kv-cache-memory-bytes", "100000T", "--max-model-len", "1",
    ]  # fmt: skip
    assert main(arguments) == 0
    line = next(
        line for line in rejoined(capsys.readouterr().out).splitlines() if "as it runs" in line
    )
    assert "Maximum concurrency for 1 tokens per request: 99,888,163.84x" in line
    assert "x (over a million requests)  (" in line


def test_a_huge_batch_keeps_its_label_apart_from_its_figure(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert (
        main(["size", "--config", "qwen3.5-27b", "--num-drafts", "3", "--batch", "9999999999"]) == 0
    )
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("batch"))
    assert line.startswith("batch of 9999999999 requests  47,738,879,995,226,112 B (42.4 PiB)")


def test_why_says_why_a_ring_needs_more_of_sglang_than_its_snapshots(
    capsys: pytest.CaptureFixture[str],
) -> None:
    arguments = ["size", "--config", "qwen3.5-27b", "--num-drafts", "3", "--batch", "64",
                 "--context", "32K", "--engine", "sglang"]  # fmt: skip
    assert main(arguments) == 0
    plain = capsys.readouterr().out
    assert main([*arguments, "--why"]) == 0
    lines = rejoined(capsys.readouterr().out).splitlines()
    why = [line for line in lines if line.startswith("  why more ")]
    assert [line[2:].split(" ring ")[0] + " ring" for line in why] == [
        "why more with the seed's replay ring",
        "why more with ReplaySSM's ring",
    ]
    assert "the KV pool gets less of the same memory: holding 2,097,152 tokens" in why[0]
    assert "why more" not in plain
    assert main([*arguments, "--json", "-"]) == 0
    designs = json.loads(capsys.readouterr().out)["needs"][0]["designs"]
    assert designs[0]["why"] is None
    assert all(design["why"] for design in designs[1:])
