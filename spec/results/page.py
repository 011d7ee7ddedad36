# SPDX-License-Identifier: MIT OR Apache-2.0
"""The results page, as markdown and as one self-contained HTML file.

Both are functions of the reports alone: no time, no path, no host, so the
same reports give the same bytes on any machine. The HTML page has its style
inline, no script and nothing fetched; its links go within the page, to
SPEC.md's clause anchors, and to the runtimes' own issues that deviation
entries name.
"""

from __future__ import annotations

import hashlib
import html
import re
from typing import TYPE_CHECKING, Final

from .badge import badge, badge_name
from .matrix import FAILING, SECTIONS, Column, Matrix, MatrixCell, Standing, anchor, family

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from .reports import Known

__all__ = ["REASONS_HEADING", "TITLE", "footnote", "html_page", "markdown_page", "target", "totals"]

TITLE: Final = "Results across implementations"

#: Said of a release a ``describe`` does not state.
NOT_STATED: Final = "release not stated"

#: A cell no report of its implementation cites.
UNCITED: Final = "—"

_INTRODUCTION: Final = (
    "Each column is an implementation, named and released as its adapter's `describe` "
    "states; each row is a clause of SPEC.md. A cell gives the clause's outcome over every "
    "property and case citing it (the worst: {order}), the largest distance measured "
    "against the clause's bound where it has one (from the model, or, for a `check` property "
    "that compares an implementation with itself, from its own replay), a failing example's "
    "`reproduce:` line, "
    "and where a failure stands against the implementation's deviation list: "
    f'"{Standing.KNOWN_LINKED.value}", "{Standing.KNOWN_UNLINKED.value}", '
    f'"{Standing.NOT_LISTED.value}" or "{Standing.NOW_PASSES.value}". '
    f"{UNCITED} means no report of the implementation cites the clause. The totals count "
    "each column's cells by outcome; rows come in SPEC.md's clause families, and in each "
    "family the clauses some implementation fails or did not run come first; a SKIP or "
    "NOT OBSERVED cell's footnote gives the reason its report states."
)

_MD_INTRODUCTION: Final = (
    "The table has one row per implementation, named and released as its adapter's "
    "`describe` states: its clauses counted by outcome ({order}), and the clauses it fails, "
    "deviates on, did not run, or lists as deviating though they conform. Each "
    "implementation's section lists only the clauses its reports cite, failures and "
    "deviations first, then skips, then passes; a clause's outcome is the worst over every "
    "property and case citing it, with the largest distance measured against the clause's "
    "bound where it has one, a failing example's `reproduce:` line, and where a failure "
    "stands against the implementation's deviation list: "
    f'"{Standing.KNOWN_LINKED.value}", "{Standing.KNOWN_UNLINKED.value}", '
    f'"{Standing.NOT_LISTED.value}" or "{Standing.NOW_PASSES.value}". A SKIP or NOT OBSERVED '
    "outcome's footnote gives the reason its report states."
)

_STYLE: Final = """\
body{font-family:system-ui,sans-serif;margin:1.5em;color:#1b1b1b}
table{border-collapse:collapse;font-size:0.9em}
th,td{border:1px solid #bbb;padding:0.3em 0.5em;vertical-align:top;text-align:left}
thead th{background:#eee;position:sticky;top:0}
code{font-size:0.85em;word-break:break-all}
.outcome{font-weight:bold}
.passed{background:#e3f4e3}.failed,.not-run{background:#fbe0e0}
.deviation,.not-observed{background:#fff3cd}.skipped{background:#f2f2f2}.other{background:#e7e7fb}
.standing{font-style:italic}
.family th{background:#dde6f0;font-size:1.05em}
.totals td{font-weight:bold;background:#fafafa}
"""

#: The heading over the numbered reasons of SKIP and NOT OBSERVED cells.
REASONS_HEADING: Final = "Why a clause was skipped or not observed"


