# SPDX-License-Identifier: MIT OR Apache-2.0
"""No child outlives the command: SIGTERM, SIGINT and SIGHUP end every child process group at once.

Each child this package starts leads a process group of its own and is
tracked here while it runs: every adapter (:class:`.process.AdapterProcess`)
and ``check``'s property suite (:func:`group_started`). Within
:func:`stopping_on_signals` (the command line's ``main``, and the suite's
pytest that ``check`` starts), each of :data:`STOP_SIGNALS` first ends every
tracked group (SIGTERM, then SIGKILL for what is left after the group's
grace), then raises :class:`Stopped` in the main thread, so every ``finally``
and context manager runs on the way out. The suite's pytest does the same for
its own adapters when ``check`` ends its group. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from typing import TYPE_CHECKING, Any, Final, NoReturn

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from types import FrameType

__all__ = [
    "ADAPTER_GRACE",
    "STOP_SIGNALS",
    "SUITE_GRACE",
    "Stopped",
    "end_groups",
    "group_started",
    "stopping_on_signals",
    "track",
    "untrack",
]

#: The signals that stop a command, each ending every child group first.
STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: Seconds an adapter's group has after SIGTERM before SIGKILL.
ADAPTER_GRACE: Final = 0.2
#: Seconds the suite's pytest has after SIGTERM: longer than an adapter's, so
#: that it ends its own adapters before it can be killed.
SUITE_GRACE: Final = 0.6
_POLL_SECONDS: Final = 0.01

# Each tracked group's leader, by its process ID, with its grace.
_tracked: dict[int, tuple[subprocess.Popen[Any], float]] = {}


class Stopped(KeyboardInterrupt):
    """The command was stopped by ``signum``; a KeyboardInterrupt, so pytest ends as for Ctrl-C."""

    def __init__(self, signum: int, /) -> None:
        super().__init__(signum)
        self.signum: Final = signum

    @property
    def status(self) -> int:
        """The exit status it ends the command with: 128 + the signal's number."""
        return 128 + self.signum

    def __str__(self) -> str:
        return f"stopped by {signal.Signals(self.signum).name}"


def track(process: subprocess.Popen[Any], grace: float, /) -> None:
    """End ``process``'s group, which it leads, with the others when a stop signal comes."""
    _tracked[process.pid] = (process, grace)


def untrack(process: subprocess.Popen[Any], /) -> None:
    """Stop tracking ``process``: it has been ended and reaped."""
    _tracked.pop(process.pid, None)


def _exited(pid: int, /) -> bool:
    # Whether the leader has exited, without reaping it: its owner still waits for it.
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _signal_group(pid: int, signum: int, /) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


def end_groups(groups: Sequence[tuple[subprocess.Popen[Any], float]], /) -> None:
    """SIGTERM each group, then SIGKILL each one after its grace (or once its leader exits)."""
    start = time.monotonic()
    for process, _ in groups:
        _signal_group(process.pid, signal.SIGTERM)
    waiting = list(groups)
    while waiting:
        now = time.monotonic()
        for entry in list(waiting):
            process, grace = entry
            if _exited(process.pid) or now >= start + grace:
                # The leader may be gone while its group lives on.
                _signal_group(process.pid, signal.SIGKILL)
                waiting.remove(entry)
        if waiting:
            time.sleep(_POLL_SECONDS)


def _stop(signum: int, _: FrameType | None, /) -> NoReturn:
    end_groups(list(_tracked.values()))
    raise Stopped(signum)


@contextlib.contextmanager
def stopping_on_signals() -> Iterator[None]:
    """Within it, each of :data:`STOP_SIGNALS` ends every tracked group, then raises Stopped.

    The handlers before it are put back after. Outside the main thread, where
    Python cannot install a handler, it changes nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {signum: signal.signal(signum, _stop) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def group_started(
    argv: Sequence[str],
    /,
    *,
    grace: float,
    **options: Any,  # noqa: ANN401 - Popen's own
) -> Iterator[subprocess.Popen[str]]:
    """``subprocess.Popen(argv, text=True, **options)`` leading a tracked group of its own.

    On the way out, however it is left, whatever of the group still runs is
    ended (SIGTERM, SIGKILL after ``grace``) and the leader reaped.
    """
    # This interpreter or the user's own command, never a shell.
    process = subprocess.Popen(list(argv), text=True, start_new_session=True, **options)  # noqa: S603
    track(process, grace)
    try:
        yield process
    finally:
        end_groups([(process, grace)] if process.poll() is None else [])
        with contextlib.suppress(OSError):
            for stream in (process.stdout, process.stderr, process.stdin):
                if stream is not None:
                    stream.close()
        process.wait()
        untrack(process)
