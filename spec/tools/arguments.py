# SPDX-License-Identifier: MIT OR Apache-2.0
"""Options more than one command takes, each defined and checked once."""

from __future__ import annotations

import argparse

from ..harness.subprocess_driver import DEFAULT_TIMEOUT, parse_race_budget, parse_timeout
from .preflight import first_reply, prepare_directory, prepare_file

__all__ = [
    "add_impl_arguments",
    "add_selection_arguments",
    "before_the_run",
    "prepare_outputs",
    "race_budget",
]


def _timeout(text: str, /) -> float:
    try:
        return parse_timeout(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def race_budget(text: str, /) -> float:
    """An argparse type: a race budget in seconds, from 0."""
    try:
        return parse_race_budget(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_impl_arguments(parser: argparse.ArgumentParser, /, *, python: bool) -> None:
    """Add ``--impl-cmd``, ``--impl-timeout`` and, when ``python``, ``--impl-module``."""
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument(
        "--impl-cmd",
        metavar="CMD",
        help="adapter command of the implementation under test (split with shell rules, "
        "never run by a shell); default: the Python reference",
    )
    if python:
        choice.add_argument(
            "--impl-module",
            metavar="MODULE[:ATTR]",
            help="a Python implementation with the public names of ssm_rollback_spec.rollback, "
            "checked in-process, Python-API clauses included",
        )
    parser.add_argument(
        "--impl-timeout",
        type=_timeout,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"seconds an adapter may take over one reply (default {DEFAULT_TIMEOUT:g})",
    )


def add_selection_arguments(
    parser: argparse.ArgumentParser, /, *, item: str, items: str, entries: str
) -> None:
    """Add ``--clause``, ``--deviations`` and ``--json``, worded for ``item`` and ``items``."""
    parser.add_argument(
        "--clause",
        action="append",
        default=[],
        metavar="ID",
        help=f"run only the {items} citing this clause; a family such as RB-SIZE selects "
        "all of it (repeatable)",
    )
    parser.add_argument(
        "--deviations",
        metavar="FILE",
        help=f"known deviations ({entries}, with reasons): reported as DEVIATION, "
        "not failures; an entry that conforms or matches nothing fails the run",
    )
    parser.add_argument(
        "--json",
        metavar="PATH",
        help="also write a machine-readable report (- for stdout; missing folders are made)",
    )
    parser.add_argument(
        "--junit-xml",
        metavar="PATH",
        help=f"also write a JUnit XML report for CI: one testcase per {item}, "
        "skips and deviations as skipped with their reason (missing folders are made)",
    )


def prepare_outputs(*outputs: tuple[str, str | None]) -> None:
    """Make each output file's missing folders and check it can be written, before any work.

    Each output is its flag and the path given (None when the flag is not).

    Raises:
        CliError: an output cannot be written.
    """
    for flag, target in outputs:
        prepare_file(flag, target)


def before_the_run(
    arguments: argparse.Namespace, argv: list[str] | None, /, *, export: str | None = None
) -> dict[str, object] | None:
    """Check every output path (``--json``, ``--junit-xml``, ``export``) and the adapter's start.

    ``argv`` is ``--impl-cmd`` as :func:`.preflight.adapter_argv` split it
    (None without one). Returns the adapter's ``describe`` (its name, and its
    release if it states one) for the reports; None when no ``--impl-cmd`` is
    given.

    Raises:
        CliError: an output cannot be written, or the adapter cannot be started
            or does not answer its first request.
    """
    prepare_outputs(("--json", arguments.json), ("--junit-xml", arguments.junit_xml))
    prepare_directory("--export-failures", export)
    if argv is None:
        return None
    return first_reply(arguments.impl_cmd, argv, arguments.impl_timeout)
