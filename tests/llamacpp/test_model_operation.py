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
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pytest

from tests.child import ROOT
from tests.llamacpp.test_rollback import DEVIATION_LINK, WHOLE_WINDOW_LINK

if TYPE_CHECKING:
    from tests.llamacpp.engine import Built

pytestmark = pytest.mark.llamacpp

_ADAPTER: Final = ROOT / "adapters" / "llama-cpp" / "model_adapter.py"
_CHECK_SECONDS: Final = 900


def _impl_cmd(built: Built, model: str, ways: str, /) -> str:
    return shlex.join([sys.executable, str(_ADAPTER), built["adapter"], model, ways])


def _check(impl_cmd: str, *extra: str) -> subprocess.CompletedProcess[str]:
    command = shutil.which("ssm-rollback-spec")
    assert command is not None, "ssm-rollback-spec is not installed"
    return subprocess.run(
        [command, "check", "--impl-cmd", impl_cmd, "--clause", "RB-REPLAY-14", *extra],
        capture_output=True,
        text=True,
        timeout=_CHECK_SECONDS,
        check=False,
        env={"CI": "1", "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"},
    )


def test_describe_offers_both_ways_on_qwen35_and_checkpoints_alone_on_qwen3_next(
    llamacpp: Built,
) -> None:
    offered = {}
    for model in (llamacpp["model"], llamacpp["qwen3next_model"]):
        impl = [sys.executable, str(_ADAPTER), llamacpp["adapter"], model]
        out = subprocess.run(
            impl,
            input='{"op":"describe"}\n',
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        member = json.loads(out)["ok"]["model"]
        offered[model] = (member["rollback"], member.get("snapshot_depth"))
    assert offered == {
        llamacpp["model"]: (["snapshot", "checkpoint"], 4),
        llamacpp["qwen3next_model"]: (["checkpoint"], None),
    }


@pytest.mark.parametrize("which", ["model", "qwen3next_model"])
def test_check_passes_llama_cpp_checkpoint_rollback(llamacpp: Built, which: str) -> None:
    model = llamacpp["model"] if which == "model" else llamacpp["qwen3next_model"]
    result = _check(_impl_cmd(llamacpp, model, "checkpoint"))
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
    result = _check(
        _impl_cmd(llamacpp, llamacpp["model"], "snapshot"), "--deviations", str(deviations)
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "DEVIATION  RB-REPLAY-14" in result.stdout