def totals(cells: Mapping[str, MatrixCell], labels: Mapping[str, str], /) -> str:
    """A column's cells counted by outcome, worst first: ``1 FAIL, 3 PASS, 40 —``."""
    found = [cell.outcome for cell in cells.values()]
    known = [labels[outcome] for outcome in labels]
    others = sorted({o for o in found if o is not None and o not in labels})
    counted = [
        *((label, found.count(outcome)) for outcome, label in zip(labels, known, strict=True)),
        *((other, found.count(other)) for other in others),
        (UNCITED, found.count(None)),
    ]
    return ", ".join(f"{number} {label}" for label, number in counted if number)


def _release(column: Column, /) -> str:
    return column.release or NOT_STATED


def _distance(cell: MatrixCell, /, *, measured: bool) -> str:
    if cell.distance is None or cell.bound is None:
        return ""
    if not measured:
        # Which result is farthest may differ between machines; the bounds do not.
        shown = ", ".join(f"{bound:g}" for bound in cell.bounds)
        plural = "s" if len(cell.bounds) > 1 else ""
        return f"within bound{plural} {shown}" if cell.within else ""
    if cell.distance == 0:
        return f"exact (bound {cell.bound:g})"
    return f"largest relative error {cell.distance:.3g} (bound {cell.bound:g})"


def _order(labels: Mapping[str, str], /) -> str:
    return ", ".join(labels.values())


# Markdown.


def _md_text(text: str, /) -> str:
    escaped = html.escape(re.sub(r"\s+", " ", text), quote=False)
    for character in "\\`*_[]|":
        escaped = escaped.replace(character, f"\\{character}")
    return escaped


def _md_code(text: str, /) -> str:
    # A table cell ends at a bare pipe, even in a code span (GitHub's tables).
    text = " ".join(text.split()).replace("|", "\\|")
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _md_link(text: str, target: str, /) -> str:
    return f"[{_md_text(text)}]({target.replace(' ', '%20').replace(')', '%29')})"


def _md_entry(entry_text: str, link: str, /) -> str:
    return _md_link(entry_text, link) if link else _md_text(entry_text)


def target(entry: Known, spec_url: str, /) -> str:
    """Where a deviation entry links: its finding's page beside SPEC.md, or its runtime's issue."""
    if not entry.page:
        return entry.link
    folder = spec_url.rpartition("/")[0]
    return f"{folder}/{entry.page}" if folder else entry.page


def _md_cell(
    cell: MatrixCell, labels: Mapping[str, str], /, *, measured: bool, spec_url: str
) -> str:
    if cell.outcome is None:
        parts = [UNCITED]
    else:
        parts = [f"**{_md_text(labels.get(cell.outcome, cell.outcome))}**"]
    if distance := _distance(cell, measured=measured):
        parts.append(_md_text(distance))
    parts += [f"*{_md_text(standing.value)}*" for standing in cell.standings]
    parts += [
        f"{_md_entry(e.entry, target(e, spec_url))}: {_md_text(e.reason)}" for e in cell.entries
    ]
    parts += [_md_code(line) for line in cell.reproductions]
    if cell.more_reproductions:
        parts.append(_md_text(f"and {cell.more_reproductions} more reproduce: lines"))
    return "<br>".join(parts)


def footnote(column: Column, number: int, /) -> str:
    """The label of a column's ``number``-th reason: ``[^vllm-1a2b-1]``, unique on the page.

    The column's key is long (its name and release), so the label is its first
    word and four hex digits of its SHA-256; GitHub renders it as a number.
    """
    digest = hashlib.sha256(column.key.encode()).hexdigest()[:4]
    return f"[^{column.key.split('-', 1)[0]}-{digest}-{number}]"


def _md_reasons(cells: Mapping[str, MatrixCell], clauses: Sequence[str], /) -> list[str]:
    """The column's reasons, numbered in SPEC.md's order of the clauses that give them."""
    reasons: list[str] = []
    for clause in clauses:
        reasons += [reason for reason in cells[clause].reasons if reason not in reasons]
    return reasons


def _md_column_cell(  # noqa: PLR0913 (the page's settings, each its own)
    cell: MatrixCell, column: Column, reasons: Sequence[str], labels: Mapping[str, str], /, *,
    measured: bool, spec_url: str,
) -> str:  # fmt: skip
    shown = _md_cell(cell, labels, measured=measured, spec_url=spec_url)
    numbers = sorted(reasons.index(reason) + 1 for reason in cell.reasons)
    notes = "".join(footnote(column, number) for number in numbers)
    if not notes:
        return shown
    first, _, rest = shown.partition("<br>")
    return f"{first}{notes}<br>{rest}" if rest else f"{first}{notes}"


