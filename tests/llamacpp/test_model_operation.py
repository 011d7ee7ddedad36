# SPDX-License-Identifier: MIT OR Apache-2.0
"""The wheel's RB-REPLAY-14 through ``check --impl-cmd`` against llama.cpp.

The adapter is adapters/llama-cpp/model_adapter.py.

The checkpoint way passes on both architectures. The snapshot way fails on
the released llama.cpp for the two findings of test_rollback.py (its shrunk
case under the ``ci`` profile is the whole-window one); they are held as a
deviation with their links, so this test turns red the day llama.cpp fixes them.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from tests.llamacpp import operation
from tests.llamacpp.test_rollback import DEVIATION_LINK, WHOLE_WINDOW_LINK

if TYPE_CHECKING:
    from pathlib import Path

    from tests.llamacpp.engine import Built

pytestmark = pytest.mark.llamacpp


def test_describe_offers_both_ways_on_qwen35_and_checkpoints_alone_on_qwen3_next(
    llamacpp: Built,
) -> None:
    offered = {}
    for model in (llamacpp["model"], llamacpp["qwen3next_model"]):
        member = operation.describe(llamacpp["adapter"], model)
        offered[model] = (member["rollback"], member.get("snapshot_depth"))
    assert offered == {
        llamacpp["model"]: (["snapshot", "checkpoint"], 4),
        llamacpp["qwen3next_model"]: (["checkpoint"], None),
    }


@pytest.mark.parametrize("which", ["model", "qwen3next_model"])
def test_check_passes_llama_cpp_checkpoint_rollback(llamacpp: Built, which: str) -> None:
    model = llamacpp["model"] if which == "model" else llamacpp["qwen3next_model"]
    result = operation.check(operation.impl_cmd(llamacpp["adapter"], model, "checkpoint"))
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "PASS  RB-REPLAY-14" in result.stdout


def test_check_holds_llama_cpp_snapshot_rollback_as_a_linked_deviation(
    llamacpp: Built, tmp_path: Path
) -> None:
    deviations = tmp_path / "deviations.json"
    reason = f"llama.cpp's snapshot rollback: {DEVIATION_LINK} and {WHOLE_WINDOW_LINK}"
    deviations.write_text(
        json.dumps(
            {
                "deviations": [
                    {"clause": "RB-REPLAY-14", "reason": reason, "link": WHOLE_WINDOW_LINK}
                ]
            }
        )
    )
    impl = operation.impl_cmd(llamacpp["adapter"], llamacpp["model"], "snapshot")
    result = operation.check(impl, "--deviations", str(deviations))
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "DEVIATION  RB-REPLAY-14" in result.stdout
