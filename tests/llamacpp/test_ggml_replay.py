# SPDX-License-Identifier: MIT OR Apache-2.0
"""ggml's GDN ops judged by the replay corpus: the ggml-f32 pipeline's cases, and the control.

adapters/llama-cpp/ggml_adapter.py answers ``replay`` with ggml's own CPU ops
at the release's commit (ggml_replay.cpp), rolling back to the snapshot of
the last accepted token as llama.cpp does. The model's ``ggml-f32`` pipeline
(spec/replay/layer.py) was measured against it: every value of every case is
the model's, bit for bit, so the tier asserts that and not only the bound.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from typing import TYPE_CHECKING, Any, Final

import pytest

from ssm_rollback_spec import corpus
from tests.child import ROOT, run_module

if TYPE_CHECKING:
    from pathlib import Path

    from tests.llamacpp.engine import Built

pytestmark = pytest.mark.llamacpp

ADAPTER: Final = ROOT / "adapters" / "llama-cpp" / "ggml_adapter.py"
PIPELINE: Final = "ggml-f32"
_EXACT: Final = "exact: every value the model's"


def _vectors_run(tmp_path: Path, /, *flags: str) -> tuple[int, dict[str, Any]]:
    report = tmp_path / "report.json"
    command = shlex.join([sys.executable, str(ADAPTER), *flags])
    finished = run_module(
        "ssm_rollback_spec.tools.cli",
        "vectors",
        "run",
        "--impl-cmd",
        command,
        "--clause",
        "RB-REPLAY",
        "--json",
        str(report),
        timeout=600,
    )
    assert "Traceback" not in finished.stdout + finished.stderr, finished.stderr
    assert report.exists(), finished.stderr
    return finished.returncode, json.loads(report.read_text(encoding="utf-8"))


def _mine() -> set[str]:
    cases = corpus.load_replay_cases(ROOT / "vectors" / "replay")
    return {case.case_id for case in cases if case.pipeline == PIPELINE}


def test_ggml_gives_every_value_of_its_pipelines_replay_cases(
    llamacpp: Built, tmp_path: Path
) -> None:
    status, report = _vectors_run(tmp_path)
    mine = _mine()
    outcomes = {case["id"]: case for case in report["cases"]}
    assert mine, f"the replay corpus has no case of {PIPELINE}"
    assert status == 0, report["cases"]
    # Single windows of 2 and 4 tokens and a decode of 16 rounds.
    assert {case_id.split("-")[1] for case_id in mine} == {"rebuild", "rounds"}
    for case_id in mine:
        assert outcomes[case_id]["outcome"] == "passed"
        assert outcomes[case_id]["detail"] == _EXACT, outcomes[case_id]
    others = {case["outcome"] for case_id, case in outcomes.items() if case_id not in mine}
    assert others == {"skipped"}
    assert report["describe"]["release"] == (
        f"llama-cpp-python=={llamacpp['version']} (llama.cpp {llamacpp['commit']})"
    )


@pytest.mark.usefixtures("llamacpp")
def test_the_ggml_adapters_off_by_one_control_fails(tmp_path: Path) -> None:
    status, report = _vectors_run(tmp_path, "--control", "off-by-one")
    mine = _mine()
    failed = {case["id"] for case in report["cases"] if case["outcome"] == "failed"}
    assert status == 1
    # Every case of a partial accept with room for one more token fails; a
    # ring of one row (K = 2) has no other count to take.
    assert failed == {case_id for case_id in mine if not case_id.endswith("-k2-a1")}


@pytest.mark.parametrize(
    ("program", "prog"),
    [
        ("build.py", "adapters/llama-cpp/build.py"),
        ("ggml_adapter.py", "python adapters/llama-cpp/ggml_adapter.py"),
    ],
)
def test_a_version_that_is_not_a_release_number_is_refused_in_one_line(
    program: str, prog: str
) -> None:
    # The value names a folder of the cache, so nothing but X.Y.Z is taken.
    finished = subprocess.run(
        [sys.executable, str(ROOT / "adapters" / "llama-cpp" / program), "--version", "../x"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert finished.returncode == 2
    assert finished.stderr.splitlines()[-1] == (
        f"{prog}: error: --version '../x' is not a release number such as 0.3.36"
    )
