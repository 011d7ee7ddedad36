# SPDX-License-Identifier: MIT OR Apache-2.0
"""``ssm-rollback-spec vectors``: generate, locate and run the language-neutral corpus."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from spec import SPEC_VERSION
from spec.harness.failures import AdapterFailure
from spec.harness.protocol import UnencodableMessageError
from spec.harness.subprocess_driver import SubprocessDriver

from . import corpus
from .arguments import adapter_argv, add_impl_arguments
from .errors import CliError, ExitStatus
from .files import JsonFileError, read_json_file
from .report import LABELS, clause_summary, counts, write_json
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
        description="Run every case against an adapter. Exits 0 when no case failed, "
        "1 when one did or the adapter broke, 2 on a usage error or a bad corpus.",
    )
    add_impl_arguments(run, python=False)
    run.add_argument(
        "--vectors",
        default=str(corpus_directory()),
        metavar="DIR",
        help="the corpus directory (default: the shipped corpus)",
    )
    run.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="CASE_ID=REASON",
        help="skip one case, saying why (repeatable)",
    )
    run.add_argument("--skip-file", metavar="PATH", help="a JSON object of case ID to reason")
    run.add_argument(
        "--json", metavar="PATH", help="also write a machine-readable report (- for stdout)"
    )
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


def _skips(arguments: argparse.Namespace, /) -> dict[str, str]:
    skips: dict[str, str] = {}
    if arguments.skip_file:
        try:
            loaded = read_json_file(Path(arguments.skip_file))
        except JsonFileError as error:
            raise CliError(f"--skip-file {arguments.skip_file}: {error}") from None
        if not isinstance(loaded, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in loaded.items()
        ):
            raise CliError(
                f"--skip-file {arguments.skip_file}: must be a JSON object of case ID to reason"
            )
        skips.update(loaded)
    for item in arguments.skip:
        case_id, _, reason = item.partition("=")
        if not case_id or not reason.strip():
            raise CliError(f"--skip {item!r}: write it as CASE_ID=REASON, with a reason")
        skips[case_id] = reason
    return skips


def _run(arguments: argparse.Namespace, /) -> int:
    command = arguments.impl_cmd or f"{shlex.quote(sys.executable)} -m spec.harness.adapter"
    argv = adapter_argv(command)
    skips = _skips(arguments)
    try:
        cases = corpus.load_cases(Path(arguments.vectors))
        with SubprocessDriver(argv, timeout=arguments.impl_timeout) as driver:
            results = corpus.run_cases(driver, cases, skips)
    except (corpus.VectorError, UnencodableMessageError) as error:
        raise CliError(f"--vectors {arguments.vectors}: {error}") from None
    except AdapterFailure as failure:
        raise CliError(f"the adapter failed:\n{failure}", ExitStatus.FAILED) from None
    print(f"ssm-rollback-spec vectors run: {command}, {len(cases)} cases, spec {SPEC_VERSION}")
    for result in results:
        if result.outcome != "passed":
            print(f"{LABELS[result.outcome]}  {result.case_id}  [{', '.join(result.clauses)}]")
            for line in result.detail.splitlines():
                print(f"      {line}")
    by_clause = clause_summary((result.clauses, result.outcome) for result in results)
    print("clauses:")
    for clause, outcome in by_clause.items():
        count = sum(clause in result.clauses for result in results)
        print(f"{LABELS[outcome]}  {clause}  ({count} cases)")
    tally = counts(result.outcome for result in results)
    print(", ".join(f"{count} {outcome}" for outcome, count in tally.items()))
    if arguments.json:
        document = {
            "implementation": command,
            "spec_version": SPEC_VERSION,
            "cases": [
                {"id": r.case_id, "clauses": r.clauses, "outcome": r.outcome, "detail": r.detail}
                for r in results
            ],
            "clauses": by_clause,
            "counts": tally,
        }
        write_json(arguments.json, document)
    return ExitStatus.OK if tally["failed"] + tally["not-run"] == 0 else ExitStatus.FAILED
