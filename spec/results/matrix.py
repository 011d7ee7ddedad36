# SPDX-License-Identifier: MIT OR Apache-2.0
"""The reports side by side: one column per implementation, one cell per clause.

An implementation is its ``describe`` name and release; every report of it
(``check`` and ``vectors run``, any number) fills the same column. A cell's
outcome is the worst of the results citing its clause, in the order the
command line lists outcomes (failures first); an outcome the page does not
know is shown as it is, and ranks just before a skip.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ..harness.clauses import CLAUSES

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from .reports import Known, Report, Result

__all__ = [
    "FAILING",
    "LABELS",
    "NO_REASON",
    "OUTCOMES",
    "REASONED",
    "SECTIONS",
    "Column",
    "Matrix",
    "MatrixCell",
    "Standing",
    "anchor",
    "build_matrix",
    "family",
]

#: Every outcome, in the order a report lists them (not-observed: docs/protocol.md).
OUTCOMES: Final = ("failed", "not-run", "deviation", "not-observed", "skipped", "passed")

#: How a line of the report names each outcome.
LABELS: Final = {
    "passed": "PASS",
    "failed": "FAIL",
    "skipped": "SKIP",
    "not-run": "NOT RUN",
    "deviation": "DEVIATION",
    "not-observed": "NOT OBSERVED",
}

#: Each clause family's section of SPEC.md, which titles its rows.
SECTIONS: Final = {
    "RB-MODE": "Modes",
    "RB-PARSE": "Parsing `--ssm-rollback-mode`",
    "RB-PUB": "The published mode",
    "RB-CELL": "The first-write-wins cell (Python API)",
    "RB-SIZE": "Replay sizing",
    "RB-VERIFY": "Speculative verify",
    "RB-PY": "Python API types",
    "RB-PROTO": "The adapter protocol (docs/protocol.md)",
    "RB-REPLAY": "Replay rollback (the replay profile)",
}

#: The outcomes a page puts first: a clause some implementation fails (known or
#: not, so a listed deviation with its link is among them) or did not run.
FAILING: Final = frozenset({"failed", "not-run", "deviation"})

#: The outcomes whose cells give the reason the report states for them.
REASONED: Final = frozenset({"skipped", "not-observed"})

#: The reason of a result whose report states none.
NO_REASON: Final = "the report states no reason"

#: The most ``reproduce:`` lines a cell shows (a replay line is kilobytes); the rest are counted.
MAX_REPRODUCTIONS: Final = 1


class Standing(enum.Enum):
    """Where a failure stands against the implementation's deviation list."""

    KNOWN_LINKED = "fails, known, linked"
    KNOWN_UNLINKED = "fails, known, not linked"
    NOT_LISTED = "fails, not listed"
    NOW_PASSES = "listed, but now passes"


@dataclass(frozen=True)
class Column:
    """One implementation: its name and release, as its ``describe`` states them."""

    name: str
    release: str
    #: The commands its reports came from (``check (profile ci)``, ``vectors run``).
    commands: tuple[str, ...]
    spec_versions: tuple[str, ...]
    #: Entries listed as deviating that conform, with the clauses each covers.
    now_passing: tuple[tuple[Known, tuple[str, ...]], ...]
    #: A name for links and files, unique on the page: lower case, ASCII
    #: letters, digits and dashes.
    key: str


def _key(name: str, release: str, taken: set[str], /) -> str:
    text = f"{name} {release}".lower()
    key = "-".join("".join(c if c.isascii() and c.isalnum() else " " for c in text).split())
    key = key or "implementation"
    # Two names that differ only in case or punctuation get numbered keys.
    unique, number = key, 1
    while unique in taken:
        number += 1
        unique = f"{key}-{number}"
    taken.add(unique)
    return unique


@dataclass(frozen=True)
class MatrixCell:
    """One clause of one implementation: its outcome and what explains it."""

    #: None when no report of the implementation cites the clause.
    outcome: str | None
    #: The largest distance measured among the results (a replay case's or a
    #: ``check`` property's), and its bound.
    distance: float | None = None
    bound: float | None = None
    #: Every bound its results were judged within, and whether each was met.
    bounds: tuple[float, ...] = ()
    within: bool = True
    reproductions: tuple[str, ...] = ()
    more_reproductions: int = 0
    standings: tuple[Standing, ...] = ()
    #: The deviation entries of its known failures, or that now pass.
    entries: tuple[Known, ...] = ()
    #: Why a skipped or not-observed cell is so, as its results' details say (REASONED).
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class Matrix:
    """The page's content: clauses as rows, implementations as columns."""

    clauses: tuple[str, ...]
    columns: tuple[Column, ...]
    #: ``cells[column index][clause]``.
    cells: tuple[Mapping[str, MatrixCell], ...]

    def failing(self, clause: str, /) -> bool:
        """Whether some implementation fails the clause or did not run it."""
        return any(cells[clause].outcome in FAILING for cells in self.cells)


