# SPDX-License-Identifier: MIT OR Apache-2.0
"""vLLM #57721's configuration, as vLLM 0.33.0's own planner starts it, and ``size``'s answer.

#57721 (open issue; fix PRs #57761 and #47635, both open): a Mamba-hybrid
model whose ``get_mamba_state_shape_from_config`` leaves out ``num_spec`` has
its Mamba page padded (``cache_config.mamba_page_size_padded``,
vllm/platforms/interface.py:1044-1137) without the ``num_spec`` conv columns
speculation adds, while the layer's own spec has them
(``MambaMixer2.get_state_shape``, mamba_mixer2.py:1134-1144), so
``MambaSpec.page_size_bytes`` asserts at startup
(v1/kv_cache_interface.py:1121-1129). It reproduces with
``ibm-granite/granite-4.0-h-tiny``, ngram, 2 drafts, ``--max-model-len 4096``.
In 0.33.0 the GraniteMoeHybrid classmethod passes ``num_spec``
(model_executor/models/granitemoehybrid.py:617-645), so the padding holds the
widened page and vLLM starts: run here through ``tests/planners/vllm_planner.py``
on a GraniteMoeHybrid config of that model's mixer shape. ``size`` reads Gated
DeltaNet configs only: it refuses that config in one line and gives no startup
answer for it. For the GDN models it reads, whose classmethods pass ``num_spec``
too (qwen3_next.py:893-912, qwen3_5.py:399-418), the same drafting (ngram, 2
drafts, 4,096 tokens) starts in vLLM and ``size`` says so, with vLLM's figures.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

import pytest

from tests.child import run_module
from tests.planners.run import run_planner, size_report
from tests.planners.test_vllm_planner import (
    PLANNER,
    QWEN3_5_27B,
    QWEN3_5_35B_A3B,
    QWEN3_NEXT,
    _assert_same_figures,
)

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.planners

GIB: Final = 2**30
#: #57721's drafting: ngram, 2 drafts, 4,096 tokens per request.
DRAFTING: Final = {"drafts": 2, "method": "ngram", "max_model_len": 4096}
#: A GraniteMoeHybrid config of granite-4.0-h-tiny's mixer shape: 36 Mamba-2 layers and
#: 4 attention layers (12 query heads, 4 KV heads of 128), 48 Mamba heads of 64, a state
#: of 128, one group, a conv kernel of 4, bfloat16.
_GRANITE: Final = {
    "architectures": ["GraniteMoeHybridForCausalLM"],
    "model_type": "granitemoehybrid",
    "torch_dtype": "bfloat16",
    "hidden_size": 1536,
    "num_hidden_layers": 40,
    "num_attention_heads": 12,
    "num_key_value_heads": 4,
    "max_position_embeddings": 131_072,
    "position_embedding_type": "nope",
    "mamba_n_heads": 48,
    "mamba_d_head": 64,
    "mamba_d_state": 128,
    "mamba_n_groups": 1,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
    "layer_types": ["attention" if index % 10 == 5 else "mamba" for index in range(40)],
}
#: The conv channels of that shape: mamba_expand x hidden + 2 x groups x state
#: (mamba_utils.py's mamba2_state_shape), two bytes each.
_CONV_COLUMN_BYTES: Final = (2 * 1536 + 2 * 1 * 128) * 2


def _granite_config(directory: Path) -> Path:
    path = directory / "granitemoehybrid.config.json"
    path.write_text(json.dumps(_GRANITE), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def granite(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    directory = tmp_path_factory.mktemp("granite")
    base = {"config": str(_granite_config(directory)), "tp": 1, "kv_cache_memory_bytes": 10 * GIB}
    drafting, plain = run_planner(
        PLANNER, [{**base, **DRAFTING}, {**base, "drafts": 0, "max_model_len": 4096}], directory,
        timeout=1800,
    )  # fmt: skip
    return {"drafting": drafting, "plain": plain}


def test_vllm_0_33_starts_57721s_configuration_with_the_speculative_columns_padded(
    granite: dict[str, dict[str, Any]],
) -> None:
    drafting, plain = granite["drafting"], granite["plain"]
    # vLLM's chain ran to the end (get_kv_cache_configs reads every page_size_bytes)
    # and its CUDA-graph check passed: it starts.
    assert drafting["refusal"] is None
    assert (drafting["gdn_layers"], drafting["attention_layers"]) == (36, 4)
    # The layer's page holds the 2 speculative conv columns...
    assert drafting["page_bytes"] - plain["page_bytes"] == 2 * _CONV_COLUMN_BYTES
    # ...and the padding, planned from the classmethod with num_spec, holds that page.
    assert drafting["padded_page_bytes"] >= drafting["page_bytes"]
    assert drafting["block_size"] > plain["block_size"]
    # Planned without the columns (what 0.33.0 plans with no drafts), the padding
    # would not hold it: the assert #57721 reports.
    assert plain["padded_page_bytes"] < drafting["page_bytes"]


def test_size_refuses_57721s_config_in_one_line_rather_than_answer_for_it(
    tmp_path: Path,
) -> None:
    arguments = [
        "size", "--config", str(_granite_config(tmp_path)), "--engine", "vllm",
        "--num-drafts", "2", "--speculative-method", "ngram",
        "--kv-cache-memory-bytes", str(10 * GIB), "--max-model-len", "4096",
    ]  # fmt: skip
    finished = run_module("ssm_rollback_spec.tools.cli", *arguments, timeout=120)
    assert finished.returncode == 2
    assert finished.stdout == ""
    (line,) = finished.stderr.strip().splitlines()
    assert "not a Gated DeltaNet config" in line
    assert "'granitemoehybrid'" in line


@pytest.fixture(scope="module")
def gdn(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    directory = tmp_path_factory.mktemp("gdn-57721")
    cases = [
        # Memory enough for vLLM's default max_num_seqs (1,024 on the H200 the planner
        # stands in for) in every example: only the page padding could refuse.
        {"config": str(config), "tp": 1, "kv_cache_memory_bytes": 80 * GIB, **DRAFTING}
        for config in (QWEN3_NEXT, QWEN3_5_27B, QWEN3_5_35B_A3B)
    ]
    return run_planner(PLANNER, cases, directory, timeout=1800)


def _size_start(case: dict[str, Any], /) -> dict[str, Any]:
    arguments = [
        "size", "--config", case["config"], "--tp", "1", "--num-drafts", "2",
        "--engine", "vllm", "--speculative-method", "ngram",
        "--kv-cache-memory-bytes", str(case["kv_cache_memory_bytes"]),
        "--max-model-len", "4096", "--json", "-",
    ]  # fmt: skip
    start: dict[str, Any] = size_report(arguments)["start"]
    return start


def test_size_says_vllm_starts_57721s_drafting_on_gdn_models_as_vllm_does(
    gdn: list[dict[str, Any]],
) -> None:
    assert len(gdn) == 3
    for case in gdn:
        assert case["refusal"] is None, case
        assert case["padded_page_bytes"] >= case["page_bytes"], case
        start = _size_start(case)
        assert start["starts"] is True, (case, start)
        _assert_same_figures(case)
