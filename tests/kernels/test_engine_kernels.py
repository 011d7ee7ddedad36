# SPDX-License-Identifier: MIT OR Apache-2.0
"""The engines' own kernels judged by the replay corpus and the replay properties (docs/engines.md).

Each engine adapter (adapters/engines/) runs its engine's released kernels,
under Triton's CPU interpreter here. For each engine the registry lists
(``adapters/engines/registry.py``): the corpus's cases of its pipeline pass
within their stated bound through ``vectors run``; ``check`` runs the replay
properties through it and they pass; and its control build, one off in the
accepted count, fails.
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING, Final

import pytest

from ssm_rollback_spec import corpus
from tests.child import ROOT
from tests.kernels import engines, results

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.kernels

REPLAY: Final = ROOT / "vectors" / "replay"
#: Each engine adapter's pipeline, as its registry row declares it (the
#: everyday suite checks that its describe states it: tests/test_engine_adapters.py).
PIPELINES: Final = {name: adapter.pipeline for name, adapter in engines.ENGINES.items()}
#: The engine adapters that answer replay_batch with their engine's own bookkeeping.
BATCH_ENGINES: Final = tuple(
    name for name, adapter in engines.ENGINES.items() if adapter.replay_batch is not None
)
#: The licence each engine's row expects its wheel's own metadata to state.
LICENSES: Final = {
    adapter.wheel.requirement: adapter.wheel.license for adapter in engines.ENGINES.values()
}


def _cases(pipeline: str, /) -> list[corpus.ReplayCase]:
    return [case for case in corpus.load_replay_cases(REPLAY) if case.pipeline == pipeline]


def test_the_engine_wheels_state_the_licences_named(kernels_python: str) -> None:
    finished = subprocess.run(
        [kernels_python, "-m", "adapters.engines.wheels"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
        check=True,
    )
    found = dict(line.split()[:2] for line in finished.stdout.splitlines())
    assert found == LICENSES


@pytest.mark.parametrize("engine", sorted(PIPELINES))
def test_the_engine_kernels_pass_their_pipelines_replay_cases(
    tmp_path_factory: pytest.TempPathFactory, kernels_python: str, engine: str
) -> None:
    status, report = results.shared_report(tmp_path_factory, kernels_python, engine, "vectors")
    # Its pipeline's cases, but those of a form its describe does not list
    # (vLLM's prefix-cache hits, offered only in small blocks).
    offer = corpus.replay_offer({"ok": report["describe"]})
    mine = {
        case.case_id
        for case in _cases(PIPELINES[engine])
        if corpus.not_offered(case, offer) is None
    }
    outcomes = {case["id"]: case["outcome"] for case in report["cases"]}
    assert mine, f"the replay corpus has no case of {PIPELINES[engine]}"
    assert status == 0, report["cases"]
    assert {outcomes[case_id] for case_id in mine} == {"passed"}
    assert {outcome for case_id, outcome in outcomes.items() if case_id not in mine} <= {"skipped"}


@pytest.mark.parametrize("engine", sorted(PIPELINES))
def test_check_runs_the_replay_properties_through_the_engine_kernels(
    tmp_path_factory: pytest.TempPathFactory, kernels_python: str, engine: str
) -> None:
    status, report = results.shared_report(tmp_path_factory, kernels_python, engine, "check")
    outcomes = {row["property"]: row["outcome"] for row in report["properties"]}
    assert status == 0, report["properties"]
    # The drawn float64 property is judged by the model's float64 step, which
    # an engine's kernels (FP32 and BF16) do not offer; every other passes.
    float64 = "test_replay.py::test_a_drawn_float64_replay_gives_the_models_states_within_the_bound"
    assert outcomes.pop(float64) == "skipped"
    # vLLM's and SGLang's adapters offer replay_batch (their own builder and layer
    # core, pool and commit: tests/kernels/test_vllm_batch.py, test_sglang_batch.py);
    # FLA has no batch bookkeeping: its two skip.
    batch_outcome = "passed" if engine in BATCH_ENGINES else "skipped"
    for batch in (
        "test_replay.py::test_every_shipped_batch_gives_each_sequence_its_own_replay",
        "test_replay.py::test_each_sequence_of_a_drawn_batch_is_its_own_replay_alone",
        # The engine against itself, each sequence alone (RB-REPLAY-13).
        "test_replay.py::test_every_shipped_batch_gives_each_sequence_what_it_has_alone",
        "test_replay.py::test_each_sequence_of_a_drawn_batch_is_what_the_same_adapter_gives_it_alone",
    ):
        assert outcomes.pop(batch) == batch_outcome
    # No engine adapter names a model (docs/protocol-model.md): those properties skip.
    models = [name for name in outcomes if name.startswith("test_model.py::")]
    assert {outcomes.pop(name) for name in models} <= {"skipped"}
    assert len(outcomes) == 4
    assert set(outcomes.values()) == {"passed"}


@pytest.mark.parametrize("engine", sorted(PIPELINES))
def test_the_engine_adapters_off_by_one_control_fails(
    tmp_path_factory: pytest.TempPathFactory, kernels_python: str, engine: str
) -> None:
    status, report, _ = engines.control_run(tmp_path_factory, kernels_python, engine)
    mine = {case.case_id for case in _cases(PIPELINES[engine])}
    failed = {case["id"] for case in report["cases"] if case["outcome"] == "failed"}
    assert status == 1
    assert failed
    assert failed <= mine


#: How far FLA's chunk rule may be from the model's fla-bf16 (docs/engines.md: its
#: k, w and u tiles are BF16, so it is further than the fused recurrent rule).
FLA_CHUNK_BOUND: Final = 1.2e-2


def test_flas_chunk_rule_is_within_its_measured_distance_of_the_model(
    tmp_path: Path, kernels_python: str
) -> None:
    _, report, _ = engines.vectors_run(
        tmp_path / "report.json", kernels_python, "fla", "--rule", "chunk"
    )
    mine = {case.case_id for case in _cases("fla-bf16")}
    errors = {}
    for case in report["cases"]:
        if case["id"] not in mine:
            assert case["outcome"] == "skipped"
            continue
        # "exact: ...", "within B, not exact: largest relative error E", or a failure's
        # first line "...: relative error E (of max |expected| ...".
        first = case["detail"].splitlines()[0]
        shown = first.split("relative error ")[1].split()[0] if "relative error" in first else "0"
        errors[case["id"]] = float(shown)
    assert set(errors) == mine
    assert max(errors.values()) <= FLA_CHUNK_BOUND, errors


# Run in the kernels venv: BF16 under the patched interpreter is what torch's
# correctly rounded BF16 gives; unpatched, it is not (so the patch is needed).
_BF16_PROBE: Final = """
import os, sys
os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, sys.argv[1])
import torch, triton, triton.language as tl
@triton.jit
def product(x, y, out, cast, n: tl.constexpr):
    i = tl.arange(0, n)
    a, b = tl.load(x + i), tl.load(y + i)
    tl.store(out + i, a * b)
    tl.store(cast + i, (a.to(tl.float32) * 1.25).to(tl.bfloat16))
