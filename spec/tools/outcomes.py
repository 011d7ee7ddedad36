# SPDX-License-Identifier: MIT OR Apache-2.0
"""Each item's outcome as ``check`` and ``vectors run`` report it: one layout, failures first.

The rows, their counts and clause summary, the terminal layout, and the JSON
and JUnit writers; the ``report`` command (``report.py``) reads what they write.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ..results.matrix import LABELS, OUTCOMES
from .deviations import Row
from .errors import CliError

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from .deviations import Deviation


__all__ = [
    "LABELS",
    "OUTCOMES",
    "Row",
    "clause_key",
    "clause_summary",
    "counts",
    "measured",
    "print_report",
    "write_json",
    "write_junit",
    "write_text",
]


#: The message for a deviation entry that no longer deviates.
CONFORMS: Final = "listed as deviating, but it conforms: remove the entry"


def measured(row: Row, /) -> dict[str, float]:
    """A row's ``distance`` and ``bound``, as a ``--json`` report gives them; empty if none."""
    if row.distance is None or row.bound is None:
        return {}
    return {"distance": row.distance, "bound": row.bound}


def clause_summary(rows: Iterable[Row], /) -> dict[str, str]:
    """Each clause's outcome over the rows citing it.

    Any failure fails the clause; then a case not run, a known deviation, a
    race not observed; a clause with a pass and nothing worse passes; one
    that nothing ran is skipped.
    """
    by_clause: dict[str, set[str]] = {}
    for row in rows:
        for clause in row.clauses:
            by_clause.setdefault(clause, set()).add(row.outcome)
    return {
        clause: next((o for o in OUTCOMES if o in outcomes and o != "skipped"), "skipped")
        for clause, outcomes in sorted(by_clause.items(), key=lambda item: clause_key(item[0]))
    }


def clause_key(clause: str, /) -> tuple[str, int]:
    """How clauses sort: by family, then by number (RB-REPLAY-2 before RB-REPLAY-10)."""
    family, _, number = clause.rpartition("-")
    return (family, int(number)) if number.isdigit() else (clause, -1)


def counts(rows: Iterable[Row], /) -> dict[str, int]:
    """How many rows had each outcome."""
    outcomes = [row.outcome for row in rows]
    return {outcome: outcomes.count(outcome) for outcome in OUTCOMES}


def _indented(text: str, /) -> list[str]:
    return [f"      {line}" for line in text.splitlines()]


def _not_run(rows: Sequence[Row], /) -> list[str]:
    # The items left unrun after an adapter broke are summed up, one line for
    # each place it broke, not listed one by one (the JSON report lists them).
    by_detail: dict[str, int] = {}
    for row in rows:
        if row.outcome == "not-run":
            by_detail[row.detail] = by_detail.get(row.detail, 0) + 1
    return [
        f"{LABELS['not-run']}  {number} {'item' if number == 1 else 'items'}: {detail}"
        for detail, number in by_detail.items()
    ]


def _skipped(rows: Sequence[Row], /) -> list[str]:
    # The skips that share a reason (an opt-in operation not offered, say)
    # are one line, the clauses they cite and the reason under it, so that
    # the passes are not pages below; a skip of its own is named. The JSON
    # report and the JUnit file list each.
    by_reason: dict[str, list[Row]] = {}
    for row in rows:
        if row.outcome == "skipped":
            by_reason.setdefault(row.detail, []).append(row)
    lines = []
    for reason, skipped in by_reason.items():
        clauses = sorted({c for row in skipped for c in row.clauses}, key=clause_key)
        name = skipped[0].name if len(skipped) == 1 else f"{len(skipped)} items"
        lines.append(f"{LABELS['skipped']}  {name}  [{', '.join(clauses)}]")
        lines += _indented(reason)
    return lines


