# SPDX-License-Identifier: MIT OR Apache-2.0
"""The kernel memo the tier runs under (adapters/engines/kernel_memo.py).

A launch met again is read from the memo instead of run. These tests hold
that to what matters: a run through the memo, cold or warm, judges every
case as a run without it does, to the last bit of each distance; and a warm
run does read the memo, so that a wrong entry shows in its report.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from adapters.engines.kernel_memo import MEMO_VARIABLE
from tests.child import ROOT
from tests.kernels.engines import corpus_of, vectors_run

if TYPE_CHECKING:
    from types import ModuleType

pytestmark = pytest.mark.kernels

#: vLLM's own builder and layer in cache mode "none", judged against themselves
#: (RB-REPLAY-13) on the smallest such batch: prompts beside verifies, whose
#: prefill conv gets a tensor from its grid, and each of its seven sequences
#: again alone. One case, not the clause's three: each run below costs the
#: interpreter's time, and the tier runs the other two through the memo too.
_FLAGS = ("--cache-mode", "none")
_CLAUSE = "RB-REPLAY-13"
_FILE, _CASE = "batch_alone.json", "006-vllm-bf16-first-verify-after-prefill"


def _judged(report: dict[str, Any], /) -> dict[str, tuple[str, object]]:
    return {
        case["id"]: (case["outcome"], case.get("distance"))
        for case in report["cases"]
        if case["outcome"] != "skipped"
    }


def _run(
    folder: Path, corpus: Path, python: str, memo: str, /
) -> tuple[int, dict[str, tuple[str, object]]]:
    status, report, _ = vectors_run(
        folder / "report.json",
        python,
        "vllm",
        *_FLAGS,
        clause=_CLAUSE,
        corpus=("--vectors", str(corpus)),
        environment={MEMO_VARIABLE: memo},
    )
    return status, _judged(report)


def test_a_run_through_the_memo_judges_each_case_as_a_run_without_it(
    tmp_path: Path, kernels_python: str
) -> None:
    memo = tmp_path / "memo"
    corpus = corpus_of(tmp_path, _FILE, _CASE)
    unremembered = _run(tmp_path, corpus, kernels_python, "")
    cold = _run(tmp_path, corpus, kernels_python, str(memo))
    stored = sorted(path.relative_to(memo) for path in memo.rglob("*") if path.is_file())
    warm = _run(tmp_path, corpus, kernels_python, str(memo))
    assert unremembered[0] == 0
    assert unremembered[1] == {f"replay-alone-{_CASE}": ("passed", 0.0)}
    assert cold == unremembered
    assert warm == unremembered
    assert stored
    # The warm run met no launch the cold one had not stored.
    assert sorted(path.relative_to(memo) for path in memo.rglob("*") if path.is_file()) == stored
    # And it read them: with every entry emptied, a launch met again writes
    # nothing, and the batches' states are left as torch handed them out.
    for entry in stored:
        (memo / entry).write_bytes(b"")
    status, emptied = _run(tmp_path, corpus, kernels_python, str(memo))
    assert status == 1
    assert emptied.keys() == unremembered[1].keys()
    assert "passed" not in {outcome for outcome, _ in emptied.values()}, emptied


def _kernels_benchmark() -> ModuleType:
    """benchmarks/kernels_tier.py, loaded from its file as it runs (not a package's module)."""
    path = ROOT / "benchmarks" / "kernels_tier.py"
    spec = importlib.util.spec_from_file_location("kernels_tier", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_kernels_benchmark_starts_the_tier_with_an_empty_memo(tmp_path: Path) -> None:
    # The script runs as a file and cannot import the memo's variable: the
    # environment it gives the tier must name the memo by that variable, in a
    # folder of its work folder that does not exist yet.
    environment: dict[str, str] = _kernels_benchmark().environment(tmp_path)
    memo = Path(environment[MEMO_VARIABLE])
    assert memo.parent == tmp_path
    assert not memo.exists()