def right():
    torch.manual_seed(0)
    x, y = torch.randn(1024).bfloat16(), torch.randn(1024).bfloat16()
    out, cast = torch.empty_like(x), torch.empty_like(x)
    product[(1,)](x, y, out, cast, n=1024)
    return bool((out == x * y).all()) and bool((cast == (x.float() * 1.25).bfloat16()).all())
before = right()
from adapters.engines import interpreter_patches
interpreter_patches.apply()
print(before, right())
"""


def _printed(python: str, probe: str, /) -> str:
    """What ``probe`` prints, run by the kernels venv's ``python`` with the clone on its path."""
    finished = subprocess.run(
        [python, "-c", probe, str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return finished.stdout


def test_the_interpreter_needs_and_gets_its_bf16_change(kernels_python: str) -> None:
    assert _printed(kernels_python, _BF16_PROBE).split() == ["False", "True"]


# Run in the kernels venv, patched: a kernel that calls a helper of its own
# module and tl.sum (triton.language.standard, which sees tl.core as well as
# tl) four times each. Prints whether it summed right, how many times the
# interpreter swapped the language, and whether tl.load is Triton's own again.
_SWAP_PROBE: Final = """
import os, sys
os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, sys.argv[1])
import torch, triton, triton.language as tl
from triton.runtime import interpreter
swaps = []
patch_lang = interpreter._patch_lang
def counted(fn):
    swaps.append(fn.__name__)
    return patch_lang(fn)
interpreter._patch_lang = counted
from adapters.engines import interpreter_patches
interpreter_patches.apply()
@triton.jit
def twice(x):
    return x + x
@triton.jit
def sums(x, out, n: tl.constexpr):
    i = tl.arange(0, n)
    a = tl.load(x + i)
    total = tl.zeros([n], dtype=tl.float32)
    for _ in range(4):
        total += tl.sum(twice(a)) + a
    tl.store(out + i, total)
x = torch.arange(8, dtype=torch.float32)
out = torch.empty_like(x)
sums[(1,)](x, out, n=8)
print(bool((out == 4 * (2 * x.sum() + x)).all()), swaps, tl.core.is_builtin(tl.load))
"""


def test_a_kernel_swaps_the_language_once_and_again_only_for_a_module_it_did_not_see(
    kernels_python: str,
) -> None:
    # Unchanged, the interpreter swaps at each of the nine device calls too
    # (change 7). The helper sees only tl, which the kernel swapped; tl.zeros,
    # the first of triton.language.standard's, sees tl.core too, so it swaps
    # once: skipping that swap fails the kernel ("Did you forget to add
    # @triton.jit ?").
    assert _printed(kernels_python, _SWAP_PROBE).splitlines() == ["True ['sums', 'zeros'] True"]


def test_the_committed_results_page_is_what_this_runs_reports_give(
    tmp_path_factory: pytest.TempPathFactory, kernels_python: str
) -> None:
    for engine in results.ENGINES:
        for kind in results.KINDS:
            results.shared_report(tmp_path_factory, kernels_python, engine, kind)
    reports = [results.REPORTS / f"{e}-{k}.json" for e in results.ENGINES for k in results.KINDS]
    fresh = results.with_other_tiers(results.page(reports))
    committed = results.PAGE.read_text(encoding="utf-8")
    assert committed == fresh, (
        "docs/results.md is out of date: regenerate it with python -m tests.kernels.results"
    )
