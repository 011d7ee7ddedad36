# SPDX-License-Identifier: MIT OR Apache-2.0
"""The engines' own code, mutated: every change to vLLM's and SGLang's bookkeeping the batches see.

Each mutant of ``tests/kernels/mutants.py`` is applied to a hard-linked copy
of its release's unpacked wheel (vLLM 0.33.0, SGLang 0.5.23), and the
engine's adapter run over it through ``vectors run`` on every batch of the
engine's pipeline (``vllm-bf16``, ``sglang-bf16``): the model's judge
(RB-REPLAY-12) and the engine's own, each sequence alone (RB-REPLAY-13). A mutant that changes
what an engine computes must fail a case; an equivalent one, argued in its
row, must pass every case, or its argument is wrong. The score is in
docs/mutation.md, whose table the last test holds to the mutants here.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

import pytest

from adapters.engines import wheels
from adapters.engines.sglang.batch import sources
from adapters.engines.vllm.load import WHEEL
from tests.child import ROOT
from tests.kernels.engines import vectors_run
from tests.kernels.mutants import MUTANTS, Mutant, MutantError, mutated_cache

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.engine_mutants

_MUTATION_PAGE: Final = ROOT / "docs" / "mutation.md"


@pytest.fixture(scope="module")
def unpacked() -> Path:
    """The tier cache's ``unpacked/`` folder, with vLLM's wheel and SGLang's files, fetched once."""
    sources()
    return wheels.fetch(WHEEL).parent


def _run(mutant: Mutant, unpacked: Path, folder: Path, python: str, /) -> tuple[int, set[str]]:
    """``vectors run`` over the mutant: its status and the IDs of its failed cases."""
    root = mutated_cache(mutant, unpacked, folder / "cache")
    status, report, _ = vectors_run(
        folder / "report.json",
        python,
        mutant.engine,
        *mutant.flags,
        clause=mutant.clauses[0],
        corpus=tuple(flag for clause in mutant.clauses[1:] for flag in ("--clause", clause)),
        environment={wheels.CACHE_ENV: str(root)},
    )
    failed = {case["id"] for case in report["cases"] if case["outcome"] == "failed"}
    return status, failed


@pytest.mark.parametrize("mutant", MUTANTS, ids=[mutant.name for mutant in MUTANTS])
def test_each_mutant_of_an_engines_bookkeeping_fails_a_batch_or_is_argued_equivalent(
    mutant: Mutant, unpacked: Path, tmp_path: Path, kernels_python: str
) -> None:
    status, failed = _run(mutant, unpacked, tmp_path, kernels_python)
    if mutant.equivalent or mutant.unreached:
        assert (status, failed) == (0, set()), f"argued {mutant.verdict}, yet it fails {failed}"
    else:
        assert status == 1
        assert failed, f"the mutant passed every batch of {mutant.engine}"


def test_a_mutant_whose_text_the_release_lacks_is_refused(unpacked: Path, tmp_path: Path) -> None:
    missing = Mutant("absent", MUTANTS[0].path, "no such line in vLLM", "pass")
    with pytest.raises(MutantError) as raised:
        mutated_cache(missing, unpacked, tmp_path)
    assert str(raised.value) == (
        f"{MUTANTS[0].path}: 'no such line in vLLM' occurs 0 times, not once"
    )


def test_a_mutant_leaves_the_cached_wheel_as_it_was(unpacked: Path, tmp_path: Path) -> None:
    mutant = MUTANTS[0]
    before = (unpacked / mutant.path).read_text(encoding="utf-8")
    root = mutated_cache(mutant, unpacked, tmp_path)
    after = (root / "unpacked" / mutant.path).read_text(encoding="utf-8")
    assert (unpacked / mutant.path).read_text(encoding="utf-8") == before
    assert after == before.replace(mutant.old, mutant.new)


def test_the_mutation_page_scores_every_mutant_as_the_tier_runs_it() -> None:
    text = _MUTATION_PAGE.read_text(encoding="utf-8")
    rows = dict(
        re.findall(r"^\| (.+?) \| (caught|equivalent|not reached) \|", text, flags=re.MULTILINE)
    )
    assert rows == {mutant.name: mutant.verdict for mutant in MUTANTS}
    caught = sum(mutant.verdict == "caught" for mutant in MUTANTS)
    unreached = sum(mutant.verdict == "not reached" for mutant in MUTANTS)
    wrong = caught + unreached
    assert f"{caught} of {wrong} non-equivalent mutants caught" in text
    assert f"{unreached} not reached" in text
