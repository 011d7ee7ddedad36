# SPDX-License-Identifier: MIT OR Apache-2.0
"""No process outlives the command: a stop signal mid-run ends its whole tree within a second.

Each command that starts an adapter over ``--impl-cmd`` is stopped while
``tests/fakes/slow_adapter.py`` sits on a request with a child of its own,
by SIGTERM, SIGINT and SIGHUP in turn (``tests/stopping.py``). ``check``'s
tree is deeper: the property suite's pytest, its adapter and the adapter's
child.
"""

from __future__ import annotations

import shlex
import signal
import socket
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
#: SIGTERM every day; SIGINT and SIGHUP, which take the same path once caught
#: (test_each_stop_signal_has_its_exit_status tells them apart every day), with
#: the long runs.
_SIGNAL_PARAMS: Final = (
    pytest.param(signal.SIGTERM, id="SIGTERM"),
    pytest.param(signal.SIGINT, id="SIGINT", marks=pytest.mark.slow),
    pytest.param(signal.SIGHUP, id="SIGHUP", marks=pytest.mark.slow),
)


@pytest.mark.parametrize("signum", _SIGNAL_PARAMS)
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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("signum", _SIGNAL_PARAMS)
def test_a_stop_signal_mid_request_ends_the_servers_serve_check_started_within_a_second(
    tmp_path: Path, signum: int
) -> None:
    pid_file = tmp_path / "target.pid"
    engine = f"{shlex.quote(sys.executable)} -m tests.fakes.openai_engine"
    reference, target = _free_port(), _free_port()
    arguments = [
        "serve-check",
        "--reference",
        f"http://127.0.0.1:{reference}",
        "--reference-cmd",
        f"{engine} --port {reference}",
        "--target",
        f"http://127.0.0.1:{target}",
        "--target-cmd",
        f"{engine} --port {target} --spec ngram --hang-after 0 --pid-file {pid_file}",
        "--start-timeout",
        "60",
        "--vocab-size",
        "64",
    ]
    stop = stop_midway(arguments, pid_file, signum)
    target_pid = int(pid_file.read_text(encoding="utf-8"))
    # Both servers were up, the target on a request, in the tree the signal was sent to.
    assert target_pid in stop.tree
    assert len(stop.tree) >= 3
    assert stop.left == frozenset()
    assert stop.status == 128 + signum
    assert stop.stderr.splitlines()[-1] == (
        f"ssm-rollback-spec: stopped by {signal.Signals(signum).name}"
    )
