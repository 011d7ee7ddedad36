# SPDX-License-Identifier: MIT OR Apache-2.0
"""SGLang's startup figures for the sglang views, pinned as exact integers.

Each pinned figure is what SGLang 0.5.23's own sizing computes for the
example config and memory (``tests/planners/`` runs that code and compares
every figure), so the everyday suite needs no engine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

import pytest

from ssm_rollback_spec.sizing import capacity
from ssm_rollback_spec.sizing.engines.sglang import facts as sglang
from ssm_rollback_spec.sizing.memory import FitFlagsError, FitKind, fit_kind
from ssm_rollback_spec.sizing.presentation import rejoined
from ssm_rollback_spec.sizing.review import model_from_config
from ssm_rollback_spec.sizing.views import Model, Setup
from tests.child import run_module

EXAMPLES: Final = Path(__file__).resolve().parents[2] / "examples"
QWEN3_NEXT: Final = "qwen3-next-80b-a3b-instruct"
GPU: Final = 150_000_000_000


def _model(name: str, tp: int) -> Model:
    config = json.loads((EXAMPLES / f"{name}.config.json").read_text(encoding="utf-8"))
    return model_from_config(config, tp)


# (config, tp, drafts, weights, mem_fraction_static, radix cache, design):
# max_total_num_tokens, max_running_requests, max_mamba_cache_size as SGLang's
# own KVCacheConfigurator gives them for 150,000,000,000 B before loading.
PINNED: Final = [
    ((QWEN3_NEXT, 1, 3, 80e9, 0.85, True, 0), (1_030_451, 31, 158)),
    ((QWEN3_NEXT, 2, 3, 80e9, 0.85, True, 0), (2_240_111, 48, 320)),
    ((QWEN3_NEXT, 1, 3, 80e9, 0.85, True, 2), (1_017_800, 48, 281)),
    ((QWEN3_NEXT, 1, 3, 80e9, 0.85, False, 0), (1_162_499, 48, 48)),
    ((QWEN3_NEXT, 1, 0, 80e9, 0.85, True, 0), (1_017_875, 58, 290)),
    (("qwen3.5-27b", 1, 3, 60e9, 0.85, True, 0), (546_823, 22, 112)),
    (("qwen3.5-35b-a3b", 2, 7, 40e9, 0.8, True, 0), (5_158_156, 48, 448)),
]


@pytest.mark.parametrize(("case", "figures"), PINNED)
def test_the_startup_figures_are_sglangs(
    case: tuple[str, int, int, float, float, bool, int], figures: tuple[int, int, int]
) -> None:
    name, tp, drafts, weights, fraction, radix, design = case
    memory = sglang.SglangMemory(
        gpu_memory_bytes=GPU,
        weights_bytes=int(weights),
        mem_fraction_static=fraction,
        context_length=32_768,
    )
    setup = Setup(options={sglang.NAME: sglang.SglangSetup(radix_cache=radix)})
    fit = capacity.sglang_fit(_model(name, tp), setup, memory, num_drafts=drafts)[design]
    assert fit.startup is not None
    up = fit.startup
    assert (up.max_total_num_tokens, up.max_running_requests, up.max_mamba_cache_size) == figures


def test_the_documented_figures_of_qwen3_next() -> None:
    # docs/sizing.md's worked figures: 140,000,000,000 B free before loading,
    # 80,000,000,000 B of weights, 0.85, 32,768 tokens, three drafts, TP 1.
    memory = sglang.SglangMemory(140_000_000_000, 80_000_000_000, 0.85, 32_768)
    fits = capacity.sglang_fit(_model(QWEN3_NEXT, 1), Setup(), memory, num_drafts=3)
    snapshot, _, replay = (fit.startup for fit in fits)
    assert snapshot is not None
    assert replay is not None
    # The rest, 39,000,000,000 B, less 131 states and 4 states for 27 slots.
    assert snapshot.speculative_bytes == 4 * 77_266_944 * 27 == 8_344_829_952
    assert snapshot.kv_pool_bytes == 39_000_000_000 - 131 * 77_266_944 - 8_344_829_952
    figures = (snapshot.max_total_num_tokens, snapshot.max_running_requests)
    assert (*figures, snapshot.max_mamba_cache_size) == (835_498, 26, 130)
    figures = (replay.max_total_num_tokens, replay.max_running_requests)
    assert (*figures, replay.max_mamba_cache_size) == (835_423, 45, 229)
    # The ReplaySSM ring for 48 + 1 slots instead of the intermediate states.
    assert replay.speculative_bytes == 49 * 16 * 36 * 24_704


@pytest.mark.parametrize(
    ("name", "weights", "figures"),
    [
        ("qwen3.5-27b", 56e9, (515_742, 20, 104, 153_944_064)),
        ("qwen3.5-35b-a3b", 70e9, (1_261_906, 39, 197, 64_389_120)),
    ],
)
def test_the_documented_figures_of_qwen3_5(
    name: str, weights: float, figures: tuple[int, int, int, int]
) -> None:
    memory = sglang.SglangMemory(140_000_000_000, int(weights), 0.85, 32_768)
    up = capacity.sglang_fit(_model(name, 1), Setup(), memory, num_drafts=3)[0].startup
    assert up is not None
    counts = (up.max_total_num_tokens, up.max_running_requests, up.max_mamba_cache_size)
    assert (*counts, up.mamba_bytes_per_state) == figures


def test_the_mamba_state_and_kv_token_of_qwen3_next() -> None:
    # 36 layers x (524,288 x 4 + 3 x 8,192 x 2) B; 12 layers x 2 heads x 512 x 2 B.
    memory = sglang.SglangMemory(GPU, 80_000_000_000, 0.85, 32_768)
    snapshot, seed, replay = capacity.sglang_fit(
        _model(QWEN3_NEXT, 1), Setup(), memory, num_drafts=3
    )
    assert snapshot.mamba_bytes_per_state == 36 * (524_288 * 4 + 3 * 8_192 * 2) == 77_266_944
    assert snapshot.kv_bytes_per_token == 12 * 2 * 512 * 2 == 24_576
    assert (seed.ring_bytes_per_request, replay.ring_bytes_per_request) == (
        3 * 36 * 24_832,
        16 * 36 * 24_704,
    )


def test_weights_that_leave_nothing_refuse_to_start() -> None:
    memory = sglang.SglangMemory(GPU, 140_000_000_000, 0.85, 32_768)
    fits = capacity.sglang_fit(_model(QWEN3_NEXT, 1), Setup(), memory, num_drafts=3)
    # SGLang sizes the mamba pool before it checks the rest, so that is what fails.
    message = "Not enough GPU memory for hybrid (mamba/linear-attention) state cache"
    assert [fit.refused for fit in fits] == [
        f"{message} (max_mamba_cache_size=-46)",
        f"{message} (max_mamba_cache_size=-80)",
        f"{message} (max_mamba_cache_size=-87)",
    ]


def test_the_vllm_kv_memory_under_utilization() -> None:
    # ceil(total x utilization) less the weights and the profiled peak.
    budget = capacity.vllm_kv_cache_bytes(
        gpu_memory_bytes=143_771_566_080,
        utilization=0.9,
        weights_bytes=80 * 2**30,
        activation_bytes=5 * 2**30,
    )
    assert budget == 129_394_409_472 - 85 * 2**30


@pytest.mark.parametrize(
    ("given", "view", "message"),
    [
        ({"mem_fraction_static": 0.9}, "sglang", ("--mem-fraction-static needs"
         " --gpu-memory-bytes and --weights-bytes and --context-length")),
        ({"max_running_requests": 3}, "sglang", ("--max-running-requests needs"
         " --mem-fraction-static")),
        ({"max_model_len": 8}, "vllm", ("--max-model-len needs --kv-cache-memory-bytes or"
         " --gpu-memory-utilization")),
        ({"kv_cache_memory_bytes": 1, "gpu_memory_utilization": 0.9}, "vllm",
         "give --kv-cache-memory-bytes or --gpu-memory-utilization, not both"),
        ({"kv_cache_memory_bytes": 1, "max_model_len": 8, "context_length": 8}, "vllm",
         "--context-length is not used with --kv-cache-memory-bytes"),
        ({"mem_fraction_static": 0.9, "gpu_memory_bytes": 1, "weights_bytes": 1,
          "context_length": 8}, "vllm",
         ("--mem-fraction-static sizes the sglang or sglang-replayssm view: give --engine"
         " sglang or sglang-replayssm")),
    ],
)  # fmt: skip
def test_memory_flags_that_make_no_fit_are_refused(
    given: dict[str, object], view: str, message: str
) -> None:
    with pytest.raises(FitFlagsError) as raised:
        fit_kind(given, view=view)
    assert str(raised.value) == message


def test_no_memory_flag_asks_for_no_fit() -> None:
    assert fit_kind({}, view="module") is FitKind.NONE


def test_the_command_prints_sglangs_startup_line() -> None:
    finished = run_module(
        "ssm_rollback_spec.tools.cli", "size", "--config", QWEN3_NEXT,
        "--num-drafts", "3", "--mtp-slots", "1", "--engine", "sglang",
        "--mem-fraction-static", "0.85", "--gpu-memory-bytes", str(GPU),
        "--weights-bytes", "80000000000", "--context-length", "32768",
        timeout=120,
    )  # fmt: skip
    assert finished.returncode == 0, finished.stderr
    assert (
        "What SGLang 0.5.23 sizes at startup with --mem-fraction-static 0.85,"
        " --gpu-memory-bytes 150,000,000,000 and --weights-bytes 80,000,000,000 per GPU, at"
        " --context-length 32,768 (the replay lines are estimates)"
    ) in rejoined(finished.stdout).splitlines()
    assert (
        "  SGLang 0.5.23 as it runs                max_total_num_tokens=1030451,"
        " max_running_requests=31, max_mamba_cache_size=158  (KV pool 25,324,387,072 B"
        " (23.6 GiB) at 24,576 B (24.0 KiB) per token; mamba state 77,266,944 B (73.7 MiB)"
        " per slot; 31 requests of 32,768 tokens fit)"
    ) in rejoined(finished.stdout).splitlines()


def test_a_utilization_that_leaves_nothing_is_one_line() -> None:
    finished = run_module(
        "ssm_rollback_spec.tools.cli", "size", "--config", QWEN3_NEXT,
        "--num-drafts", "3", "--mtp-slots", "1", "--engine", "vllm",
        "--gpu-memory-utilization", "0.5", "--gpu-memory-bytes", "80GiB",
        "--weights-bytes", "40GiB", "--activation-bytes", "1GiB", "--max-model-len", "32768",
        timeout=120,
    )  # fmt: skip
    assert finished.returncode == 2
    assert finished.stderr == (
        "ssm-rollback-spec: error: --gpu-memory-utilization 0.5 leaves no KV-cache memory\n"
    )
