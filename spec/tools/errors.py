# SPDX-License-Identifier: MIT OR Apache-2.0
"""The command line's exit statuses, the error that ends a command, and its parsers' errors."""

from __future__ import annotations

import argparse
import enum
import re
from typing import TYPE_CHECKING, Final, NoReturn

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["ERROR_PREFIX", "CliError", "ExitStatus", "OneLineParser"]

#: How every error line of the command line begins: a bad flag's, as
#: :class:`OneLineParser` words it, and a :class:`CliError`'s, as ``cli.py`` prints it.
ERROR_PREFIX: Final = "ssm-rollback-spec: error:"


class ExitStatus(enum.IntEnum):
    """What the command's exit status says."""

    OK = 0
    #: The implementation failed a property or a case.
    FAILED = 1
    #: The command line, a file it names, or the environment is not usable.
    USAGE = 2
    #: Nothing the verdict needs was observed (serve-check: no draft accepted).
    NOT_OBSERVED = 3
    #: A bug in this package: please report it.
    INTERNAL = 70
    #: Stopped by SIGHUP (each stop signal's status is 128 + its number).
    HUNG_UP = 129
    #: Stopped by Ctrl-C (SIGINT).
    INTERRUPTED = 130
    #: Stopped by SIGTERM.
    TERMINATED = 143


class CliError(Exception):
    """A failure the user can act on: printed as one line, without a traceback."""

    def __init__(self, message: str, /, status: ExitStatus = ExitStatus.USAGE) -> None:
        super().__init__(message)
        self.status: Final = status


class OneLineParser(argparse.ArgumentParser):
    """A parser whose bad flag is one line, exit 2, as every other error of the command line.

    The line begins :data:`ERROR_PREFIX`, names the flag and what was wrong
    with it, and ends with where to look: ``(see ssm-rollback-spec check --help)``.
    A command's parser refuses what it does not know itself, so that the line
    names the command's own help, not the root's.
    """

    def error(self, message: str) -> NoReturn:  # noqa: D102 - the class says it
        found = re.fullmatch(r"argument (\S+?)(?:/\S+)?: (.*)", message, flags=re.DOTALL)
        line = " ".join((message if found is None else f"{found[1]}: {found[2]}").split())
        self.exit(2, f"{ERROR_PREFIX} {line} (see {self.prog} --help)\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Parse, refusing any argument this parser and its commands do not know, in one line."""
        parsed, extra = super().parse_known_args(args, namespace)
        if extra:
            self.error(f"unrecognized arguments: {' '.join(extra)}")
        return parsed, extra
