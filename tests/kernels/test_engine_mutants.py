# SPDX-License-Identifier: MIT OR Apache-2.0
"""The engines' own code, mutated: every change to vLLM's and SGLang's bookkeeping the batches see.

Each mutant of ``tests/kernels/mutants.py`` is applied to a hard-linked copy
of its release's unpacked wheel (vLLM 0.33.0, SGLang 0.5.23), and the
engine's adapter run over it through ``vectors run`` on every batch of the
engine's pipeline (``vllm-bf16``, ``sglang-bf16``): the model's judge
(RB-REPLAY-12) and the engine's own, each sequence alone (RB-REPLAY-13). A mutant that changes
what an engine computes must fail a case; an equivalent one, argued in its
row, must pass every case, and ``check``'s drawn batches under both judges
beyond them (run once for each path's such mutants, made together), or its
argument is wrong. The score is in docs/mutation.md,
whose table the last test holds to the mutants here.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, Final

import pytest

from adapters.engines import wheels
from adapters.engines.sglang.wheel_code import sources
from adapters.engines.vllm.load import WHEEL
from tests.child import ROOT
from tests.kernels.engines import DRAWN_PROPERTIES, check_run, vectors_run
from tests.kernels.mutants import MUTANTS, Mutant, MutantError, MutatedCache

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.engine_mutants

_MUTATION_PAGE: Final = ROOT / "docs" / "mutation.md"


@pytest.fixture(scope="module")
def unpacked() -> Path:
    """The tier cache's ``unpacked/`` folder, with vLLM's wheel and SGLang's files, fetched once."""
    sources()
    return wheels.fetch(WHEEL).parent


@pytest.fixture(scope="module")
def mutated(unpacked: Path, tmp_path_factory: pytest.TempPathFactory) -> MutatedCache:
    """One mutated cache a test process, taking each of its mutants in turn."""
    return MutatedCache(unpacked, tmp_path_factory.mktemp("mutated"))


def _run(
    mutant: Mutant, root: Path, folder: Path, python: str, clauses: tuple[str, ...], /
) -> tuple[int, set[str]]:
    """``vectors run`` over the mutant's ``clauses``: its status and the IDs of its failed cases.

    ``root`` is the mutated cache. A mutant argued caught stops at its first
    failed case (``--exitfirst``).
    """
    caught = not (mutant.equivalent or mutant.unreached)
    status, report, _ = vectors_run(
        folder / "report.json",
        python,
        mutant.engine,
        *mutant.flags,
        clause=clauses[0],
        corpus=(
            *(flag for clause in clauses[1:] for flag in ("--clause", clause)),
            *(("--exitfirst",) if caught else ()),
        ),
        environment={wheels.CACHE_ENV: str(root)},
    )
    failed = {case["id"] for case in report["cases"] if case["outcome"] == "failed"}
    return status, failed


@pytest.mark.parametrize("mutant", MUTANTS, ids=[mutant.name for mutant in MUTANTS])
def test_each_mutant_of_an_engines_bookkeeping_fails_a_batch_or_is_argued_equivalent(
    mutant: Mutant, mutated: MutatedCache, tmp_path: Path, kernels_python: str
) -> None:
    root = mutated.apply(mutant)
    if mutant.equivalent or mutant.unreached:
        # Every shipped case of both judges; check's drawn batches are run
        # over each path's such mutants together (below).
        status, failed = _run(mutant, root, tmp_path, kernels_python, mutant.clauses)
        assert (status, failed) == (0, set()), f"argued {mutant.verdict}, yet it fails {failed}"
        return
    # One failing case catches it: each judge runs alone, the model's first,
    # and the engine's own (the dearer, each sequence again alone) only where
    # the model's passes.
    for clause in mutant.clauses:
        status, failed = _run(mutant, root, tmp_path, kernels_python, (clause,))
        if failed:
            break
    assert status == 1
    assert failed, f"the mutant passed every batch of {mutant.engine}"


def _uncaught_by_path() -> dict[str, tuple[Mutant, ...]]:
    """The equivalent and not-reached mutants, by the adapter and flags they run under."""
    paths: dict[str, list[Mutant]] = {}
    for mutant in MUTANTS:
        if mutant.equivalent or mutant.unreached:
            paths.setdefault(" ".join((mutant.engine, *mutant.flags)), []).append(mutant)
    return {path: tuple(mutants) for path, mutants in paths.items()}


#: The mutants argued equivalent or not reached, by ``engine flags...``.
_UNCAUGHT: Final = _uncaught_by_path()


