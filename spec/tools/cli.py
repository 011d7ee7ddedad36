# SPDX-License-Identifier: MIT OR Apache-2.0
"""The ``ssm-rollback-spec`` command: ``check``, ``vectors``, ``size``, ``report``, ``serve-check``.

Every failure the user can cause ends in one line on stderr and a non-zero
exit status (:class:`~ssm_rollback_spec.tools.errors.ExitStatus`), never a traceback.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Final

from .. import SPEC_VERSION, __version__
from ..harness.signals import Stopped, stopping_on_signals
from .errors import ERROR_PREFIX, CliError, ExitStatus, OneLineParser

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

__all__ = ["main"]

#: Each command: its module in this package (whose ``add_arguments`` gives it its
#: options) and the line ``--help`` lists it by.
_COMMANDS: Final = {
    "check": ("check", "run the property suite against an implementation"),
    "vectors": ("vectors", "generate, locate or run the vector corpus"),
    "size": ("size", "size the replay ring (and the engines' snapshot state) for a design review"),
    "report": ("report", "put the JSON reports of check and vectors run side by side on one page"),
    "serve-check": (
        "serve_check",
        "judge a server's speculative decoding against its plain decoding (OpenAI API)",
    ),
}


def _parser(argv: list[str], /) -> argparse.ArgumentParser:
    # Every parser below is a OneLineParser too: argparse makes a command's of its parent's type.
    parser = OneLineParser(
        prog="ssm-rollback-spec",
        description="Executable specification of the SSM verify-rollback mode.",
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__} (spec {SPEC_VERSION})"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, summary) in _COMMANDS.items():
        command = commands.add_parser(name, help=summary)
        # Only the command asked for is imported and given its options: each
        # pulls in its own floors (the sizing, the suite), which a run of
        # another would pay for at every start. The root takes no option
        # before the command but --help and --version, so it is argv's first.
        if argv[:1] == [name]:
            importlib.import_module(f".{module}", __package__).add_arguments(command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    given = sys.argv[1:] if argv is None else list(argv)
    arguments = _parser(given).parse_args(given)
    try:
        # SIGTERM, SIGINT and SIGHUP end every child group at once, then raise Stopped.
        with stopping_on_signals():
            status: int = arguments.run(arguments)
    except CliError as error:
        print(f"{ERROR_PREFIX} {error}", file=sys.stderr)
        return error.status
    except BrokenPipeError:
        # The reader went away (`| head`): nothing more to say, and nobody to say it to.
        sys.stderr.close()
        return ExitStatus.OK
    except Stopped as stop:
        print(f"ssm-rollback-spec: {stop}", file=sys.stderr)
        return stop.status
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
