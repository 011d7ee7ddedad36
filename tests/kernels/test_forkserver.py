# SPDX-License-Identifier: MIT OR Apache-2.0
"""The fork server the tier runs its adapters through (adapters/engines/forkserver.py).

A fork must be indistinguishable, to the command line that started it, from
the adapter run as a process of its own: the same replies on the same
streams, the same exit status; and it must not outlive its caller.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pytest

from adapters.engines.forkserver import PRELOADED, SOCKET_VARIABLE
from tests.child import ROOT
from tests.kernels.engines import fork_server

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.kernels

_DESCRIBE: Final = '{"op":"describe"}\n'
#: The server started with Triton imported ahead of it.
_TRITON_FIRST: Final = (
    "import sys, triton; from adapters.engines import forkserver; "
    "sys.exit(forkserver.main(['serve', sys.argv[1]]))"
)
#: vLLM's adapter, refusing a release number it cannot read: one line, status 2.
_MALFORMED: Final = ("adapters.engines.vllm", "--version", "latest")


@pytest.fixture(scope="module")
def server(kernels_python: str) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A fork server of this module's own, and its socket's path, once it listens."""
    with fork_server(kernels_python) as started:
        yield started


def _forks(server: subprocess.Popen[bytes], /) -> set[int]:
    children = Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text(encoding="utf-8")
    return {int(pid) for pid in children.split()}


def _run(python: str, socket: str, /, *argv: str, forked: bool) -> subprocess.CompletedProcess[str]:
    module = ["-m", "adapters.engines.forkserver", "run"] if forked else ["-m"]
    return subprocess.run(
        [python, *module, *argv],
        cwd=ROOT,
        env={**os.environ, SOCKET_VARIABLE: socket},
        input=_DESCRIBE,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@contextlib.contextmanager
def _caller(python: str, socket: str, /) -> Iterator[subprocess.Popen[str]]:
    """``run`` of vLLM's adapter, its input and output piped; killed and closed after."""
    with subprocess.Popen(
        [python, "-m", "adapters.engines.forkserver", "run", "adapters.engines.vllm"],
        cwd=ROOT,
        env={**os.environ, SOCKET_VARIABLE: socket},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as caller:
        try:
            yield caller
        finally:
            caller.kill()


def _seen(finished: subprocess.CompletedProcess[str], /) -> tuple[int, str, str]:
    return finished.returncode, finished.stdout, finished.stderr


def test_a_fork_replies_and_exits_as_the_adapter_run_alone_does(
    kernels_python: str, server: tuple[subprocess.Popen[bytes], str]
) -> None:
    process, socket = server
    described = _run(kernels_python, socket, "adapters.engines.vllm", forked=False)
    assert "ok" in json.loads(described.stdout.splitlines()[0])
    assert _seen(_run(kernels_python, socket, "adapters.engines.vllm", forked=True)) == _seen(
        described
    )
    refused = _run(kernels_python, socket, *_MALFORMED, forked=False)
    assert refused.returncode == 2
    assert _seen(_run(kernels_python, socket, *_MALFORMED, forked=True)) == _seen(refused)
    # The fork, while it runs, is the server's child, not a process of its own.
    with _caller(kernels_python, socket) as caller:
        assert caller.stdin is not None
        assert caller.stdout is not None
        caller.stdin.write(_DESCRIBE)
        caller.stdin.flush()
        assert "ok" in json.loads(caller.stdout.readline())
        assert len(_forks(process)) == 1
        caller.stdin.close()
        assert caller.wait(timeout=60) == 0


def test_a_fork_dies_with_its_caller(
    kernels_python: str, server: tuple[subprocess.Popen[bytes], str]
) -> None:
    process, socket = server
    with _caller(kernels_python, socket) as caller:
        assert caller.stdin is not None
        assert caller.stdout is not None
        caller.stdin.write(_DESCRIBE)
        caller.stdin.flush()
        caller.stdout.readline()
        [fork] = _forks(process)
        caller.kill()
    deadline = time.monotonic() + 30
    while Path(f"/proc/{fork}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{fork}").exists()
    assert _forks(process) == set()


def test_run_where_no_server_answers_is_the_adapter_run_alone(kernels_python: str) -> None:
    nowhere = str(ROOT / "build" / "no-such-socket")
    alone = _run(kernels_python, nowhere, *_MALFORMED, forked=False)
    forked = _run(kernels_python, nowhere, *_MALFORMED, forked=True)
    assert alone.returncode == 2
    assert _seen(forked) == _seen(alone)


def test_the_server_refuses_to_start_with_triton_imported_ahead_of_the_engines(
    kernels_python: str, tmp_path: Path
) -> None:
    # Each engine imports its own Triton and sets torch's compiler up first:
    # a preloaded module that brought either would decide it for them.
    started = subprocess.run(
        [
            kernels_python,
            "-c",
            _TRITON_FIRST,
            str(tmp_path / "socket"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert (started.returncode, started.stderr) == (
        1,
        "the fork server would import triton ahead of the engines\n",
    )
    assert not (tmp_path / "socket").exists()


#: How the engines' page writes a count in words.
_WORDS: Final = (
    "zero", "one", "two", "three", "four", "five", "six",
    "seven", "eight", "nine", "ten", "eleven", "twelve",
)  # fmt: skip


def test_the_engines_page_names_every_module_the_server_imports_ahead() -> None:
    # The page's paragraph on the fork server, whitespace normalised: it names
    # each module PRELOADED lists, and any count of them it states is theirs.
    page = (ROOT / "docs" / "engines.md").read_text(encoding="utf-8")
    [paragraph] = [
        " ".join(block.split())
        for block in page.split("\n\n")
        if block.startswith("**Adapters started as forks")
    ]
    assert [name for name in PRELOADED if not re.search(rf"\b{name}\b", paragraph)] == []
    stated = [word for word in re.findall(r"\bthose (\w+)\b", paragraph) if word in _WORDS]
    assert [_WORDS.index(word) for word in stated] == [len(PRELOADED)] * len(stated)
