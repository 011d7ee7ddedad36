# SPDX-License-Identifier: MIT OR Apache-2.0
"""The command line's exit statuses, and the error that ends a command."""

from __future__ import annotations

import enum
from typing import Final

__all__ = ["CliError", "ExitStatus"]


class ExitStatus(enum.IntEnum):
    """What the command's exit status says."""

    OK = 0
    #: The implementation failed a property or a case.
    FAILED = 1
    #: The command line, a file it names, or the environment is not usable.
    USAGE = 2
    #: A bug in this package: please report it.
    INTERNAL = 70
    #: Stopped by Ctrl-C.
    INTERRUPTED = 130


class CliError(Exception):
    """A failure the user can act on: printed as one line, without a traceback."""

    def __init__(self, message: str, /, status: ExitStatus = ExitStatus.USAGE) -> None:
        super().__init__(message)
        self.status: Final = status