@pytest.mark.parametrize("path", list(_UNCAUGHT))
def test_a_paths_equivalent_mutants_together_pass_checks_drawn_batches(
    path: str, mutated: MutatedCache, tmp_path: Path, kernels_python: str
) -> None:
    # Beyond the shipped cases, which each such mutant passes alone (above):
    # check's drawn batches under both judges, with prompt chunks where the
    # adapter offers them, over every one of the path's changes at once. No
    # mutant's argument rests on a line another changes (docs/mutation.md), so
    # each holds with the others made, and together they must pass as each
    # would alone; one drawn run a path, not one a mutant, saves six of ten.
    together = _UNCAUGHT[path]
    root = mutated.apply(*together)
    status, report, shown = check_run(
        tmp_path / "check.json",
        kernels_python,
        together[0].engine,
        *together[0].flags,
        environment={wheels.CACHE_ENV: str(root)},
    )
    outcomes = {row["property"]: row["outcome"] for row in report["properties"]}
    names = [mutant.name for mutant in together]
    assert (status, outcomes) == (0, dict.fromkeys(DRAWN_PROPERTIES, "passed")), (names, shown)


def test_a_paths_mutants_of_one_file_are_made_each_on_the_last_ones_text(
    unpacked: Path, tmp_path: Path
) -> None:
    together = next(
        mutants
        for mutants in _UNCAUGHT.values()
        if len({mutant.path for mutant in mutants}) < len(mutants)
    )
    root = MutatedCache(unpacked, tmp_path).apply(*together)
    for path in {mutant.path for mutant in together}:
        want = (unpacked / path).read_text(encoding="utf-8")
        for mutant in together:
            if mutant.path == path:
                want = want.replace(mutant.old, mutant.new)
        assert (root / "unpacked" / path).read_text(encoding="utf-8") == want


def test_a_mutant_whose_text_the_release_lacks_is_refused(unpacked: Path, tmp_path: Path) -> None:
    missing = Mutant("absent", MUTANTS[0].path, "no such line in vLLM", "pass")
    with pytest.raises(MutantError) as raised:
        MutatedCache(unpacked, tmp_path).apply(missing)
    assert str(raised.value) == (
        f"{MUTANTS[0].path}: 'no such line in vLLM' occurs 0 times, not once"
    )


def test_a_mutant_leaves_the_cached_wheel_as_it_was(unpacked: Path, tmp_path: Path) -> None:
    mutant = MUTANTS[0]
    before = (unpacked / mutant.path).read_text(encoding="utf-8")
    root = MutatedCache(unpacked, tmp_path).apply(mutant)
    after = (root / "unpacked" / mutant.path).read_text(encoding="utf-8")
    assert (unpacked / mutant.path).read_text(encoding="utf-8") == before
    assert after == before.replace(mutant.old, mutant.new)


def test_the_next_mutant_finds_the_last_ones_file_as_released_and_its_bytecode_gone(
    unpacked: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = tmp_path / "prefix"
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(prefix))
    first, second = MUTANTS[0], next(m for m in MUTANTS if m.path != MUTANTS[0].path)
    cache = MutatedCache(unpacked, tmp_path / "cache")
    changed = cache.apply(first) / "unpacked" / first.path
    compiled = f"{changed.stem}.{sys.implementation.cache_tag}.pyc"
    stale = (
        changed.parent / "__pycache__" / compiled,
        prefix / changed.parent.relative_to("/") / compiled,
    )
    for place in stale:
        place.parent.mkdir(parents=True, exist_ok=True)
        place.write_bytes(b"compiled from the mutant's text")
    root = cache.apply(second)
    assert changed.read_text(encoding="utf-8") == (unpacked / first.path).read_text("utf-8")
    assert changed.samefile(unpacked / first.path)
    assert [place for place in stale if place.exists()] == []
    assert (root / "unpacked" / second.path).read_text(encoding="utf-8") == (
        (unpacked / second.path).read_text(encoding="utf-8").replace(second.old, second.new)
    )


def test_the_mutation_page_scores_every_mutant_as_the_tier_runs_it() -> None:
    text = _MUTATION_PAGE.read_text(encoding="utf-8")
    rows = dict(
        re.findall(r"^\| (.+?) \| (caught|equivalent|not reached) \|", text, flags=re.MULTILINE)
    )
    assert rows == {mutant.name: mutant.verdict for mutant in MUTANTS}
    caught = sum(mutant.verdict == "caught" for mutant in MUTANTS)
    unreached = sum(mutant.verdict == "not reached" for mutant in MUTANTS)
    wrong = caught + unreached
    score = f"{caught} of {wrong} non-equivalent mutants caught"
    assert score + (f", {unreached} not reached" if unreached else "**") in text
