# SPDX-License-Identifier: MIT OR Apache-2.0
"""Reporting shared by ``check`` and ``vectors run``: labels, clause summaries, JSON reports."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

from .errors import CliError

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

__all__ = ["LABELS", "OUTCOMES", "clause_summary", "counts", "write_json"]

#: Every outcome, in the order reports list them.
OUTCOMES: Final = ("passed", "failed", "skipped", "not-run")

#: How a line of the report names each outcome.
LABELS: Final = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP", "not-run": "NRUN"}


def clause_summary(results: Iterable[tuple[Sequence[str], str]], /) -> dict[str, str]:
    """Each clause's outcome over the results citing it: any failure fails it.

    A clause with a pass and no failure passes; one that nothing ran is
    skipped (or not run, when something should have run it).
    """
    by_clause: dict[str, list[str]] = {}
    for clauses, outcome in results:
        for clause in clauses:
            by_clause.setdefault(clause, []).append(outcome)
    summary = {}
    for clause, outcomes in sorted(by_clause.items()):
        summary[clause] = next(
            (o for o in ("failed", "not-run", "passed") if o in outcomes), "skipped"
        )
    return summary


def counts(outcomes: Iterable[str], /) -> dict[str, int]:
    """How many results had each outcome."""
    listed = list(outcomes)
    return {outcome: listed.count(outcome) for outcome in OUTCOMES}


def write_json(target: str, document: Mapping[str, object], /, flag: str = "--json") -> None:
    """Write ``document`` as JSON to the path ``target``, or to stdout when it is ``-``.

    Raises:
        CliError: the file cannot be written.
    """
    text = json.dumps(document, indent=2) + "\n"
    if target == "-":
        sys.stdout.write(text)
        return
    try:
        Path(target).write_text(text, encoding="utf-8")
    except OSError as error:
        raise CliError(f"{flag} {target}: {error.strerror or error}") from None
