# SPDX-License-Identifier: MIT OR Apache-2.0
"""Stop a command of this project mid-run with a signal, and find what is left of its processes.

:func:`stop_midway` starts ``python -m ssm_rollback_spec.tools.cli ARGUMENTS``,
waits until a child of it writes its pid to a file (an adapter or a server
made for the test, as ``tests/fakes/slow_adapter.py``), sends the command one
signal, and reports, one second later, every process of the command's tree as
it was then (the command, its children and theirs, and every process of a
group one of them led) that still runs. Linux only: it reads ``/proc``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from tests.child import ROOT, alive

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["Stop", "stop_midway"]

_POLL_SECONDS: Final = 0.02


@dataclass(frozen=True)
class Stop:
    """What a signal to a command left: its exit status, its stderr, and what still runs."""

    #: The command's exit status, None if it still ran a second after the signal.
    status: int | None
    stderr: str
    #: The processes of its tree, as it was when the signal was sent.
    tree: frozenset[int]
    #: Those of them, or of the groups they led, still running a second after.
    left: frozenset[int]


def _processes() -> dict[int, tuple[int, int]]:
    """Every running process (zombies left out): its parent and its process group."""
    found: dict[int, tuple[int, int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            fields = (entry / "stat").read_text().rpartition(") ")[2].split()
            if fields[0] != "Z":
                found[int(entry.name)] = (int(fields[1]), int(fields[2]))
    return found


def _tree(root: int, /) -> tuple[frozenset[int], frozenset[int]]:
    """``root`` and its descendants now, and the process groups they lead."""
    processes = _processes()
    tree, grown = {root}, True
    while grown:
        children = {pid for pid, (parent, _) in processes.items() if parent in tree}
        grown = not children <= tree
        tree |= children
    leaders = frozenset(pid for pid in tree if processes.get(pid, (0, 0))[1] == pid)
    return frozenset(tree), leaders


def _left(tree: frozenset[int], groups: frozenset[int], /) -> frozenset[int]:
    return frozenset(
        pid
        for pid, (_, group) in _processes().items()
        if (pid in tree or group in groups) and alive(pid)
    )


def stop_midway(
    arguments: Sequence[str],
    pid_file: Path,
    signum: int,
    /,
    *,
    up_within: float = 120.0,
    within: float = 1.0,
) -> Stop:
    """Run the command line with ``arguments``, and send it ``signum`` once ``pid_file`` is written.

    ``up_within`` bounds the wait for ``pid_file`` (the command is killed,
    and AssertionError raised with its output, if it never comes); what is
    left is looked for ``within`` seconds of the signal, and killed after,
    so that a failing test leaves nothing behind either.
    """
    env = {**os.environ}
    for name in ("SSM_ROLLBACK_IMPL_CMD", "SSM_ROLLBACK_IMPL_MODULE"):
        env.pop(name, None)
    out = pid_file.with_name(f"{pid_file.name}.out")
    err = pid_file.with_name(f"{pid_file.name}.err")
    with out.open("wb") as stdout, err.open("wb") as stderr:
        command = subprocess.Popen(
            [sys.executable, "-m", "ssm_rollback_spec.tools.cli", *arguments],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
    tree, groups = frozenset({command.pid}), frozenset({command.pid})
    try:
        deadline = time.monotonic() + up_within
        while not pid_file.exists():
            if command.poll() is not None or time.monotonic() > deadline:
                output = out.read_text("utf-8", "replace") + err.read_text("utf-8", "replace")
                raise AssertionError(f"no pid came within {up_within} s:\n{output[-3000:]}")
            time.sleep(_POLL_SECONDS)
        tree, groups = _tree(command.pid)
        signalled = time.monotonic()
        command.send_signal(signum)
        left = _left(tree, groups)
        while left and time.monotonic() < signalled + within:
            time.sleep(_POLL_SECONDS)
            command.poll()
            left = _left(tree, groups)
        return Stop(command.poll(), err.read_text("utf-8", "replace"), tree, left)
    finally:
        for pid in _left(tree, groups) | {command.pid}:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        command.wait()
