# SPDX-License-Identifier: MIT OR Apache-2.0
"""The ``ssm-rollback-spec`` command: ``check``, ``vectors``, ``size`` and ``report``.

Every failure the user can cause ends in one line on stderr and a non-zero
exit status (:class:`~ssm_rollback_spec.tools.errors.ExitStatus`), never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from .. import SPEC_VERSION, __version__
from .check import add_check_command
from .errors import CliError, ExitStatus
from .results import add_report_command
from .size import add_size_command
from .vectors import add_vectors_command

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ssm-rollback-spec",
        description="Executable specification of the SSM verify-rollback mode.",
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__} (spec {SPEC_VERSION})"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_check_command(commands)
    add_vectors_command(commands)
    add_size_command(commands)
    add_report_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    arguments = _parser().parse_args(argv)
    try:
        status: int = arguments.run(arguments)
    except CliError as error:
        print(f"ssm-rollback-spec: error: {error}", file=sys.stderr)
        return error.status
    except BrokenPipeError:
        # The reader went away (`| head`): nothing more to say, and nobody to say it to.
        sys.stderr.close()
        return ExitStatus.OK
    except KeyboardInterrupt:
        print("ssm-rollback-spec: interrupted", file=sys.stderr)
        return ExitStatus.INTERRUPTED
    except Exception as error:  # noqa: BLE001 - the last guard against a traceback
        print(
            f"ssm-rollback-spec: internal error: {type(error).__name__}: {error} "
            "(please report it with the command line)",
            file=sys.stderr,
        )
        return ExitStatus.INTERNAL
    return status


if __name__ == "__main__":
    sys.exit(main())
