# SPDX-License-Identifier: MIT OR Apache-2.0
"""No process outlives the command: a stop signal mid-run ends its whole tree within a second.

Each command that starts an adapter over ``--impl-cmd`` is stopped while
``tests/fakes/slow_adapter.py`` sits on a request with a child of its own,
by SIGTERM, SIGINT and SIGHUP in turn (``tests/stopping.py``). ``check``'s
tree is deeper: the property suite's pytest, its adapter and the adapter's
child.
"""

from __future__ import annotations

import signal
import sys
from typing import TYPE_CHECKING, Final

import pytest

from ssm_rollback_spec.harness.signals import Stopped
from ssm_rollback_spec.tools.errors import ExitStatus
from tests.stopping import stop_midway

if TYPE_CHECKING:
    from pathlib import Path

_COMMANDS: Final = {"check": ("check",), "vectors run": ("vectors", "run")}
_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@pytest.mark.parametrize("signum", _SIGNALS, ids=lambda signum: signal.Signals(signum).name)
@pytest.mark.parametrize("command", _COMMANDS)
def test_a_stop_signal_mid_run_leaves_no_process_of_the_command_within_a_second(
    tmp_path: Path, command: str, signum: int
) -> None:
    pid_file = tmp_path / "adapter.pid"
    adapter = f"{sys.executable} -m tests.fakes.slow_adapter {pid_file}"
    arguments = [*_COMMANDS[command], "--impl-cmd", adapter, "--impl-timeout", "120"]
    stop = stop_midway(arguments, pid_file, signum)
    adapter_pid, child_pid = map(int, pid_file.read_text(encoding="utf-8").split())
    # The adapter and its own child were up, in the tree the signal was sent to.
    assert {adapter_pid, child_pid} <= stop.tree
    assert len(stop.tree) >= (4 if command == "check" else 3)
    assert stop.left == frozenset()
    assert stop.status == 128 + signum
    assert stop.stderr.splitlines()[-1] == (
        f"ssm-rollback-spec: stopped by {signal.Signals(signum).name}"
    )


def test_each_stop_signal_has_its_exit_status() -> None:
    assert [Stopped(signum).status for signum in _SIGNALS] == [
        ExitStatus.TERMINATED,
        ExitStatus.INTERRUPTED,
        ExitStatus.HUNG_UP,
    ]
    assert str(Stopped(signal.SIGHUP)) == "stopped by SIGHUP"
