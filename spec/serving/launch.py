# SPDX-License-Identifier: MIT OR Apache-2.0
"""Servers the command starts itself: started in process groups of their own, awaited, ended.

``serve-check --reference-cmd CMD`` starts the reference from a command line
(split as a shell would, run without one), waits until ``GET /v1/models``
answers at its URL, and ends its whole process group on every way out: a
verdict, an error, Ctrl-C or a signal. Its output goes to a log file, whose
last line an error quotes.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Final

from .errors import ServerStartError

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["Started", "end_group", "started"]

#: How long an ended group gets between SIGTERM and SIGKILL.
_GRACE: Final = 5.0
#: How often a starting server is asked whether it answers.
_POLL: Final = 0.25


class Started:
    """A server started from a command: its process, its URL and its log."""

    def __init__(self, role: str, flag: str, command: str, url: str, log: Path, /) -> None:
        self.role: Final = role
        self.flag: Final = flag
        self.url: Final = url
        self.log: Final = log
        try:
            argv = shlex.split(command)
        except ValueError as error:
            raise ServerStartError(f"{flag} {command!r}: not a command line ({error})") from None
        if not argv:
            raise ServerStartError(f"{flag} {command!r}: an empty command")
        self._argv = argv
        self._command = command
        self._output = log.open("wb")
        self.process = self._spawn()

    def _spawn(self) -> subprocess.Popen[bytes]:
        try:
            return subprocess.Popen(  # noqa: S603 - the user's own command, no shell
                self._argv,
                stdin=subprocess.DEVNULL,
                stdout=self._output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as error:
            self._output.close()
            raise ServerStartError(
                f"{self.flag} {self._command!r}: cannot start {self._argv[0]!r} "
                f"({error.strerror or error})"
            ) from None

    def restart(self, deadline: float, /) -> None:
        """End the server's process group, start its command again and wait until it answers.

        Raises:
            ServerStartError: the command could not start again, exited, or never answered.
        """
        end_group(self.process)
        self.process = self._spawn()
        self.wait_ready(deadline)

    def last_line(self) -> str:
        """The log's last non-empty line, or a note that it has none."""
        self._output.flush()
        text = self.log.read_bytes()[-8192:].decode(errors="replace")
        found = [line.strip() for line in text.splitlines() if line.strip()]
        return found[-1] if found else "(it printed nothing)"

    def wait_ready(self, deadline: float, /) -> None:
        """Return once ``GET /v1/models`` answers; raise if the process exits or time runs out.

        Raises:
            ServerStartError: the command exited first, or never answered within ``deadline`` s.
        """
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            status = self.process.poll()
            if status is not None:
                raise ServerStartError(
                    f"{self.flag}: the {self.role} server's command exited with status "
                    f"{status} before answering at {self.url}: {self.last_line()}"
                )
            try:
                with urllib.request.urlopen(self.url + "/v1/models", timeout=2):  # noqa: S310 - http(s) only
                    return
            except urllib.error.HTTPError as error:
                error.close()
                # 503: still loading its model (llama-server says so); any other answer is ready.
                if error.code != HTTPStatus.SERVICE_UNAVAILABLE:
                    return
                time.sleep(_POLL)
            except (urllib.error.URLError, OSError):
                time.sleep(_POLL)
        raise ServerStartError(
            f"{self.flag}: the {self.role} server did not answer at {self.url} within "
            f"{deadline:g} s: {self.last_line()}"
        )

    def end(self) -> None:
        """End the server's whole process group, and close its log."""
        end_group(self.process)
        self._output.close()


def end_group(process: subprocess.Popen[bytes], /) -> None:
    """SIGTERM the process group ``process`` leads, then SIGKILL what is left after a grace."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(_GRACE)
    # The leader may be gone while its group lives on (an engine's workers).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(_GRACE)


@contextlib.contextmanager
def started(
    commands: list[tuple[str, str, str, str]], /, *, deadline: float, logs: Path | None
) -> Iterator[list[Started]]:
    """Start each ``(role, flag, command, url)``, wait until all answer, and end them all after.

    Logs go to ``logs`` (kept) or a temporary folder (removed).

    Raises:
        ServerStartError: a command could not start, exited, or never answered.
    """
    with contextlib.ExitStack() as stack:
        folder = logs
        if folder is None:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="serve-check-")))
        folder.mkdir(parents=True, exist_ok=True)
        servers: list[Started] = []
        try:
            for role, flag, command, url in commands:
                server = Started(role, flag, command, url, folder / f"{role}.log")
                servers.append(server)
            for server in servers:
                server.wait_ready(deadline)
            yield servers
        finally:
            for server in servers:
                server.end()
