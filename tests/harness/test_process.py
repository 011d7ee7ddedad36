# SPDX-License-Identifier: MIT OR Apache-2.0
"""The adapter process engine: lines, deadlines, end of output, stderr's tail, the group's kill."""

from __future__ import annotations

import sys
import time
from typing import Final

from ssm_rollback_spec.harness.process import (
    MAX_PENDING_OUTPUT,
    STDERR_TAIL_BYTES,
    AdapterProcess,
    Timeout,
)
from tests.child import alive

#: Generous: only a broken engine waits this long; a working one returns at once.
SECONDS: Final = 60.0

ECHO: Final = "import sys\nfor line in sys.stdin:\n    sys.stdout.write(line); sys.stdout.flush()"


def _python(source: str, /) -> AdapterProcess:
    return AdapterProcess([sys.executable, "-c", source])


def _soon() -> float:
    return time.monotonic() + SECONDS


def test_each_line_written_comes_back_and_end_of_input_ends_the_output() -> None:
    adapter = _python(ECHO)
    try:
        adapter.write(b"one\ntwo\n")
        assert adapter.read_line(_soon()) == b"one\n"
        assert adapter.read_line(_soon()) == b"two\n"
        adapter.close_input()
        assert adapter.read_line(_soon()) is None
        assert adapter.wait_exit(_soon()) == 0
        assert adapter.returncode == 0
    finally:
        adapter.kill()


def test_a_silent_process_gives_a_timeout_at_the_deadline_not_a_line() -> None:
    adapter = _python("import time; time.sleep(600)")
    try:
        started = time.monotonic()
        assert adapter.read_line(started + 0.2) is Timeout.TIMEOUT
        assert time.monotonic() - started < SECONDS
        assert adapter.wait_exit(time.monotonic() + 0.1) is None
        assert adapter.returncode is None
    finally:
        adapter.kill()
    assert not alive(adapter.pid)


def test_output_without_a_final_newline_is_the_last_line() -> None:
    adapter = _python("import sys; sys.stdout.write('first\\nrest')")
    try:
        assert adapter.read_line(_soon()) == b"first\n"
        assert adapter.read_line(_soon()) == b"rest"
        assert adapter.read_line(_soon()) is None
        assert adapter.wait_end_of_output(_soon())
    finally:
        adapter.kill()


def test_a_line_that_never_ends_is_handed_over_once_the_bound_is_held() -> None:
    source = f"import sys, time; sys.stdout.write('x' * {2 * MAX_PENDING_OUTPUT}); time.sleep(600)"
    adapter = _python(source)
    try:
        line = adapter.read_line(_soon())
        assert isinstance(line, bytes)
        assert MAX_PENDING_OUTPUT <= len(line) < 2 * MAX_PENDING_OUTPUT
        assert line == b"x" * len(line)
    finally:
        adapter.kill()


def test_only_the_tail_of_stderr_is_kept() -> None:
    source = (
        "import sys\n"
        "sys.stderr.write('a' * 5000 + 'END'); sys.stderr.flush()\n"
        "sys.stdout.write('done\\n')"
    )
    adapter = _python(source)
    try:
        assert adapter.read_line(_soon()) == b"done\n"
        assert adapter.wait_end_of_output(_soon())
        assert adapter.wait_exit(_soon()) == 0
        tail = adapter.stderr_tail()
    finally:
        adapter.kill()
    assert tail == "a" * (STDERR_TAIL_BYTES - 3) + "END"


def test_unread_output_is_what_arrived_without_waiting_for_more() -> None:
    # Both lines in one write: the read that brings the first brings the second.
    adapter = _python(
        "import sys, time; sys.stdout.write('a\\nb\\n'); sys.stdout.flush(); time.sleep(600)"
    )
    try:
        assert adapter.read_line(_soon()) == b"a\n"
        assert adapter.unread_output() == b"b\n"
        assert adapter.unread_output() == b""
    finally:
        adapter.kill()


def test_the_kill_reaches_the_processes_the_adapter_started() -> None:
    source = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(600)"
    )
    adapter = _python(source)
    try:
        line = adapter.read_line(_soon())
        assert isinstance(line, bytes)
        grandchild = int(line)
        assert alive(grandchild)
    finally:
        adapter.kill()
    deadline = _soon()
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(adapter.pid)
    assert not alive(grandchild)


def test_writing_after_the_input_is_closed_is_ignored() -> None:
    adapter = _python(ECHO)
    try:
        adapter.close_input()
        adapter.write(b"late\n")
        assert adapter.read_line(_soon()) is None
        assert adapter.wait_exit(_soon()) == 0
    finally:
        adapter.kill()
