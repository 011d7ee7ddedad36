# SPDX-License-Identifier: MIT OR Apache-2.0
"""vLLM 0.33.0 fails to start LFM2 with 7 or more ngram drafts: #57721's mismatch, live for LFM2.

docs/findings/vllm-lfm2-spec-conv-padding.md. ``Lfm2ForCausalLM``'s
``get_mamba_state_shape_from_config`` (0.33.0 lfm2.py:556-577) leaves out
``num_spec``, so the platform pads the Mamba page (platforms/interface.py:
1044-1137) to one attention block's page without the conv columns speculation
adds, while each ``ShortConv`` layer's spec has them (short_conv.py:85,
351-357). An LFM2-1.2B config's conv page is 2,048 channels x (2 + K) columns
x 2 bytes, the attention block's 16 tokens x 2,048 bytes = 32,768: the padding
holds up to K = 6, and ``MambaSpec.page_size_bytes`` asserts from K = 7
(kv_cache_interface.py:1121-1129). Held as a deviation: the test fails the day
a release pads LFM2's page with the columns. The planners tier runs vLLM's own
chain (tests/planners/vllm_planner.py) and the finding's reproducer.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
from typing import TYPE_CHECKING, Any, Final

import pytest

from tests.child import ROOT
from tests.planners.run import _python, run_planner
from tests.planners.test_vllm_planner import PLANNER

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.planners

GIB: Final = 2**30
REPRODUCER: Final = ROOT / "docs" / "findings" / "vllm_lfm2_spec_conv_padding.py"
#: The smallest count of ngram drafts 0.33.0 does not start LFM2-1.2B with.
FIRST_FAILING: Final = 7
#: One conv column of LFM2-1.2B: 2,048 channels of two bytes.
_COLUMN_BYTES: Final = 2048 * 2
#: One attention block on the GPU platform: 16 tokens x (K and V) x 8 heads x 64 x 2 bytes.
_BLOCK_PAGE_BYTES: Final = 16 * 2 * 8 * 64 * 2


def _lfm2_config(directory: Path) -> Path:
    # The reproducer's config (a script, not a package module), as it writes it.
    spec = importlib.util.spec_from_file_location("lfm2_reproducer", REPRODUCER)
    assert spec is not None
    assert spec.loader is not None
    reproducer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reproducer)
    path = directory / "lfm2.config.json"
    path.write_text(json.dumps(reproducer.CONFIG), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def lfm2(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, Any]]:
    directory = tmp_path_factory.mktemp("lfm2")
    base = {
        "config": str(_lfm2_config(directory)), "tp": 1, "method": "ngram",
        "kv_cache_memory_bytes": 10 * GIB, "max_model_len": 4096, "catch_assert": True,
    }  # fmt: skip
    counts = (FIRST_FAILING - 1, FIRST_FAILING)
    cases = [{**base, "drafts": drafts} for drafts in counts]
    return dict(zip(counts, run_planner(PLANNER, cases, directory, timeout=1800), strict=True))


def test_vllm_0_33_starts_lfm2_with_six_ngram_drafts_the_padding_just_holding_the_page(
    lfm2: dict[int, dict[str, Any]],
) -> None:
    started = lfm2[FIRST_FAILING - 1]
    assert started["startup_assert"] is None
    assert started["refusal"] is None
    assert (started["gdn_layers"], started["attention_layers"]) == (10, 6)
    assert started["block_size"] == 16
    # 2 + 6 columns: exactly the padding, planned from 2 columns to one attention block.
    assert started["page_bytes"] == (2 + 6) * _COLUMN_BYTES == _BLOCK_PAGE_BYTES
    assert started["padded_page_bytes"] == _BLOCK_PAGE_BYTES


def test_vllm_0_33_fails_to_start_lfm2_with_seven_ngram_drafts_at_the_page_assert(
    lfm2: dict[int, dict[str, Any]],
) -> None:
    failed = lfm2[FIRST_FAILING]["startup_assert"]
    assert failed is not None, "0.33.0 started LFM2 with 7 drafts: the finding is fixed"
    assert (failed["file"], failed["function"]) == (
        "vllm/v1/kv_cache_interface.py",
        "page_size_bytes",
    )
    assert failed["text"] == "assert self.page_size_padded >= page_size"
    assert failed["page_size"] == (2 + FIRST_FAILING) * _COLUMN_BYTES == 36_864
    assert failed["page_size_padded"] == _BLOCK_PAGE_BYTES


def test_the_findings_reproducer_fails_from_seven_drafts_on_0_33_0(tmp_path: Path) -> None:
    # As the page shows it: `python docs/findings/vllm_lfm2_spec_conv_padding.py`,
    # with the planners venv's Python (vLLM 0.33.0), from a folder outside the clone.
    finished = subprocess.run(
        [_python(), str(REPRODUCER)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert finished.returncode == 1, finished.stderr[-4000:]
    lines = [line for line in finished.stdout.splitlines() if " drafts: " in line]
    assert len(lines) == 10
    assert all(line.startswith(f"{k} drafts: starts") for k, line in enumerate(lines[:6], 1))
    assert all(line.startswith(f"{k} drafts: fails") for k, line in enumerate(lines[6:], 7))
    assert "block 16, padding 32768, layer page 36864" in lines[FIRST_FAILING - 1]
