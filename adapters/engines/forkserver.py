# SPDX-License-Identifier: MIT OR Apache-2.0
"""Engine adapters started as forks of one process that has imported torch already.

Each adapter the kernels tier starts spends seconds importing torch, numpy,
transformers and pydantic (and, for vLLM's configuration, the rest of
:data:`PRELOADED`) before it reads its first request, and the tier
and its engine mutants start one for every run of theirs. ``python -m
adapters.engines.forkserver serve SOCKET`` imports those once, in the kernels
venv, and listens on a Unix socket; ``python -m adapters.engines.forkserver
run MODULE ARGS...`` asks it for a fork that runs ``python -m MODULE ARGS...``
on the caller's standard streams, working folder and environment, and exits
with the fork's status. Where ``SSM_ROLLBACK_FORKSERVER`` names no socket that
answers, ``run`` becomes ``python -m MODULE ARGS...`` itself.

Only modules that no engine conditions on anything it sets first are
imported ahead (:data:`PRELOADED`): not Triton, whose release differs by
engine (SGLang's adapter puts triton 3.8.0 first on its path), nor torch's
compiler, whose configuration vLLM's ``env_override`` sets through the
environment before importing it; the server refuses to start where a
preloaded module brings either. Everything an adapter imports of its
engine, it imports in its fork, from the files its environment names, as a
fresh process would.

A fork lives as long as its caller: if ``run`` dies (the command line that
started it killed it, say), the server kills the fork.

Where the server stops before the fork does, ``run`` says so in one line and
exits 1.
"""

from __future__ import annotations

import importlib
import json
import os
import runpy
import selectors
import signal
import socket
import struct
import sys
import traceback
from pathlib import Path
from typing import Final, NoReturn, TypedDict

__all__ = ["PRELOADED", "SOCKET_VARIABLE", "main"]

#: The environment variable naming the server's socket, for ``run``.
SOCKET_VARIABLE: Final = "SSM_ROLLBACK_FORKSERVER"
#: What the server imports before it forks (see the module's docstring). vLLM's
#: configuration imports the last six through its OpenAI-compatible types and
#: torch's symbolic shapes: 1.9 s of each vLLM adapter's start, measured on a
#: loaded host (BENCHMARKS.md, "The kernels tier").
PRELOADED: Final = (
    "torch",
    "numpy",
    "transformers",
    "pydantic",
    "openai",
    "sympy",
    "networkx",
    "requests",
    "aiohttp",
    "jinja2",
)
#: What no preloaded module may bring with it: Triton, and torch's compiler,
#: whose configuration vLLM sets through the environment before importing it.
_NOT_AHEAD: Final = ("triton", "torch._dynamo", "torch._inductor")
#: The largest request ``run`` sends: its arguments, folder and environment.
_REQUEST_BYTES: Final = 1 << 20
_STATUS: Final = struct.Struct("<i")
_USAGE: Final = "serve SOCKET | run MODULE ARGS..."


class _Request(TypedDict):
    """What ``run`` sends, with its three standard streams."""

    argv: list[str]
    cwd: str
    env: dict[str, str]


def _exec(argv: list[str], /) -> NoReturn:
    # The same interpreter, as it would have been started: no shell between.
    os.execv(sys.executable, [sys.executable, "-m", *argv])  # noqa: S606


def _run(argv: list[str], /) -> int:
    """Run ``python -m argv...`` as a fork of the server, or as itself where none answers."""
    path = os.environ.get(SOCKET_VARIABLE, "")
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        connection.connect(path)
    except OSError:
        connection.close()
        _exec(argv)
    request: _Request = {"argv": argv, "cwd": str(Path.cwd()), "env": dict(os.environ)}
    socket.send_fds(connection, [json.dumps(request).encode()], [0, 1, 2])
    # The streams are the fork's now; this process only waits for its status.
    reply = connection.recv(_STATUS.size)
    if len(reply) != _STATUS.size:
        sys.stderr.write(f"the fork server at {path} stopped before its fork\n")
        return 1
    status: int = _STATUS.unpack(reply)[0]
    return status


def _fork(request: _Request, streams: list[int], listener: socket.socket, /) -> int:
    """Start the fork that runs ``request``; its process ID."""
    pid = os.fork()
    if pid:
        for stream in streams:
            os.close(stream)
        return pid
    status = 1
    try:
        listener.close()
        for target, stream in enumerate(streams):
            os.dup2(stream, target)
        # Nothing of the server's stays open in the fork: its socket, its
        # selector, other callers' connections.
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        os.chdir(request["cwd"])
        # As ``python -m`` started there: the working folder first on the path.
        sys.path[0] = request["cwd"]
        os.environ.clear()
        os.environ.update(request["env"])
        module, *arguments = request["argv"]
        sys.argv = [module, *arguments]
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            status = 0
        except SystemExit as stop:
            code = stop.code
            status = code if isinstance(code, int) else (0 if code is None else 1)
        except BaseException:  # noqa: BLE001 - a fresh process prints it and exits 1 too
            traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def _serve(path: str, /) -> int:
    """Import :data:`PRELOADED`, then fork for each ``run`` until terminated."""
    for module in PRELOADED:
        importlib.import_module(module)
    ahead = min(
        (
            name
            for name in sys.modules
            if any(name == banned or name.startswith(f"{banned}.") for banned in _NOT_AHEAD)
        ),
        default=None,
    )
    if ahead is not None:
        sys.stderr.write(f"the fork server would import {ahead} ahead of the engines\n")
        return 1
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen()
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    # For each fork: its caller's connection and the pidfd that says it exited.
    forks: dict[int, tuple[socket.socket, int]] = {}

    def end(pid: int, /, *, kill: bool) -> None:
        connection, pidfd = forks.pop(pid)
        if kill:
            os.kill(pid, signal.SIGKILL)
        _, waited = os.waitpid(pid, 0)
        selector.unregister(connection)
        selector.unregister(pidfd)
        os.close(pidfd)
        if not kill:
            code = os.waitstatus_to_exitcode(waited)
            # A fork killed by a signal exits as a shell shows it: 128 + the signal.
            connection.send(_STATUS.pack(code if code >= 0 else 128 - code))
        connection.close()

    while True:
        for key, _ in selector.select():
            if key.fileobj is listener:
                connection, _ = listener.accept()
                message, streams, _, _ = socket.recv_fds(connection, _REQUEST_BYTES, 3)
                request: _Request = json.loads(message)
                pid = _fork(request, streams, listener)
                pidfd = os.pidfd_open(pid)
                forks[pid] = (connection, pidfd)
                selector.register(connection, selectors.EVENT_READ, ("caller", pid))
                selector.register(pidfd, selectors.EVENT_READ, ("fork", pid))
            else:
                role, pid = key.data
                if pid in forks:
                    # The caller readable means gone (it sends nothing more): kill its fork.
                    end(pid, kill=role == "caller")


def main(argv: list[str] | None = None, /) -> int:
    """``serve SOCKET`` or ``run MODULE ARGS...``."""
    arguments = sys.argv[1:] if argv is None else argv
    if len(arguments) == 2 and arguments[0] == "serve":
        return _serve(arguments[1])
    if len(arguments) >= 2 and arguments[0] == "run":
        return _run(arguments[1:])
    sys.stderr.write(f"usage: python -m adapters.engines.forkserver {_USAGE}\n")
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