def _judged(
    cells: Mapping[str, MatrixCell], clauses: Sequence[str], order: Sequence[str], /
) -> list[str]:
    """The clauses a column was judged on (or holds a stale entry for), worst first.

    Failures, then deviations and the rest in ``order``, an outcome the page
    does not know just before skips, then skips and passes; SPEC.md's order
    within each outcome.
    """
    shown = [c for c in clauses if cells[c].outcome is not None or cells[c].entries]

    def rank(clause: str, /) -> int:
        outcome = cells[clause].outcome
        if outcome is None:
            # A stale entry on a clause no report cites: beside the failures, to be removed.
            return 1
        if outcome in order:
            return 2 * order.index(outcome)
        return 2 * order.index("skipped") - 1 if "skipped" in order else 2 * len(order)

    return sorted(shown, key=lambda clause: (rank(clause), clauses.index(clause)))


def _md_failing(cells: Mapping[str, MatrixCell], judged: Sequence[str], spec_url: str, /) -> str:
    failing = [
        c
        for c in judged
        if cells[c].outcome in FAILING or Standing.NOW_PASSES in cells[c].standings
    ]
    return ", ".join(_md_link(c, f"{spec_url}#{anchor(c)}") for c in failing) or "none"


def _md_counts(cells: Mapping[str, MatrixCell], labels: Mapping[str, str], /) -> str:
    counted = totals({c: cell for c, cell in cells.items() if cell.outcome is not None}, labels)
    return _md_text(counted or "none")


def markdown_page(
    matrix: Matrix, /, *, labels: Mapping[str, str], spec_url: str, measured: bool = True
) -> str:
    """The page as GitHub-flavoured markdown, ending in one newline.

    An overview first, one row per implementation: its release, its clauses
    counted by outcome, and the clauses it fails, deviates on, did not run
    or lists as deviating though they conform. Then a section per
    implementation with only the clauses it was judged on, failures and
    deviations first, then skips, then passes (:func:`_judged`); every SKIP
    and NOT OBSERVED cell points to its reason, a footnote in its section
    (numbered per implementation, so that one moved in or out of the page
    leaves the others' labels as they were).

    ``labels`` names each outcome the command line knows, worst first; an
    outcome not in it is shown as it is. ``spec_url`` is SPEC.md's address
    as the page's readers reach it (``../SPEC.md`` from docs/). Without
    ``measured``, a cell gives a passing distance's bound alone ("within
    bound 0.01"): the page then holds nothing a machine's float rounding
    changes.
    """
    order = list(labels)
    columns = list(zip(matrix.columns, matrix.cells, strict=True))
    judged = [_judged(cells, matrix.clauses, order) for _, cells in columns]
    lines = [f"# {TITLE}", ""]
    lines += [
        "| Implementation | Release | Clauses judged | Fails, deviates or not run |",
        "| --- | --- | --- | --- |",
    ]
    for (column, cells), mine in zip(columns, judged, strict=True):
        name = f"[{_md_text(column.name)}](#impl-{column.key})"
        row = [name, _md_text(_release(column)), _md_counts(cells, labels)]
        row.append(_md_failing(cells, mine, spec_url))
        lines.append(f"| {' | '.join(row)} |")
    lines += ["", "## Reading the page", "", _MD_INTRODUCTION.format(order=_order(labels))]
    lines += ["", "## Implementations"]
    for (column, cells), mine in zip(columns, judged, strict=True):
        lines += _md_section(column, cells, mine, labels, spec_url, measured=measured)
    return "\n".join(lines) + "\n"


