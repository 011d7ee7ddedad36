# SPDX-License-Identifier: MIT OR Apache-2.0
"""vLLM's own GDN bookkeeping over the corpus's batches (adapters/engines/vllm/batch.py).

The vLLM adapter answers ``replay_batch`` with vLLM 0.33.0's
``GDNAttentionMetadataBuilder.build`` and its GDN layer's ``_forward_core``,
in both of vLLM's cache modes: each ``vllm-bf16`` batch case passes, and the
control build, one off in the accepted count vLLM is handed, fails them,
naming RB-REPLAY-12 and giving a ``reproduce:`` line. ``--version`` names the
release ``describe`` reports, and a malformed one is one line.
"""

from __future__ import annotations

import json
import subprocess
from typing import TYPE_CHECKING, Any, Final

import pytest

from tests.child import ROOT, run_module
from tests.kernels import engines

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.kernels

BATCHES: Final = ROOT / "vectors" / "replay" / "batch.json"


def _vllm_batch_cases() -> set[str]:
    cases = json.loads(BATCHES.read_text(encoding="utf-8"))["cases"]
    return {f"replay-batch-{case['id']}" for case in cases if case["pipeline"] == "vllm-bf16"}


def _run(tmp_path: Path, python: str, /, *flags: str) -> tuple[int, dict[str, Any], str]:
    report = tmp_path / "report.json"
    command = engines.command(python, "vllm", *flags)
    finished = run_module(
        "ssm_rollback_spec.tools.cli",
        *("vectors", "run", "--impl-cmd", command, "--clause", "RB-REPLAY-12"),
        *("--impl-timeout", "900", "--json", str(report)),
        timeout=1800,
    )
    assert "Traceback" not in finished.stdout + finished.stderr, finished.stderr
    return finished.returncode, json.loads(report.read_text(encoding="utf-8")), finished.stdout


@pytest.mark.parametrize("mode", ["align", "none"])
def test_vllms_own_builder_and_layer_pass_the_batch_cases(
    tmp_path: Path, kernels_python: str, mode: str
) -> None:
    status, report, _ = _run(tmp_path, kernels_python, "--cache-mode", mode)
    outcomes = {case["id"]: case["outcome"] for case in report["cases"]}
    mine = _vllm_batch_cases()
    assert mine
    assert status == 0, report["cases"]
    assert {outcomes[case_id] for case_id in mine} == {"passed"}


@pytest.mark.parametrize("mode", ["align", "none"])
def test_the_off_by_one_control_fails_the_batch_cases_naming_the_clause(
    tmp_path: Path, kernels_python: str, mode: str
) -> None:
    flags = ("--cache-mode", mode, "--control", "off-by-one")
    status, report, shown = _run(tmp_path, kernels_python, *flags)
    failed = {case["id"] for case in report["cases"] if case["outcome"] == "failed"}
    assert status == 1
    assert failed == _vllm_batch_cases()
    assert "FAIL  RB-REPLAY-12" in shown
    assert "reproduce: " in shown


#: Real rollback bugs, as docs/engines.md's table gives them: the vLLM release that
#: shipped it, the release that fixed it, the cache mode, the smallest failing batch.
REAL_BUGS: Final = {
    # vLLM #39273 / #52942: before 0.32.0 a decode with no drafts is a plain
    # decode, which reads the state in its first block, not its last accepted one's.
    "vllm-39273": (
        "0.31.0",
        "0.32.0",
        "none",
        "014-vllm-bf16-plain-decodes-after-accepting-drafts",
    ),
}


@pytest.mark.parametrize("bug", sorted(REAL_BUGS))
def test_the_release_that_shipped_a_real_bug_fails_and_the_fix_passes(
    tmp_path: Path, kernels_python: str, bug: str
) -> None:
    shipped, fixed, mode, smallest = REAL_BUGS[bug]
    status, report, shown = _run(
        tmp_path, kernels_python, "--version", shipped, "--cache-mode", mode
    )
    outcomes = {case["id"]: case for case in report["cases"]}
    failing = outcomes[f"replay-batch-{smallest}"]
    assert status == 1
    assert failing["outcome"] == "failed"
    # A state further from the model than the bound, not a refused request.
    assert "relative error" in failing["detail"]
    assert f"FAIL  replay-batch-{smallest}  [RB-REPLAY-12]" in shown
    assert f"--version {shipped} --cache-mode {mode}" in shown.split("reproduce: ")[1]
    status, report, _ = _run(tmp_path, kernels_python, "--version", fixed, "--cache-mode", mode)
    assert status == 0, report["cases"]
    passed = {case["id"] for case in report["cases"] if case["outcome"] == "passed"}
    assert passed == _vllm_batch_cases()


def _describe(python: str, /, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        engines.argv(python, "vllm", *flags),
        input='{"op":"describe"}\n',
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_describe_names_the_release_version_asks_for(kernels_python: str) -> None:
    pinned = json.loads(_describe(kernels_python).stdout)["ok"]
    other = json.loads(_describe(kernels_python, "--version", "0.32.0").stdout)["ok"]
    assert pinned["release"] == "vllm==0.33.0"
    assert "unsupported" not in pinned["name"]
    assert other["release"] == "vllm==0.32.0"
    assert other["name"].endswith(", unsupported release")


def test_a_malformed_version_is_one_line(kernels_python: str) -> None:
    finished = _describe(kernels_python, "--version", "latest")
    assert finished.returncode == 2
    assert finished.stdout == ""
    assert finished.stderr == (
        "adapters.engines.vllm: --version 'latest' is not a release number such as 0.33.0\n"
    )
