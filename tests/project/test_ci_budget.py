# SPDX-License-Identifier: MIT OR Apache-2.0
"""CI's time budget: every ``.ci/run`` step's last measured seconds add up within it.

The figures live in one place, BENCHMARKS.md: the budget is the goal of its
"`.ci/run`, cold" row (Current figures), and each step's seconds are the
table of the last whole cold run (the section "`.ci/run` from a clean clone
and empty caches", written from ``benchmarks/ci_run.py``'s output). Nothing
is timed here: the test reads what was measured, and fails naming the step
whose row carries the total past the budget, or the ``.ci/run`` step that has
no measured row at all.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Final

from tests.child import ROOT

BENCHMARKS: Final = ROOT / "BENCHMARKS.md"
CI_RUN: Final = ROOT / ".ci" / "run"
#: The Current figures row whose goal is CI's budget from empty caches.
_BUDGET_ROW: Final = "`.ci/run`, cold"
#: The section whose first table is the last whole cold run, step by step.
_STEPS_SECTION: Final = "## `.ci/run` from a clean clone and empty caches"
#: The row of that table that sums the others.
_WHOLE: Final = "**the whole**"


@dataclass(frozen=True)
class Step:
    """One row of the cold run's table: what ran, and its seconds."""

    name: str
    seconds: int


def _cells(line: str, /) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _first_table(text: str, /) -> list[list[str]]:
    """The rows of the first Markdown table in ``text``, header and rule left out."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        table.append(_cells(line))
    return table


def _seconds(cell: str, /) -> int:
    found = re.fullmatch(r"\**([0-9][0-9,]*)\**", cell)
    assert found is not None, f"not a whole number of seconds: {cell!r}"
    return int(found[1].replace(",", ""))


def budget_seconds(benchmarks: str, /) -> int:
    """CI's budget: the goal, in minutes, of the Current figures row ``.ci/run``, cold."""
    current = benchmarks.split("## Current figures", 1)[1]
    [row] = [row for row in _first_table(current) if row[0] == _BUDGET_ROW]
    found = re.match(r"([0-9]+) min\b", row[-1])
    assert found is not None, f"the goal of {_BUDGET_ROW} is not in minutes: {row[-1]!r}"
    return int(found[1]) * 60


def measured_steps(benchmarks: str, /) -> tuple[list[Step], int]:
    """The last whole cold run's steps and the whole it states."""
    section = benchmarks.split(_STEPS_SECTION, 1)[1]
    rows = _first_table(section)
    [whole] = [row for row in rows if row[0] == _WHOLE]
    steps = [Step(row[0], _seconds(row[1])) for row in rows if row[0] != _WHOLE]
    return steps, _seconds(whole[1])


def past_budget(steps: list[Step], budget: int, /) -> str | None:
    """The step whose seconds carry the running total past ``budget``, said in one line."""
    total = 0
    for step in steps:
        total += step.seconds
        if total > budget:
            return (
                f"{step.name} ({step.seconds:,} s) takes CI to {total:,} s, "
                f"past its budget of {budget:,} s ({budget // 60} min)"
            )
    return None


def ci_pytest_steps(script: str, /) -> list[str]:
    """How each ``python -m pytest`` step of ``.ci/run`` is named in the steps table.

    The README's command is ``pytest -n auto``; every other step by its
    marker, ``-m NAME``, whatever comes before ``python -m pytest`` (an
    environment, or ``beside NAME`` for a step run beside the next ones).
    """
    names = []
    for line in script.splitlines():
        if line.lstrip().startswith("#") or "python -m pytest" not in line:
            continue
        for command in line.split("&&"):
            words = shlex.split(command)
            if "pytest" not in words:
                continue
            options = words[words.index("pytest") + 1 :]
            if "-m" in options:
                names.append(f"-m {options[options.index('-m') + 1]}")
            elif options == ["-n", "auto"]:
                names.append("pytest -n auto")
    return names


def unmeasured(steps: list[Step], ci_steps: list[str], /) -> list[str]:
    """The ``.ci/run`` steps that no row of the table names (as ``` `NAME ``` in its step)."""
    return [
        name
        for name in ci_steps
        if not any(re.search(rf"`{re.escape(name)}\b", step.name) for step in steps)
    ]


_STEPS: Final = [Step("install", 40), Step("`pytest -n auto`", 150), Step("`-m slow`", 600)]


def test_a_row_that_carries_the_total_past_the_budget_is_named() -> None:
    assert past_budget(_STEPS, 790) is None
    assert past_budget(_STEPS, 789) == (
        "`-m slow` (600 s) takes CI to 790 s, past its budget of 789 s (13 min)"
    )
    assert past_budget(_STEPS, 100) == (
        "`pytest -n auto` (150 s) takes CI to 190 s, past its budget of 100 s (1 min)"
    )


def test_a_ci_step_with_no_row_is_named() -> None:
    script = (
        "python -m pip install -q -e '.[test]' && mypy && python -m pytest -n auto\n"
        "# python -m pytest -m commented\n"
        "python -m pytest -m slow -n auto\n"
        "PLANNERS_VENV=x tests/planners/install.sh && X=y python -m pytest -m planners\n"
        "beside served python -m pytest -m serving tests/llamacpp\n"
    )
    named = ci_pytest_steps(script)
    assert named == ["pytest -n auto", "-m slow", "-m planners", "-m serving"]
    assert unmeasured(_STEPS, named) == ["-m planners", "-m serving"]


def test_the_tables_read_are_the_ones_benchmarks_md_keeps() -> None:
    text = BENCHMARKS.read_text(encoding="utf-8")
    steps, whole = measured_steps(text)
    assert steps
    # The whole the table states is its rows' sum: no row left out or added since.
    assert sum(step.seconds for step in steps) == whole
    assert budget_seconds(text) == 45 * 60
    assert "pytest -n auto" in ci_pytest_steps(CI_RUN.read_text(encoding="utf-8"))


def test_every_ci_step_was_measured_and_the_whole_is_within_the_budget() -> None:
    text = BENCHMARKS.read_text(encoding="utf-8")
    steps, _ = measured_steps(text)
    missing = unmeasured(steps, ci_pytest_steps(CI_RUN.read_text(encoding="utf-8")))
    assert missing == [], f"no measured row in BENCHMARKS.md for .ci/run's {missing}"
    over = past_budget(steps, budget_seconds(text))
    assert over is None, over