def family(clause: str, /) -> str:
    """A clause's family: its ID without the number (``RB-PARSE`` of ``RB-PARSE-2``)."""
    return clause.rsplit("-", 1)[0]


def _reason(detail: str, /) -> str:
    # The detail's first line that is not a reproduce: line says why.
    lines = [line.strip() for line in detail.splitlines()]
    return next((line for line in lines if line and not line.startswith("reproduce: ")), NO_REASON)


def anchor(clause: str, /) -> str:
    """The anchor of a clause's heading in SPEC.md, as a Markdown renderer makes it."""
    return clause.lower()


def _rank(outcome: str, order: Sequence[str], /) -> int:
    # Known outcomes in the command line's order; an unknown one just before a skip.
    if outcome in order:
        return 2 * order.index(outcome)
    return 2 * order.index("skipped") - 1 if "skipped" in order else 2 * len(order)


def _verdict(outcomes: set[str], order: Sequence[str], /) -> str:
    # A skip counts only where nothing else ran, as in the command line's clause summary.
    ran = outcomes - {"skipped"} or outcomes
    return min(ran, key=lambda outcome: (_rank(outcome, order), outcome))


def _covered(entry: Known, results: Iterable[Result], /) -> tuple[str, ...]:
    target, _, name = entry.entry.partition(" ")
    if target == "clause":
        return (name,)
    found = {c for result in results if result.name == name for c in result.clauses}
    return tuple(sorted(found))


def _cell(
    clause: str, results: Sequence[Result], now_passing: Sequence[tuple[Known, tuple[str, ...]]],
    order: Sequence[str], /,
) -> MatrixCell:  # fmt: skip
    mine = [result for result in results if clause in result.clauses]
    stale = sorted({entry for entry, clauses in now_passing if clause in clauses}, key=str)
    if not mine:
        return MatrixCell(
            None, standings=(Standing.NOW_PASSES,) * bool(stale), entries=tuple(stale)
        )
    # (distance, bound, name) of each result measured against a bound.
    measured = [
        (r.distance, r.bound, r.name)
        for r in mine
        if r.distance is not None and r.bound is not None
    ]
    farthest = max(measured, default=None)
    reproductions = sorted(
        {line for r in mine if r.outcome == "failed" for line in r.reproductions}
    )
    known = sorted({r.known for r in mine if r.outcome == "deviation" and r.known}, key=str)
    standings = []
    if known:
        linked = all(entry.link or entry.page for entry in known)
        standings.append(Standing.KNOWN_LINKED if linked else Standing.KNOWN_UNLINKED)
    if any(result.outcome == "failed" for result in mine):
        standings.append(Standing.NOT_LISTED)
    if stale:
        standings.append(Standing.NOW_PASSES)
    outcome = _verdict({result.outcome for result in mine}, order)
    reasons = (
        {_reason(r.detail) for r in mine if r.outcome == outcome} if outcome in REASONED else ()
    )
    return MatrixCell(
        outcome=outcome,
        distance=None if farthest is None else farthest[0],
        bound=None if farthest is None else farthest[1],
        bounds=tuple(sorted({bound for _, bound, _ in measured})),
        within=all(distance <= bound for distance, bound, _ in measured),
        reproductions=tuple(reproductions[:MAX_REPRODUCTIONS]),
        more_reproductions=max(0, len(reproductions) - MAX_REPRODUCTIONS),
        standings=tuple(standings),
        entries=tuple(known + [entry for entry in stale if entry not in known]),
        reasons=tuple(sorted(reasons)),
    )


def build_matrix(reports: Iterable[Report], /, order: Sequence[str]) -> Matrix:
    """The reports side by side, whatever order they come in.

    ``order`` lists the outcomes worst first (the command line's ``OUTCOMES``).
    Every clause of SPEC.md is a row, and after them any other clause a
    report cites, sorted.
    """
    grouped: dict[tuple[str, str], list[Report]] = {}
    for report in reports:
        grouped.setdefault((report.name, report.release), []).append(report)
    columns: list[Column] = []
    cells: list[dict[str, MatrixCell]] = []
    cited: set[str] = set()
    taken: set[str] = set()
    for (name, release), mine in sorted(grouped.items()):
        results = [result for report in mine for result in report.results]
        cited |= {clause for result in results for clause in result.clauses}
        entries = sorted({entry for report in mine for entry in report.conforming}, key=str)
        now_passing = tuple((entry, _covered(entry, results)) for entry in entries)
        columns.append(
            Column(
                name,
                release,
                tuple(sorted({report.command for report in mine})),
                tuple(sorted({report.spec_version for report in mine})),
                now_passing,
                _key(name, release, taken),
            )
        )
        cells.append({})
    clauses = (*CLAUSES, *sorted(cited - set(CLAUSES)))
    for index, (_, mine) in enumerate(sorted(grouped.items())):
        results = [result for report in mine for result in report.results]
        for clause in clauses:
            cells[index][clause] = _cell(clause, results, columns[index].now_passing, order)
    return Matrix(clauses, tuple(columns), tuple(cells))
