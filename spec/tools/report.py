# SPDX-License-Identifier: MIT OR Apache-2.0
"""``ssm-rollback-spec report``: the reports of ``check`` and ``vectors run`` on one page."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ..results import (
    ReportError,
    build_matrix,
    html_page,
    markdown_page,
    write_badges,
)
from ..results.tier_report import read_reports
from .arguments import prepare_outputs
from .errors import CliError, ExitStatus
from .outcomes import LABELS, OUTCOMES, write_text

if TYPE_CHECKING:
    import argparse

    from ..results import Report

__all__ = ["add_arguments"]

#: How the command names itself on stderr.
_PROG: Final = "ssm-rollback-spec report"


def add_arguments(report: argparse.ArgumentParser, /) -> None:
    """Give ``report`` its description and options."""
    report.description = (
        "Read the --json reports of check and vectors run, and the tier reports of the "
        "repository's test tiers (any implementations and releases), and write one page: "
        "an overview row per implementation, then each implementation's judged clauses, "
        "failures first (the HTML page: implementations as columns, SPEC.md's clauses as "
        "rows); markdown on stdout unless --html or --markdown names a file. The same reports "
        "give the same bytes. Exits 0, or 2 on a usage error or a file that is not a report."
    )
    report.add_argument("reports", nargs="+", metavar="REPORT", help="a --json report")
    report.add_argument(
        "--markdown", metavar="PATH", help="write the page as markdown (- for stdout)"
    )
    report.add_argument(
        "--html", metavar="PATH", help="write the page as one HTML file (- for stdout)"
    )
    report.add_argument(
        "--badges",
        metavar="DIR",
        help="write each implementation's badge into DIR, in the shields.io endpoint format",
    )
    report.add_argument(
        "--spec-url",
        default="SPEC.md",
        metavar="URL",
        help="SPEC.md's address as the page's readers reach it (default: %(default)s)",
    )
    report.add_argument(
        "--bounds-only",
        action="store_true",
        help="give a passing replay clause's bound, not the distance measured: for a page "
        "kept in a repository, which another machine's float rounding must not change",
    )
    report.set_defaults(run=_report)


def _report(arguments: argparse.Namespace, /) -> int:
    prepare_outputs(("--markdown", arguments.markdown), ("--html", arguments.html))
    reports: list[Report] = []
    seen: set[Path] = set()
    # The first report of each implementation, release and command, by its name.
    made: dict[tuple[str, str, str], str] = {}
    for name in arguments.reports:
        if Path(name).resolve() in seen:
            # Merging a report with itself would count nothing twice, but says the
            # command line is not what its writer meant.
            print(f"{_PROG}: warning: {name} is given twice; read once", file=sys.stderr)
            continue
        seen.add(Path(name).resolve())
        try:
            read = read_reports(Path(name))
        except ReportError as error:
            raise CliError(f"{name}: {error}") from None
        for report in read:
            _note_twice(made, report, name)
        reports += read
    matrix = build_matrix(reports, order=OUTCOMES)
    labels: dict[str, str] = {o: LABELS[o] for o in OUTCOMES if o in LABELS}
    markdown = arguments.markdown if arguments.markdown or arguments.html else "-"
    pages = {"--markdown": (markdown, markdown_page), "--html": (arguments.html, html_page)}
    written = []
    for flag, (target, render) in pages.items():
        if target is not None:
            written.append("the page to stdout" if target == "-" else target)
            page = render(
                matrix,
                labels=labels,
                spec_url=arguments.spec_url,
                measured=not arguments.bounds_only,
            )
            write_text(target, page, flag)
    if arguments.badges is not None:
        try:
            write_badges(Path(arguments.badges), matrix, labels)
        except OSError as error:
            raise CliError(f"--badges {arguments.badges}: {error.strerror or error}") from None
        written.append(f"badges in {arguments.badges}")
    # On stderr, so that a page on stdout stays the page alone.
    print(
        f"{_PROG}: {_count(len(reports), 'report')} of"
        f" {_count(len(matrix.columns), 'implementation')} over"
        f" {_count(len(matrix.clauses), 'clause')}; wrote {', '.join(written)}",
        file=sys.stderr,
    )
    return ExitStatus.OK


def _note_twice(made: dict[tuple[str, str, str], str], report: Report, name: str, /) -> None:
    """Warn when ``report`` is the same command's on the same release as an earlier file's."""
    key = (report.name, report.release, report.command)
    if key in made and made[key] != name:
        # Two runs of one command on one release (a copy, or a rerun) share a column,
        # each clause its worse cell: say so, as a page cannot.
        print(
            f"{_PROG}: warning: {name} and {made[key]} are both {report.command} reports of"
            f" {_implementation(report.name, report.release)}; their cells are combined,"
            " each clause its worse outcome",
            file=sys.stderr,
        )
    made.setdefault(key, name)


def _implementation(name: str, release: str, /) -> str:
    return f"{name} {release}" if release else name


def _count(number: int, noun: str, /) -> str:
    return f"{number:,} {noun}" if number == 1 else f"{number:,} {noun}s"