def _md_section(  # noqa: PLR0913 (the page's settings, each its own)
    column: Column, cells: Mapping[str, MatrixCell], judged: Sequence[str],
    labels: Mapping[str, str], spec_url: str, /, *, measured: bool,
) -> list[str]:  # fmt: skip
    """One implementation's section: what it is, then its clauses, worst first, and its reasons."""
    found = _md_reasons(cells, judged)
    shown = badge(column, cells, labels)
    lines = [
        "",
        f'### <a id="impl-{column.key}"></a>{_md_text(column.name)}, {_md_text(_release(column))}',
        "",
        f"- Reports: {_md_text(', '.join(column.commands))}",
        f"- Spec version: {_md_text(', '.join(column.spec_versions))}",
        f"- Badge `{badge_name(column)}`: {_md_text(shown['message'])} ({shown['color']})",
    ]
    lines += [
        f"- {Standing.NOW_PASSES.value}: {_md_entry(entry.entry, entry.link)}: "
        f"{_md_text(entry.reason)}"
        for entry, _ in column.now_passing
    ]
    if judged:
        lines += ["", "| Clause | Outcome |", "| --- | --- |"]
        for clause in judged:
            link = _md_link(clause, f"{spec_url}#{anchor(clause)}")
            cell = _md_column_cell(
                cells[clause], column, found, labels, measured=measured, spec_url=spec_url
            )
            lines.append(f"| {link} | {cell} |")
    if found:
        lines.append("")
        lines += [
            f"{footnote(column, number)}: {_md_text(reason)}"
            for number, reason in enumerate(found, start=1)
        ]
    return lines


# HTML.


def _h(text: str, /) -> str:
    return html.escape(text, quote=True)


def _h_entry(entry_text: str, link: str, /) -> str:
    return f'<a href="{_h(link)}">{_h(entry_text)}</a>' if link else _h(entry_text)


def _h_cell(
    cell: MatrixCell, labels: Mapping[str, str], notes: dict[str, int], /, *, measured: bool,
    spec_url: str,
) -> str:  # fmt: skip
    """One cell; a reason it gives is numbered in ``notes`` (a footnote below the table)."""
    if cell.outcome is None:
        classes, shown = "uncited", UNCITED
    else:
        classes = cell.outcome if cell.outcome in labels else "other"
        shown = labels.get(cell.outcome, cell.outcome)
    parts = [f'<span class="outcome">{_h(shown)}</span>']
    for reason in cell.reasons:
        number = notes.setdefault(reason, len(notes) + 1)
        parts[0] += f' <sup><a href="#reason-{number}">{number}</a></sup>'
    if distance := _distance(cell, measured=measured):
        parts.append(f'<span class="distance">{_h(distance)}</span>')
    parts += [f'<span class="standing">{_h(s.value)}</span>' for s in cell.standings]
    parts += [f"{_h_entry(e.entry, target(e, spec_url))}: {_h(e.reason)}" for e in cell.entries]
    parts += [f"<code>{_h(line)}</code>" for line in cell.reproductions]
    if cell.more_reproductions:
        parts.append(_h(f"and {cell.more_reproductions} more reproduce: lines"))
    # The reason is also the cell's title: a pointer over the cell shows it.
    title = f' title="{_h("; ".join(cell.reasons))}"' if cell.reasons else ""
    return f'<td class="{_h(classes)}"{title}>{"<br>".join(parts)}</td>'


def _families(matrix: Matrix, /) -> list[tuple[str, list[str]]]:
    """The clauses by family in SPEC.md's order, and in each, failing clauses first."""
    grouped: dict[str, list[str]] = {}
    for clause in matrix.clauses:
        grouped.setdefault(family(clause), []).append(clause)
    return [
        (name, sorted(clauses, key=lambda clause: not matrix.failing(clause)))
        for name, clauses in grouped.items()
    ]


def _h_body(
    matrix: Matrix,
    labels: Mapping[str, str],
    notes: dict[str, int],
    spec_url: str,
    /,
    *,
    measured: bool,
) -> list[str]:
    """One ``tbody`` per clause family, under one heading row naming it."""
    code: Callable[[str], str] = _markdown_code_to_html
    width = len(matrix.columns) + 1
    lines: list[str] = []
    for name, clauses in _families(matrix):
        title = SECTIONS.get(name, "not in this version of SPEC.md")
        lines += [
            f'<tbody id="family-{_h(name.lower())}">',
            (
                f'<tr class="family"><th colspan="{width}" scope="rowgroup">{code(title)}'
                f" ({_h(name)})</th></tr>"
            ),
        ]
        for clause in clauses:
            heading = (
                f'<th scope="row"><a href="{_h(spec_url)}#{_h(anchor(clause))}">'
                f"{_h(clause)}</a></th>"
            )
            cells = "".join(
                _h_cell(cells[clause], labels, notes, measured=measured, spec_url=spec_url)
                for cells in matrix.cells
            )
            lines.append(f'<tr id="{_h(anchor(clause))}">{heading}{cells}</tr>')
        lines.append("</tbody>")
    return lines


