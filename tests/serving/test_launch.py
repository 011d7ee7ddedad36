# SPDX-License-Identifier: MIT OR Apache-2.0
"""launch: servers started from a command, awaited, and ended with their whole process group."""

from __future__ import annotations

import shlex
import socket
import sys
import time
import urllib.request
from pathlib import Path
from typing import Final

import pytest

from ssm_rollback_spec.serving.errors import ServerStartError
from ssm_rollback_spec.serving.launch import started
from tests.child import alive

PYTHON: Final = shlex.quote(sys.executable)


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _group(pgid: int, /) -> list[int]:
    """The processes of group ``pgid`` that still run (zombies left out)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(") ")[2].split()
            except OSError:
                continue
            if fields[0] != "Z" and int(fields[2]) == pgid:
                found.append(int(entry.name))
    return found


def _gone(pgid: int, /, *, within: float = 2.0) -> bool:
    """Whether group ``pgid`` has no running process within ``within`` s (a kill lands late)."""
    end = time.monotonic() + within
    while _group(pgid) and time.monotonic() < end:
        time.sleep(0.01)
    return _group(pgid) == []


def _sleeper_with_a_child(pid_file: Path) -> str:
    """A command that never serves, with a child in its group, whose pids it writes."""
    code = (
        "import os, subprocess, sys, time, pathlib; "
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"pathlib.Path({str(pid_file)!r}).write_text(f'{{os.getpid()}} {{child.pid}}'); "
        "time.sleep(60)"
    )
    return f"{PYTHON} -c {shlex.quote(code)}"


def test_a_started_server_is_awaited_served_and_ended_with_its_group(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_port()}"
    command = f"{PYTHON} -m tests.fakes.openai_engine --port {url.rsplit(':', 1)[1]}"
    with started([("target", "--target", command, url)], deadline=60, logs=tmp_path) as servers:
        with urllib.request.urlopen(url + "/v1/models", timeout=5) as reply:  # noqa: S310 - loopback
            assert reply.status == 200
        leader = servers[0].process.pid
        assert _group(leader) == [leader]
    assert _gone(leader)
    assert (tmp_path / "target.log").is_file()


def test_a_command_that_exits_before_answering_is_one_line_quoting_its_last_words(
    tmp_path: Path,
) -> None:
    url = f"http://127.0.0.1:{_port()}"
    code = "import sys; print('loading'); print('CUDA out of memory'); sys.exit(3)"
    command = f"{PYTHON} -c {shlex.quote(code)}"
    with (
        pytest.raises(ServerStartError) as raised,
        started([("target", "--target", command, url)], deadline=60, logs=tmp_path),
    ):
        pytest.fail("a server that exited was taken as ready")
    assert str(raised.value) == (
        f"--target: the target server's command exited with status 3 before answering at "
        f"{url}: CUDA out of memory"
    )


def test_a_command_that_never_answers_is_one_line_and_its_group_is_gone_after(
    tmp_path: Path,
) -> None:
    url = f"http://127.0.0.1:{_port()}"
    pid_file = tmp_path / "child.pid"
    command = _sleeper_with_a_child(pid_file)
    with (
        pytest.raises(ServerStartError) as raised,
        started([("reference", "--reference", command, url)], deadline=2.0, logs=None),
    ):
        pytest.fail("a server that never answered was taken as ready")
    assert str(raised.value) == (
        f"--reference: the reference server did not answer at {url} within 2 s: "
        "(it printed nothing)"
    )
    leader, child = map(int, pid_file.read_text().split())
    assert _gone(leader)
    assert not alive(child)


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("'unclosed", '--target "\'unclosed": not a command line (No closing quotation)'),
        ("   ", "--target '   ': an empty command"),
        (
            "/nonexistent/engine --port 1",
            (
                "--target '/nonexistent/engine --port 1': cannot start '/nonexistent/engine' "
                "(No such file or directory)"
            ),
        ),
    ],
    ids=["unclosed quote", "empty", "no such program"],
)
def test_a_bad_command_line_is_one_line_and_starts_nothing(
    tmp_path: Path, command: str, message: str
) -> None:
    with (
        pytest.raises(ServerStartError) as raised,
        started([("target", "--target", command, "http://127.0.0.1:1")], deadline=1, logs=tmp_path),
    ):
        pytest.fail("a bad command was started")
    assert str(raised.value) == message