def print_report(
    rows: Sequence[Row],
    /,
    *,
    show_passes: bool,
    conforming: Sequence[Deviation] = (),
) -> None:
    """Print rows failures first, then one line per clause, the failed list and the tally."""
    lines: list[str] = []
    for outcome in OUTCOMES:
        if outcome == "passed" and not show_passes:
            continue
        if outcome == "not-run":
            lines += _not_run(rows)
            continue
        if outcome == "skipped":
            lines += _skipped(rows)
            continue
        for row in (row for row in rows if row.outcome == outcome):
            lines.append(f"{LABELS[outcome]}  {row.name}  [{', '.join(row.clauses)}]")
            lines += _indented(row.detail)
    lines.append("clauses:")
    lines += [f"{LABELS[outcome]}  {clause}" for clause, outcome in clause_summary(rows).items()]
    failed = [row for row in rows if row.outcome == "failed"]
    if failed:
        lines.append("failed:")
        lines += [f"  {row.name}  [{', '.join(row.clauses)}]" for row in failed]
    lines += [f"{CONFORMS}: {deviation}" for deviation in conforming]
    tally = counts(rows)
    shown = [o for o in reversed(OUTCOMES) if tally[o] or o != "not-observed"]  # races' alone
    lines.append(", ".join(f"{tally[o]} {o}" for o in shown))
    print("\n".join(lines))


def write_json(target: str, document: Mapping[str, object], /, flag: str = "--json") -> None:
    """Write ``document`` as JSON to the path ``target``, or to stdout when it is ``-``.

    Raises:
        CliError: the file cannot be written.
    """
    write_text(target, json.dumps(document, indent=2) + "\n", flag)


def write_text(target: str, text: str, /, flag: str) -> None:
    """Write ``text`` to the path ``target``, or to stdout when it is ``-``.

    Raises:
        CliError: the file cannot be written, named by ``flag``.
    """
    if target == "-":
        sys.stdout.write(text)
        return
    try:
        Path(target).write_text(text, encoding="utf-8")
    except OSError as error:
        raise CliError(f"{flag} {target}: {error.strerror or error}") from None


def _first_line(text: str, /) -> str:
    return (text.splitlines() or [""])[0]


def write_junit(
    target: str, suite: str, rows: Sequence[Row], /, seconds: float | None = None
) -> None:
    """Write ``rows`` as a JUnit XML report to the path ``target``.

    One testcase per property or case, named with its clauses; a failure
    carries its whole detail, a skip, a deviation or a race not observed its
    reason, and a case not run is an error. A row with no time of its own (a case of a pipelined
    batch) has no ``time``; the suite's is ``seconds`` when given, else the
    rows' sum.

    Raises:
        CliError: the file cannot be written.
    """
    tally = counts(rows)
    root = ET.Element("testsuites", name="ssm-rollback-spec")
    element = ET.SubElement(
        root,
        "testsuite",
        name=suite,
        tests=str(len(rows)),
        failures=str(tally["failed"]),
        errors=str(tally["not-run"]),
        skipped=str(tally["skipped"] + tally["deviation"] + tally["not-observed"]),
        time=f"{sum(row.seconds or 0.0 for row in rows) if seconds is None else seconds:.3f}",
    )
    for row in rows:
        case = ET.SubElement(
            element, "testcase", name=f"{row.name} [{', '.join(row.clauses)}]", classname=suite
        )
        if row.seconds is not None:
            case.set("time", f"{row.seconds:.3f}")
        properties = ET.SubElement(case, "properties")
        for clause in row.clauses:
            ET.SubElement(properties, "property", name="clause", value=clause)
        if row.outcome == "failed":
            failure = ET.SubElement(case, "failure", message=_first_line(row.detail))
            failure.text = row.detail
        elif row.outcome == "not-run":
            ET.SubElement(case, "error", message=row.detail)
        elif row.outcome in {"skipped", "deviation", "not-observed"}:
            # The detail opens "deviates knowingly (...): REASON" or "not observed: REASON".
            ET.SubElement(case, "skipped", message=_first_line(row.detail))
    ET.indent(root)
    text = ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
    try:
        Path(target).write_text(text, encoding="utf-8")
    except OSError as error:
        raise CliError(f"--junit-xml {target}: {error.strerror or error}") from None
