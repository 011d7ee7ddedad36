# SPDX-License-Identifier: MIT OR Apache-2.0
"""The llama.cpp tier's reports, and its column of the results page, docs/results.md.

The tier runs ``vectors run`` (the replay corpus) over the ggml adapter
(adapters/llama-cpp/ggml_adapter.py) and writes the ``--json`` report to
build/results/llama.cpp/, which ``ssm-rollback-spec report`` reads beside the
kernels tier's (tests/kernels/results.py). The page gives each passing
clause's bound, not the distance (``--bounds-only``), and a report holds no
timing, so the column is the same on any machine. The page's columns are
sorted by name, and each is one implementation's alone, so the tier checks
its own column (the cells and the implementation's block) against what its
report gives, whatever the kernels tier's columns are.
``python -m tests.llamacpp.results`` runs the report and writes the column
into the committed page (``--page-only``: from the report a run left).
"""

from __future__ import annotations

import re
import shlex
import sys
from typing import TYPE_CHECKING, Final

from tests.child import ROOT, run_module

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "ADAPTER",
    "NAME",
    "REPORT",
    "REPORTS",
    "Column",
    "column",
    "markdown",
    "page_column",
    "run_report",
    "with_column",
    "without_column",
]

ADAPTER: Final = ROOT / "adapters" / "llama-cpp" / "ggml_adapter.py"
#: Where the tier writes its reports, beside build/results/kernels/.
REPORTS: Final = ROOT / "build" / "results" / "llama.cpp"
REPORT: Final = REPORTS / "ggml-vectors.json"
_PAGE: Final = ROOT / "docs" / "results.md"
_IMPLEMENTATIONS: Final = "## Implementations\n"
_SEPARATOR: Final = re.compile(r"(?<!\\)\|")

#: The ggml adapter's describe name, its column's name on the page.
NAME: Final = "llama.cpp ggml kernels (adapters/llama-cpp)"
#: One implementation's part of a page: its header cell, its cell per clause, its block.
Column = tuple[str, list[str], str]


def run_report(*flags: str, report: Path = REPORT) -> int:
    """``vectors run --clause RB-REPLAY`` over the ggml adapter into ``report``; its exit status.

    Raises:
        RuntimeError: the run left no report, or a traceback.
    """
    report.parent.mkdir(parents=True, exist_ok=True)
    report.unlink(missing_ok=True)
    command = shlex.join([sys.executable, str(ADAPTER), *flags])
    finished = run_module(
        "ssm_rollback_spec.tools.cli",
        *("vectors", "run", "--impl-cmd", command, "--clause", "RB-REPLAY"),
        # The first reply waits for build.py to find its cache: seconds on a loaded host.
        *("--impl-timeout", "120", "--json", str(report)),
        timeout=600,
    )
    if "Traceback" in finished.stdout + finished.stderr or not report.exists():
        message = f"ggml vectors run: no report\n{finished.stderr[-3000:]}"
        raise RuntimeError(message)
    return finished.returncode


def _name(header_cell: str, /) -> str:
    return header_cell.split("<br>", 1)[0]


def _cells(line: str, /) -> list[str]:
    # A cell's own pipes (a reproduce: line's) are escaped as \|.
    return [cell.strip() for cell in _SEPARATOR.split(line.strip()[1:-1])]


def _table(text: str, /) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| ")]


def _blocks(text: str, /) -> dict[str, str]:
    tail = text.split(_IMPLEMENTATIONS, 1)[1]
    parts = tail.split("\n### ")
    return {part.split("\n", 1)[0].removeprefix("### "): part for part in parts if part.strip()}


def page_column(text: str, name: str = NAME, /) -> Column:
    """The column of ``text`` (a results page) named ``name``, and its block.

    Raises:
        KeyError: no column is named ``name``.
    """
    rows = _table(text)
    header = _cells(rows[0])
    index = next((i for i, cell in enumerate(header) if i and _name(cell) == name), None)
    if index is None:
        raise KeyError(name)
    cells = [_cells(row)[index] for row in rows[2:]]
    return header[index], cells, _blocks(text)[header[index].replace("<br>", ", ")]


def markdown(*reports: Path) -> str:
    """``ssm-rollback-spec report REPORT... --markdown - --bounds-only``, as the page is written.

    Raises:
        RuntimeError: ``report`` refused a report.
    """
    finished = run_module(
        "ssm_rollback_spec.tools.cli",
        *("report", *map(str, reports), "--markdown", "-", "--spec-url", "../SPEC.md"),
        "--bounds-only",
        timeout=120,
    )
    if finished.returncode != 0:
        raise RuntimeError(finished.stderr)
    return finished.stdout


def column(report: Path = REPORT, /) -> Column:
    """The column ``report`` gives, as ``ssm-rollback-spec report --bounds-only`` writes it.

    Raises:
        RuntimeError: ``report`` refused the report.
    """
    return page_column(markdown(report))


def _rebuilt(text: str, name: str, added: Column | None, /) -> str:
    """``text`` without the column ``name`` and its block, and with ``added`` where it sorts."""
    lines = text.splitlines(keepends=True)
    rows = [i for i, line in enumerate(lines) if line.startswith("| ")]
    header = _cells(lines[rows[0]])
    kept = [i for i, cell in enumerate(header) if i and _name(cell) != name]
    place = 1 + sum(1 for i in kept if _name(header[i]) < name)
    for number, at in enumerate(rows):
        cells = _cells(lines[at])
        row = [cells[0]] + [cells[i] for i in kept]
        if added is not None:
            cell = added[0] if number == 0 else "---" if number == 1 else added[1][number - 2]
            row.insert(place, cell)
        lines[at] = "| " + " | ".join(row) + " |\n"
    body = "".join(lines)
    blocks = _blocks(body)
    if added is not None:
        blocks[added[2].split("\n", 1)[0]] = added[2]
    # The blocks follow the columns, each titled "name, release".
    order = [cell.replace("<br>", ", ") for cell in _cells(lines[rows[0]])[1:]]
    joined = "\n### ".join(blocks[title].rstrip("\n") + "\n" for title in order)
    return body.split(_IMPLEMENTATIONS, 1)[0] + _IMPLEMENTATIONS + "\n### " + joined


def with_column(text: str, added: Column, /) -> str:
    """``text`` (a results page) with ``added`` where ``report`` sorts it (its namesake gone)."""
    return _rebuilt(text, _name(added[0]), added)


def without_column(text: str, name: str, /) -> str:
    """``text`` (a results page) without the column named ``name`` and its block."""
    return _rebuilt(text, name, None)


def main(argv: list[str] | None = None) -> int:
    """Run the report (unless ``--page-only``) and write its column into docs/results.md."""
    if (sys.argv[1:] if argv is None else argv) != ["--page-only"]:
        run_report()
    _PAGE.write_text(with_column(_PAGE.read_text(encoding="utf-8"), column()), encoding="utf-8")
    sys.stdout.write(f"{_PAGE.relative_to(ROOT)}: the llama.cpp column from {REPORT.name}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
