# SPDX-License-Identifier: MIT OR Apache-2.0
"""``ssm-rollback-spec vectors``: generate, locate and run the language-neutral corpus."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from spec import SPEC_VERSION
from spec.harness.clauses import UnknownClauseError, select_clauses
from spec.harness.failures import AdapterFailure
from spec.harness.protocol import UnencodableMessageError
from spec.harness.subprocess_driver import SubprocessDriver

from . import corpus
from .arguments import adapter_argv, add_impl_arguments, add_selection_arguments
from .deviations import DeviationList, Target
from .errors import CliError, ExitStatus
from .report import Row, clause_summary, counts, print_report, write_json, write_junit
from .shipped import corpus_directory

if TYPE_CHECKING:
    import argparse

__all__ = ["add_vectors_command"]


def add_vectors_command(commands: argparse._SubParsersAction[argparse.ArgumentParser], /) -> None:
    """Add ``vectors generate``, ``vectors where`` and ``vectors run``."""
    group = commands.add_parser("vectors", help="generate, locate or run the vector corpus")
    actions = group.add_subparsers(dest="action", required=True, metavar="ACTION")
    generate = actions.add_parser("generate", help="write the corpus generated from the model")
    generate.add_argument(
        "--out", default=str(corpus_directory()), help="directory to write (default: %(default)s)"
    )
    generate.set_defaults(run=_generate)
    where = actions.add_parser(
        "where", help="print the directory of the shipped corpus, to copy into your own tree"
    )
    where.set_defaults(run=_where)
    run = actions.add_parser(
        "run",
        help="run the corpus against an adapter (standard library only)",
        description="Run every case against an adapter. Exits 0 when no case failed "
        "(listed deviations are reported, not failures), 1 when one did, when the adapter "
        "broke (the cases after the one it broke on are reported as not run) or when a "
        "listed deviation conforms, 2 on a usage error or a bad corpus.",
    )
    add_impl_arguments(run, python=False)
    run.add_argument(
        "--vectors",
        default=str(corpus_directory()),
        metavar="DIR",
        help="the corpus directory (default: the shipped corpus)",
    )
    add_selection_arguments(run, items="cases", entries="clauses or cases")
    run.set_defaults(run=_run)


def _generate(arguments: argparse.Namespace, /) -> int:
    try:
        written = corpus.write_corpus(Path(arguments.out))
    except OSError as error:
        raise CliError(f"--out {arguments.out}: {error.strerror or error}") from None
    for path in written:
        print(path)
    return ExitStatus.OK


def _where(_: argparse.Namespace, /) -> int:
    print(corpus_directory())
    return ExitStatus.OK


def _selected(arguments: argparse.Namespace, cases: list[corpus.Case], /) -> list[corpus.Case]:
    try:
        selected = select_clauses(arguments.clause)
    except UnknownClauseError as error:
        raise CliError(f"--clause: {error}") from None
    if not selected:
        return cases
    chosen = [case for case in cases if selected & set(case["clauses"])]
    if not chosen:
        raise CliError(
            f"--clause: no case of {arguments.vectors} cites {', '.join(sorted(selected))}"
        )
    return chosen


def _run(arguments: argparse.Namespace, /) -> int:
    command = arguments.impl_cmd or f"{shlex.quote(sys.executable)} -m spec.harness.adapter"
    argv = adapter_argv(command)
    deviations = DeviationList.from_option(arguments.deviations)
    try:
        cases = _selected(arguments, corpus.load_cases(Path(arguments.vectors)))
        with SubprocessDriver(argv, timeout=arguments.impl_timeout) as driver:
            results = corpus.run_cases(driver, cases)
    except (corpus.VectorError, UnencodableMessageError) as error:
        raise CliError(f"--vectors {arguments.vectors}: {error}") from None
    except AdapterFailure as failure:
        # Only the closing end of input is left to fail here: every case has its result.
        raise CliError(
            f"the adapter failed at end of input:\n{failure}", ExitStatus.FAILED
        ) from None
    print(f"ssm-rollback-spec vectors run: {command}, {len(cases)} cases, spec {SPEC_VERSION}")
    rows = [Row(r.case_id, r.clauses, r.outcome, r.detail) for r in results]
    rows, conforming = deviations.mark(
        rows, reads={Target.CLAUSE, Target.CASE}, selected=arguments.clause
    )
    print_report(rows, show_passes=False, conforming=conforming)
    if arguments.json:
        document = {
            "implementation": command,
            "spec_version": SPEC_VERSION,
            "cases": [
                {"id": r.name, "clauses": list(r.clauses), "outcome": r.outcome, "detail": r.detail}
                for r in rows
            ],
            "clauses": clause_summary(rows),
            "conforming_deviations": [str(deviation) for deviation in conforming],
            "counts": counts(rows),
        }
        write_json(arguments.json, document)
    if arguments.junit_xml:
        write_junit(arguments.junit_xml, "ssm-rollback-spec vectors run", rows)
    broken = any(row.outcome in {"failed", "not-run"} for row in rows)
    return ExitStatus.FAILED if broken or conforming else ExitStatus.OK
