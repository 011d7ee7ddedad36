# SPDX-License-Identifier: MIT OR Apache-2.0
"""The vllm view's grouping, pool block and startup figures, pinned as exact integers.

Each pinned figure is what vLLM 0.33.0's own planner computes for the example
config (``tests/planners/`` runs that planner and compares every figure), so the
everyday suite needs no engine. Cited lines are in the released wheel.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Final

import pytest

from ssm_rollback_spec.sizing import capacity
from ssm_rollback_spec.sizing import dimensions as dims
from ssm_rollback_spec.sizing.engines.vllm import facts as vllm
from ssm_rollback_spec.sizing.presentation import rejoined
from ssm_rollback_spec.sizing.review import model_from_config
from ssm_rollback_spec.sizing.views import Model, Setup, View, size_view, vllm_plan
from ssm_rollback_spec.tools.size import add_arguments as add_size_arguments
from tests.child import run_module

EXAMPLES: Final = Path(__file__).resolve().parents[2] / "examples"
QWEN3_NEXT: Final = EXAMPLES / "qwen3-next-80b-a3b-instruct.config.json"
QWEN3_5_27B: Final = EXAMPLES / "qwen3.5-27b.config.json"
GIB: Final = 2**30


def _model(path: Path = QWEN3_NEXT, *, tp: int = 1) -> Model:
    return model_from_config(json.loads(path.read_text(encoding="utf-8")), tp)


def _setup(**options: object) -> Setup:
    return Setup(options={vllm.NAME: vllm.VllmSetup(**options)})  # type: ignore[arg-type]


def test_the_mtp_drafter_adds_an_attention_layer_and_sets_the_group_size() -> None:
    # 36 GDN and 12 + 1 (the drafter's) attention layers: groups of 13, the smaller
    # count (kv_cache_planning.py:521-555); the GDN layers split 12, 12, 12.
    plan = vllm_plan(_model(), Setup(), 3)
    assert (plan.gdn_layers, plan.attention_layers, plan.group_size) == (36, 13, 13)
    assert (plan.gdn_groups, plan.attention_groups) == (3, 1)


def test_without_a_drafter_layer_the_group_is_the_attention_count() -> None:
    plan = vllm_plan(_model(), _setup(method=vllm.SpeculativeMethod.NGRAM), 3)
    assert (plan.attention_layers, plan.group_size, plan.gdn_groups) == (12, 12, 3)
    assert plan.block_bytes == 12 * 1_179_648


def test_a_block_of_the_pool_is_the_widest_groups_pages() -> None:
    # 13 pages of 1,179,648 B: the attention group's; the null block is one such block.
    plan = vllm_plan(_model(), Setup(), 3)
    assert plan.layout.page_bytes == 524_288 * 2 + (3 + 3) * 8_192 * 2 == 1_146_880
    assert (plan.layout.block_size, plan.layout.padded_page_bytes) == (576, 1_179_648)
    assert plan.block_bytes == plan.null_block_bytes == 13 * 1_179_648 == 15_335_424


def test_resident_and_admission_blocks_differ_by_the_checkpoint_block() -> None:
    # kv_cache_interface.py:1135-1152: 2 + s resident, 2 + s + 1 counted at admission.
    plan = vllm_plan(_model(), Setup(), 3)
    assert (plan.resident_blocks, plan.admission_blocks) == (5, 6)
    assert plan.resident_bytes_per_request == 3 * 5 * 15_335_424 == 230_031_360
    assert plan.admission_bytes_per_request == 3 * 6 * 15_335_424 == 276_037_632


@pytest.mark.parametrize(
    ("options", "blocks"),
    [
        ({"prefix_caching": False}, (4, 4)),
        ({"gpu": vllm.Gpu.SM80}, (5, 5)),
    ],
    ids=["no-prefix-caching", "sm80"],
)
def test_other_setups_hold_other_block_counts(
    options: dict[str, object], blocks: tuple[int, int]
) -> None:
    plan = vllm_plan(_model(), _setup(**options), 3)
    assert (plan.resident_blocks, plan.admission_blocks) == blocks


def test_the_view_holds_resident_blocks_and_one_null_block() -> None:
    sized = size_view(View.VLLM, _model(), num_drafts=3, requests=2)
    # With no drafts: groups of 12 (no drafter), 2 blocks each of 12 pages.
    assert sized.base_bytes_per_request == 3 * 2 * 12 * 1_179_648 == 84_934_656
    assert sized.speculative_bytes_per_request == 230_031_360 - 84_934_656
    assert sized.base_padding_bytes == 15_335_424
    assert sized.total_bytes == 2 * 230_031_360 + 15_335_424


def test_a_config_without_attention_fields_gets_the_class_defaults() -> None:
    # transformers' Qwen3NextConfig: 2 KV heads of 256, as both engines load it.
    config = json.loads(QWEN3_NEXT.read_text(encoding="utf-8"))
    for field in ("num_key_value_heads", "head_dim", "num_attention_heads"):
        del config[field]
    assert dims.attention_from_config(config) == dims.AttentionDimensions(2, 256)


def test_the_reference_startup_figures_on_qwen3_next() -> None:
    # vLLM's own planner logs "GPU KV cache size: 1,223,338 tokens, Maximum
    # concurrency for 32,768 tokens per request: 37.33x" with 2,800 blocks.
    fit = vllm.vllm_capacity(
        vllm_plan(_model(), Setup(), 3), kv_cache_bytes=40 * GIB, max_model_len=32_768
    )
    assert (fit.num_blocks, fit.blocks_per_request, fit.tokens) == (2_800, 75, 1_223_338)
    assert f"{fit.concurrency:.2f}" == "37.33"
    assert fit.fits


def test_the_startup_figures_on_qwen3_5_27b() -> None:
    # fp32 h (the Qwen3.5 hook), 4 KV heads: blocks of 832 tokens, groups of 17.
    plan = vllm_plan(_model(QWEN3_5_27B), Setup(), 3)
    assert (plan.layout.padded_page_bytes, plan.block_bytes) == (3_407_872, 57_933_824)
    fit = vllm.vllm_capacity(plan, kv_cache_bytes=40 * GIB, max_model_len=32_768)
    assert (fit.num_blocks, fit.blocks_per_request, fit.tokens) == (741, 58, 418_639)


def test_a_budget_too_small_for_one_request_is_said_so() -> None:
    fit = vllm.vllm_capacity(
        vllm_plan(_model(), Setup(), 3), kv_cache_bytes=GIB, max_model_len=32_768
    )
    assert not fit.fits


def test_each_replay_ring_frees_the_speculative_blocks() -> None:
    fits = capacity.vllm_fit(
        _model(), Setup(), num_drafts=3, kv_cache_bytes=40 * GIB, max_model_len=32_768
    )
    assert [fit.design for fit in fits] == list(capacity.Design)
    snapshot, seed, replay = fits
    # 57 attention blocks and 3 groups x 3 blocks (no per-draft blocks).
    assert (seed.capacity.blocks_per_request, replay.capacity.blocks_per_request) == (66, 66)
    # The seed's ring: 3 rows x 36 layers x 24,832 B; ReplaySSM: 16 records x 36 x 24,704 B.
    assert seed.ring_bytes_per_request == 3 * 36 * 24_832
    assert replay.ring_bytes_per_request == 16 * 36 * 24_704
    assert seed.concurrency == 40 * GIB / (66 * 15_335_424 + 3 * 36 * 24_832)
    assert snapshot.concurrency < replay.concurrency < seed.concurrency


def test_the_command_prints_vllms_startup_line() -> None:
    finished = run_module(
        "ssm_rollback_spec.tools.cli", "size", "--config", str(QWEN3_NEXT),
        "--num-drafts", "3", "--mtp-slots", "1", "--engine", "vllm",
        "--kv-cache-memory-bytes", "40GiB", "--max-model-len", "32768",
        timeout=120,
    )  # fmt: skip
    assert finished.returncode == 0, finished.stderr
    assert (
        "GPU KV cache size: 1,223,338 tokens, Maximum concurrency for 32,768 tokens per"
        " request: 37.33x  (2,800 blocks of 15,335,424 B (14.6 MiB), 75 per request)"
    ) in rejoined(finished.stdout)


#: ``size`` under vLLM's --gpu-memory-utilization: ceil(0.9 x the H200's bytes) less 85 GiB.
UTILIZATION: Final = (
    "size", "--config", str(QWEN3_NEXT), "--num-drafts", "3", "--mtp-slots", "1",
    "--engine", "vllm", "--gpu-memory-utilization", "0.9", "--gpu-memory-bytes",
    "143771566080", "--weights-bytes", "80GiB", "--activation-bytes", "5GiB",
    "--max-model-len", "32768",
)  # fmt: skip
UTILIZATION_HEADING: Final = (
    "How many requests fit in the KV memory left by --gpu-memory-utilization 0.9 of"
    " --gpu-memory-bytes 143,771,566,080 less --weights-bytes 85,899,345,920 and"
    " --activation-bytes 5,368,709,120 (38,126,354,432 B per GPU) at --max-model-len 32,768"
    " (vLLM 0.33.0; the replay lines are estimates)"
)


@pytest.mark.parametrize(("output", "line"), [
    ("text", UTILIZATION_HEADING),
    ("markdown", f"**{UTILIZATION_HEADING}**"),
])  # fmt: skip
def test_the_utilization_heading_names_the_flags_given(output: str, line: str) -> None:
    finished = run_module(
        "ssm_rollback_spec.tools.cli", *UTILIZATION, "--format", output, timeout=120
    )
    assert finished.returncode == 0, finished.stderr
    shown = finished.stdout if output == "markdown" else rejoined(finished.stdout)
    assert line in shown.splitlines()
    assert "--kv-cache-memory-bytes" not in finished.stdout


def test_the_utilization_report_names_the_flags_given() -> None:
    finished = run_module("ssm_rollback_spec.tools.cli", *UTILIZATION, "--json", "-", timeout=120)
    assert finished.returncode == 0, finished.stderr
    fit = json.loads(finished.stdout)["fit"]
    assert {key: value for key, value in fit.items() if key != "designs"} == {
        "engine": "vLLM 0.33.0",
        "kv_cache_memory_bytes": 38_126_354_432,
        "max_model_len": 32_768,
        "gpu_memory_utilization": 0.9,
        "gpu_memory_bytes": 143_771_566_080,
        "weights_bytes": 80 * GIB,
        "activation_bytes": 5 * GIB,
    }


def test_the_kv_memory_report_leaves_the_utilization_flags_null() -> None:
    finished = run_module(
        "ssm_rollback_spec.tools.cli", "size", "--config", str(QWEN3_NEXT),
        "--num-drafts", "3", "--mtp-slots", "1", "--engine", "vllm",
        "--kv-cache-memory-bytes", "40GiB", "--max-model-len", "32768", "--json", "-",
        timeout=120,
    )  # fmt: skip
    assert finished.returncode == 0, finished.stderr
    fit = json.loads(finished.stdout)["fit"]
    assert fit["kv_cache_memory_bytes"] == 40 * GIB
    flags = ("gpu_memory_utilization", "gpu_memory_bytes", "weights_bytes", "activation_bytes")
    assert [fit[flag] for flag in flags] == [None] * 4


def test_the_memory_flag_needs_a_model_length() -> None:
    finished = run_module(
        "ssm_rollback_spec.tools.cli", "size", "--config", str(QWEN3_NEXT),
        "--num-drafts", "3", "--mtp-slots", "1", "--kv-cache-memory-bytes", "40GiB",
        timeout=120,
    )  # fmt: skip
    assert finished.returncode == 2
    assert finished.stderr == (
        "ssm-rollback-spec: error: --kv-cache-memory-bytes needs --max-model-len\n"
    )


def test_the_headline_ratio_does_not_change_with_the_batch() -> None:
    ratios = []
    for extra in ([], ["--batch", "1"], ["--batch", "8"]):
        finished = run_module(
            "ssm_rollback_spec.tools.cli", "size", "--config", str(QWEN3_NEXT),
            "--num-drafts", "3", "--mtp-slots", "1", "--engine", "vllm", "--json", "-", *extra,
            timeout=120,
        )  # fmt: skip
        assert finished.returncode == 0, finished.stderr
        ratios.append(json.loads(finished.stdout)["snapshot_to_replay"])
    # 145,096,704 B of speculative state over one slot's ring, 3 x 36 x 24,832 B.
    assert ratios == [145_096_704 / 2_681_856] * 3


def test_every_size_flag_has_help() -> None:
    size = argparse.ArgumentParser()
    add_size_arguments(size)
    missing = [
        action.option_strings[0]
        for action in size._actions  # noqa: SLF001
        if action.option_strings and not action.help
    ]
    assert missing == []


def test_explicit_dimensions_say_which_dtype_they_assume() -> None:
    finished = run_module(
        "ssm_rollback_spec.tools.cli", "size", "--gdn-layers", "36", "--key-heads", "16",
        "--key-head-dim", "128", "--value-heads", "32", "--value-head-dim", "128",
        "--conv-kernel", "4", "--num-drafts", "3", "--mtp-slots", "1", "--engine", "sglang",
        timeout=120,
    )  # fmt: skip
    assert finished.returncode == 0, finished.stderr
    assert (
        "  dtypes assumed         a bf16 model: explicit dimensions name no dtype"
        " (--state-dtype and --conv-dtype say otherwise)"
    ) in rejoined(finished.stdout)


def test_a_ring_counts_against_the_room_for_one_request() -> None:
    # 66 blocks of 15,335,424 B fit in 67 blocks' memory; the seed's ring on top does not.
    memory = 67 * 15_335_424 + 1
    snapshot, seed, _ = capacity.vllm_fit(
        _model(), Setup(), num_drafts=3, kv_cache_bytes=memory, max_model_len=32_768
    )
    assert not snapshot.fits
    assert seed.capacity.fits
    assert not seed.fits


def test_counts_within_half_of_each_other_take_the_larger_as_the_group() -> None:
    # kv_cache_planning.py:521-533: 12 GDN and 12 + 1 attention layers are within
    # 1.5x, so the group size is 13 and the 12 GDN layers make one group (the
    # planners tier checks this Qwen3-Next of 24 layers against vLLM).
    config = json.loads(QWEN3_NEXT.read_text(encoding="utf-8"))
    config.update({"num_hidden_layers": 24, "full_attention_interval": 2})
    plan = vllm_plan(model_from_config(config, 1), Setup(), 2)
    assert (plan.gdn_layers, plan.attention_layers, plan.group_size) == (12, 13, 13)
    assert (plan.gdn_groups, plan.attention_groups) == (1, 1)
    assert plan.block_bytes == 13 * plan.layout.allocated_page_bytes
