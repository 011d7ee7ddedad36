# SPDX-License-Identifier: MIT OR Apache-2.0
"""docs/mutation.md's denominator is the one computed from pyproject.toml and the package."""

from __future__ import annotations

from tests.project.mutation_scope import (
    DRIFT,
    GATES,
    PAGE,
    ROW,
    page_block,
    scope,
)

_AGAIN = "run `python -m tests.project.mutation_scope` to write docs/mutation.md's table again"


def test_the_pages_mutated_modules_are_the_ones_each_gate_mutates() -> None:
    block = page_block(PAGE.read_text(encoding="utf-8"))
    for how in GATES.values():
        label = how.split(":", 1)[0]
        listed = next(line for line in block.splitlines() if line.startswith(f"- {label}: "))
        shown = [name.strip("` ") for name in listed.split(": ", 1)[1].split(", ")]
        assert tuple(shown) == scope(next(k for k, v in GATES.items() if v == how)).modules, _AGAIN


def test_the_pages_line_counts_are_within_two_percent_of_the_packages() -> None:
    rows = {
        match["how"].strip(): match
        for line in page_block(PAGE.read_text(encoding="utf-8")).splitlines()
        if (match := ROW.match(line))
    }
    assert set(rows) == set(GATES.values()), _AGAIN
    for table, how in GATES.items():
        found, row = scope(table), rows[how]
        assert int(row["modules"]) == len(found.modules), _AGAIN
        assert int(row["package_modules"]) == found.package_modules, _AGAIN
        for shown, computed in (
            (row["lines"], found.lines),
            (row["package"], found.package_lines),
        ):
            assert abs(int(shown.replace(",", "")) - computed) <= DRIFT * computed, _AGAIN


def test_the_judges_gate_mutates_every_judge_and_the_everyday_gate_none() -> None:
    judges = set(scope("mutmut-judges").modules)
    assert {
        "corpus/replay_run.py",
        "corpus/model_run.py",
        "harness/replay_wire.py",
        "harness/model_wire.py",
        "serving/judge.py",
        "serving/verdict.py",
    } <= judges
    assert not judges & set(scope("mutmut").modules)