def _h_notes(notes: Mapping[str, int], /) -> list[str]:
    if not notes:
        return []
    items = [f'<li id="reason-{number}">{_h(reason)}</li>' for reason, number in notes.items()]
    return [f'<h2 id="reasons">{_h(REASONS_HEADING)}</h2>', "<ol>", *items, "</ol>"]


def _h_column(column: Column, cells: Mapping[str, MatrixCell], labels: Mapping[str, str], /) -> str:
    shown = badge(column, cells, labels)
    message = f"{_h(shown['message'])} ({_h(shown['color'])})"
    items = [
        f"<li>Reports: {_h(', '.join(column.commands))}</li>",
        f"<li>Spec version: {_h(', '.join(column.spec_versions))}</li>",
        f"<li>Badge <code>{_h(badge_name(column))}</code>: {message}</li>",
        *(
            f"<li>{_h(Standing.NOW_PASSES.value)}: {_h_entry(entry.entry, entry.link)}: "
            f"{_h(entry.reason)}</li>"
            for entry, _ in column.now_passing
        ),
    ]
    return (
        f'<section id="impl-{_h(column.key)}">\n<h3>{_h(column.name)}, {_h(_release(column))}'
        f"</h3>\n<ul>\n" + "\n".join(items) + "\n</ul>\n</section>"
    )


def _markdown_code_to_html(text: str, /) -> str:
    # The introduction and titles mark code with backticks, as SPEC.md does.
    pieces = text.split("`")
    return "".join(
        f"<code>{_h(piece)}</code>" if index % 2 else _h(piece)
        for index, piece in enumerate(pieces)
    )


def html_page(
    matrix: Matrix, /, *, labels: Mapping[str, str], spec_url: str, measured: bool = True
) -> str:
    """The page as one HTML file: inline style, no script, nothing fetched.

    ``labels``, ``spec_url`` and ``measured`` as for :func:`markdown_page`.
    """
    code: Callable[[str], str] = _markdown_code_to_html
    head = ['<th scope="col">Clause</th>'] + [
        f'<th scope="col"><a href="#impl-{_h(c.key)}">{_h(c.name)}</a><br>{_h(_release(c))}</th>'
        for c in matrix.columns
    ]
    counted = "".join(f"<td>{_h(totals(cells, labels))}</td>" for cells in matrix.cells)
    total_row = f'<tr class="totals"><th scope="row">Totals</th>{counted}</tr>'
    notes: dict[str, int] = {}
    body = _h_body(matrix, labels, notes, spec_url, measured=measured)
    sections = [
        _h_column(column, cells, labels)
        for column, cells in zip(matrix.columns, matrix.cells, strict=True)
    ]
    return (
        "\n".join(
            [
                "<!DOCTYPE html>",
                '<html lang="en">',
                "<head>",
                '<meta charset="utf-8">',
                '<meta name="viewport" content="width=device-width, initial-scale=1">',
                f"<title>{_h(TITLE)}</title>",
                f"<style>\n{_STYLE}</style>",
                "</head>",
                "<body>",
                "<main>",
                f"<h1>{_h(TITLE)}</h1>",
                '<table id="results">',
                f"<thead><tr>{''.join(head)}</tr>{total_row}</thead>",
                *body,
                "</table>",
                *_h_notes(notes),
                "<h2>Reading the table</h2>",
                f"<p>{code(_INTRODUCTION.format(order=_order(labels)))}</p>",
                "<h2>Implementations</h2>",
                *sections,
                "</main>",
                "</body>",
                "</html>",
            ]
        )
        + "\n"
    )
