# SPDX-License-Identifier: MIT OR Apache-2.0
"""The one I/O engine for adapter processes, long-lived and fresh alike.

One selector watches the adapter's stdin, stdout, stderr and (on Linux) a
pidfd for its exit, and every wait has a deadline: no read or write can
block past it, whatever the adapter or its children do with their pipes.
"""

from __future__ import annotations

import contextlib
import enum
import os
import selectors
import signal
import subprocess
import time
from typing import TYPE_CHECKING, Final, Literal

from .signals import ADAPTER_GRACE, track, untrack

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["MAX_PENDING_OUTPUT", "STDERR_TAIL_BYTES", "AdapterProcess", "Timeout"]

#: Bytes of stderr kept for failure messages.
STDERR_TAIL_BYTES: Final = 2000

#: Bytes of stdout held without a newline before they are handed over as one (bad) line.
MAX_PENDING_OUTPUT: Final = 1 << 22

_READ_CHUNK: Final = 1 << 16
# Without a pidfd the exit is noticed by polling, this often.
_POLL_SECONDS: Final = 0.05
_REAP_SECONDS: Final = 5.0


class Timeout(enum.Enum):
    """The deadline passed before what was waited for."""

    TIMEOUT = enum.auto()


class AdapterProcess:
    """One running adapter command in a process group of its own.

    Raises:
        OSError: the command cannot be started (from the constructor).
    """

    def __init__(self, argv: Sequence[str], /) -> None:
        # Running the user's own adapter is the point; argv, never a shell.
        self._process = subprocess.Popen(  # noqa: S603
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        # Ended with every other child group when the command is stopped (.signals).
        track(self._process, ADAPTER_GRACE)
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        assert self._process.stderr is not None
        self._stdin = self._process.stdin
        self._out_fd = self._process.stdout.fileno()
        self._err_fd = self._process.stderr.fileno()
        self._in_fd = self._stdin.fileno()
        for fd in (self._out_fd, self._err_fd, self._in_fd):
            os.set_blocking(fd, False)
        self._out = bytearray()
        self._out_eof = False
        self._err = bytearray()
        self._pending = bytearray()
        self._close_input_when_sent = False
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._out_fd, selectors.EVENT_READ)
        self._selector.register(self._err_fd, selectors.EVENT_READ)
        self._pidfd = _pidfd(self._process.pid)
        if self._pidfd is not None:
            self._selector.register(self._pidfd, selectors.EVENT_READ)
        self._killed = False

    @property
    def pid(self) -> int:
        """The adapter's process ID, which is also its process group's."""
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        """The exit status, once the adapter has been seen to exit."""
        return self._process.returncode

    def stderr_tail(self) -> str:
        """The last ``STDERR_TAIL_BYTES`` of the adapter's stderr, as text."""
        return self._err.decode("utf-8", "replace")

    def write(self, data: bytes, /) -> None:
        """Queue ``data`` for stdin; it is written as the pipe drains, while waiting."""
        if self._stdin.closed:
            return
        if not self._pending:
            self._selector.register(self._in_fd, selectors.EVENT_WRITE)
        self._pending += data

    def close_input(self) -> None:
        """End stdin once everything queued has been written."""
        self._close_input_when_sent = True
        if not self._pending:
            self._close_stdin()

    def read_line(self, deadline: float, /) -> bytes | Literal[Timeout.TIMEOUT] | None:
        """The next stdout line (newline included), None at end of output, or ``TIMEOUT``."""
        past = False
        while True:
            end = self._out.find(b"\n")
            if end >= 0 or len(self._out) >= MAX_PENDING_OUTPUT:
                cut = end + 1 if end >= 0 else len(self._out)
                line = bytes(self._out[:cut])
                del self._out[:cut]
                return line
            if self._out_eof:
                rest = bytes(self._out)
                self._out.clear()
                return rest or None
            if past:
                return Timeout.TIMEOUT
            past = not self._pump(deadline)

    def unread_output(self) -> bytes:
        """Whatever stdout holds now that nobody has read, without waiting for more."""
        self._pump(time.monotonic())
        rest = bytes(self._out)
        self._out.clear()
        return rest

    def wait_exit(self, deadline: float, /) -> int | None:
        """The exit status, waiting until ``deadline``; None if still running."""
        past = False
        while self._process.poll() is None:
            if past:
                return None
            past = not self._pump(deadline)
        return self._process.returncode

    def wait_end_of_output(self, deadline: float, /) -> bool:
        """Read stdout to its end, until ``deadline``; whether the end came."""
        past = False
        while not self._out_eof:
            if past:
                return False
            past = not self._pump(deadline)
        return True

    def _pump(self, deadline: float, /) -> bool:
        # One round of the selector; False once the deadline has passed, so
        # an adapter that never stops writing cannot keep a wait going.
        remaining = deadline - time.monotonic()
        if self._pidfd is None and self._process.returncode is None:
            remaining = min(remaining, _POLL_SECONDS)
            self._process.poll()
        if not self._selector.get_map():
            if remaining > 0:
                time.sleep(remaining)
            return time.monotonic() < deadline
        for key, _ in self._selector.select(max(remaining, 0)):
            self._handle(key.fd)
        return time.monotonic() < deadline

    def _handle(self, fd: int, /) -> None:
        if fd == self._pidfd:
            self._selector.unregister(fd)
            self._process.poll()
        elif fd == self._in_fd:
            self._send_some()
        else:
            try:
                data = os.read(fd, _READ_CHUNK)
            except BlockingIOError:
                return
            if not data:
                self._selector.unregister(fd)
                if fd == self._out_fd:
                    self._out_eof = True
            elif fd == self._out_fd:
                self._out += data
            else:
                self._err += data
                del self._err[:-STDERR_TAIL_BYTES]

    def _send_some(self) -> None:
        try:
            sent = os.write(self._in_fd, self._pending)
        except BlockingIOError:
            return
        except OSError:
            # The adapter is gone; what it never read, it never answers.
            sent = len(self._pending)
        del self._pending[:sent]
        if not self._pending:
            self._selector.unregister(self._in_fd)
            if self._close_input_when_sent:
                self._close_stdin()

    def _close_stdin(self) -> None:
        if self._pending:
            self._pending.clear()
            self._selector.unregister(self._in_fd)
        with contextlib.suppress(OSError):
            self._stdin.close()

    def kill_group(self) -> None:
        """Kill the adapter's whole process group and reap the adapter; pipes stay open."""
        # The adapter leads its own session, so this reaches its children too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=_REAP_SECONDS)

    def kill(self) -> None:
        """Kill the adapter's whole process group, reap it and close every pipe."""
        if self._killed:
            return
        self._killed = True
        self.kill_group()
        untrack(self._process)
        self._selector.close()
        if self._pidfd is not None:
            os.close(self._pidfd)
        self._pending.clear()
        for stream in (self._stdin, self._process.stdout, self._process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def _pidfd(pid: int, /) -> int | None:
    # A pidfd turns readable when the process exits (Linux 5.3 and later).
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None
