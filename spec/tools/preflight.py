# SPDX-License-Identifier: MIT OR Apache-2.0
"""What a command checks before its run: the paths it will write, and the adapter's first reply.

One rule for every output path (``--json``, ``--junit-xml``,
``--export-failures``, ``--plot``): missing parent folders are created, and a
path that cannot be written is refused at once, in one line naming the flag
and the operating system's error, before any work is done.

One verdict for an adapter that cannot start or does not answer its first
request: a usage error, said once, naming the command and what went wrong.
The command line splits ``--impl-cmd`` once (:func:`adapter_argv`); the
argument vector is what every later step runs.
"""

from __future__ import annotations

import errno
import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ..harness.failures import AdapterFailure, Breakage
from ..harness.subprocess_driver import SubprocessDriver, split_command
from ..harness.versions import ProtocolVersionError, described_version
from .errors import CliError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["FLUSH_HINT", "adapter_argv", "first_reply", "prepare_directory", "prepare_file"]

#: Said whenever an adapter goes silent on a request: the usual cause.
FLUSH_HINT: Final = (
    "did the adapter flush stdout after each reply? A reply left in a buffer looks like a hang."
)


def _os_error(error: OSError, /) -> str:
    # Making folders over a file says "File exists"; what the user typed
    # names a folder that is a file.
    if isinstance(error, FileExistsError):
        return os.strerror(errno.ENOTDIR)
    return error.strerror or str(error)


def prepare_file(flag: str, target: str | None, /) -> None:
    """Make ``target``'s missing parent folders and check it can be written.

    ``-`` (standard output) and None (the flag not given) need nothing. A file
    that did not exist before is not left behind by the check.

    Raises:
        CliError: a folder cannot be made, or the file cannot be written.
    """
    if target is None or target == "-":
        return
    path = Path(target)
    existed = path.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir():
            raise IsADirectoryError(21, os.strerror(21))
        with path.open("a", encoding="utf-8"):
            pass
    except OSError as error:
        raise CliError(f"{flag} {target}: {_os_error(error)}") from None
    if not existed:
        path.unlink()


def prepare_directory(flag: str, target: str | None, /) -> None:
    """Make the folder ``target`` (and its parents) and check files can be written in it.

    Raises:
        CliError: the folder cannot be made, or is not writable.
    """
    if target is None:
        return
    path = Path(target)
    try:
        path.mkdir(parents=True, exist_ok=True)
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(13, os.strerror(13))
    except OSError as error:
        raise CliError(f"{flag} {target}: {_os_error(error)}") from None


def adapter_argv(command: str, /) -> list[str]:
    """The argv of an ``--impl-cmd`` value: split once, here, and passed down from there.

    Raises:
        CliError: the command is empty or badly quoted.
    """
    try:
        return split_command(command)
    except ValueError as error:
        raise CliError(f"--impl-cmd: {error}") from None


def _cannot_start(command: str, argv: Sequence[str], failure: AdapterFailure, /) -> str:
    reason = str(failure).rpartition(" cannot be started: ")[2]
    program = argv[0]
    hint = ""
    if "/" not in program and Path(program).is_file():
        hint = f" (to run the file {program} in this folder, write ./{program})"
    return f"--impl-cmd {shlex.quote(command)}: the adapter cannot be started: {reason}{hint}"


def first_reply(command: str, argv: Sequence[str], timeout: float, /) -> dict[str, object] | None:
    """Send the adapter one ``describe``, alone, before the run; return its ``ok`` value.

    An adapter that cannot be started, or breaks on this very first request
    (silence, a crash, a reply that is not a protocol line), cannot be
    checked at all: that is said once, as a usage error, instead of failing
    every property or case after it.

    Raises:
        CliError: the adapter could not be started, broke on its first request,
            or names a protocol version this suite does not know.
    """
    driver = SubprocessDriver(argv, timeout=timeout)
    try:
        reply = driver.request({"op": "describe"})
    except AdapterFailure as failure:
        if failure.breakage is Breakage.CANNOT_START:
            raise CliError(_cannot_start(command, argv, failure)) from None
        hint = f"\n{FLUSH_HINT}" if failure.hung else ""
        raise CliError(
            f"--impl-cmd {shlex.quote(command)}: the adapter broke on its first request "
            f"(describe), so nothing was checked:\n{failure}{hint}"
        ) from None
    finally:
        # Only the first reply is asked for here; how the adapter ends is
        # judged by the run itself.
        driver.abandon()
    described = reply.get("ok")
    if not isinstance(described, dict):
        return None
    try:
        described_version(described)
    except ProtocolVersionError as error:
        # A version this suite cannot judge: one line, and nothing run.
        raise CliError(f"--impl-cmd {shlex.quote(command)}: {error}") from None
    return described
