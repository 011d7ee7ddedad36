# SPDX-License-Identifier: MIT OR Apache-2.0
"""The llamacpp tier's build (adapters/llama-cpp/build.py) and its adapter, one process a machine.

The adapter speaks one JSON object a line (adapters/llama-cpp/rollback.cpp
lists the requests); every read is bounded in bytes and time, and the process
is killed on close or on a reply that does not come.
"""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
import time
from enum import Enum
from typing import TYPE_CHECKING, Final, Self, TypedDict, cast

from tests.child import ROOT

if TYPE_CHECKING:
    from types import TracebackType

__all__ = [
    "BUILD_SCRIPT",
    "AdapterError",
    "Arch",
    "Built",
    "Description",
    "Engine",
    "Fault",
    "OwnTest",
    "Way",
    "build",
    "build_own_test",
    "build_server",
]

BUILD_SCRIPT: Final = ROOT / "adapters" / "llama-cpp" / "build.py"
#: The longest reply read: a window's logits are a few KiB a token.
_MAX_REPLY: Final = 4 << 20
#: How long one request may take; the tiny model answers in milliseconds.
_REPLY_SECONDS: Final = 60.0
#: A cold build of ggml and llama on two shared cores (BENCHMARKS.md).
_BUILD_SECONDS: Final = 3600


class Way(Enum):
    """llama.cpp's two ways to roll a sequence back."""

    #: The context's ``n_rs_seq`` per-token snapshots and ``llama_memory_seq_rm``.
    SNAPSHOT = "snapshot"
    #: The whole recurrent state saved before each window and restored, as the server does.
    CHECKPOINT = "checkpoint"


class Arch(Enum):
    """The random models build.py makes, by llama.cpp's architecture name."""

    #: Qwen3.5: ``llm_arch_supports_rs_rollback`` lists it, so both ways.
    QWEN35 = "qwen35"
    #: Qwen3-Next: not listed, so llama.cpp clamps ``n_rs_seq`` to 0; checkpoints only.
    QWEN3NEXT = "qwen3next"


class Fault(Enum):
    """The self-test's wrong runtimes (adapters/llama-cpp/rollback.cpp)."""

    #: Rolls back one token too few and carries on one position later.
    AHEAD = "ahead"
    #: Restores another sequence's checkpoint.
    OTHER_SEQ = "other-seq"


class Built(TypedDict):
    """build.py's output: the release, llama.cpp's commit and licence, the adapter, the model."""

    version: str
    commit: str
    licence: str
    adapter: str
    model: str
    adapter_sha256: str
    cmake_flags: list[str]
    replay_adapter: str
    replay_sha256: str
    qwen3next_model: str


class OwnTest(TypedDict):
    """``build.py --own-test``'s output: llama.cpp's own rollback test, in the release's tree."""

    version: str
    commit: str
    binary: str
    cmake_flags: list[str]


class Description(TypedDict):
    """The adapter's ``describe`` reply."""

    engine: str
    commit: str
    arch: str
    n_vocab: int
    n_seq: int
    n_rs_seq: int
    way: str


class AdapterError(RuntimeError):
    """The adapter answered with an error, badly, or not in time."""


def build(version: str | None = None, /) -> Built:
    """Run build.py (which does nothing when the cache has the release) and return what it built.

    Raises:
        AdapterError: the build failed; the message is build.py's one line.
    """
    done = subprocess.run(
        [sys.executable, str(BUILD_SCRIPT), *(["--version", version] if version else [])],
        capture_output=True,
        text=True,
        timeout=_BUILD_SECONDS,
        check=False,
    )
    if done.returncode != 0:
        raise AdapterError(done.stderr.strip() or f"build.py exited {done.returncode}")
    return cast("Built", json.loads(done.stdout))


def _build_more(flag: str, version: str | None, /) -> OwnTest:
    done = subprocess.run(
        [sys.executable, str(BUILD_SCRIPT), flag, *(["--version", version] if version else [])],
        capture_output=True,
        text=True,
        timeout=_BUILD_SECONDS,
        check=False,
    )
    if done.returncode != 0:
        raise AdapterError(done.stderr.strip() or f"build.py {flag} exited {done.returncode}")
    return cast("OwnTest", json.loads(done.stdout))


def build_own_test(version: str | None = None, /) -> OwnTest:
    """Run ``build.py --own-test`` (the libraries first, then the common library and the test).

    Raises:
        AdapterError: the build failed; the message is build.py's one line.
    """
    return _build_more("--own-test", version)


def build_server(version: str | None = None, /) -> OwnTest:
    """Run ``build.py --server`` (the libraries first, then the common library and llama-server).

    Raises:
        AdapterError: the build failed; the message is build.py's one line.
    """
    return _build_more("--server", version)


Logits = list[list[float]]


class Engine:
    """One adapter process: a context of ``n_seq`` sequences rolled back ``way``."""

    def __init__(
        self,
        built: Built,
        /,
        *,
        n_seq: int,
        n_rs_seq: int,
        way: Way,
        fault: Fault | None = None,
        arch: Arch = Arch.QWEN35,
        model: str | None = None,
    ) -> None:
        # ``model``, a file make-model wrote, replaces the build's model of ``arch``.
        if model is None:
            model = built["model"] if arch is Arch.QWEN35 else built["qwen3next_model"]
        command = [built["adapter"], "serve", model, str(n_seq), str(n_rs_seq), way.value]
        if fault is not None:
            command.append(fault.value)
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._selector = selectors.DefaultSelector()
        assert self._process.stdout is not None
        self._selector.register(self._process.stdout, selectors.EVENT_READ)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """End the process: its input closed, then killed if it lingers."""
        self._selector.close()
        if self._process.stdin is not None and not self._process.stdin.closed:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()

    def _ask(self, request: dict[str, object], /) -> dict[str, object]:
        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None
        assert stdout is not None
        stdin.write(json.dumps(request) + "\n")
        stdin.flush()
        deadline = time.monotonic() + _REPLY_SECONDS
        if not self._selector.select(timeout=max(0.0, deadline - time.monotonic())):
            self._process.kill()
            raise AdapterError(f"no reply to {request['op']} within {_REPLY_SECONDS:g} s")
        line = stdout.readline(_MAX_REPLY + 1)
        if not line.endswith("\n"):
            self._process.kill()
            raise AdapterError(f"the reply to {request['op']} is cut off or too long")
        reply = cast("dict[str, object]", json.loads(line))
        if "error" in reply:
            raise AdapterError(f"{request['op']}: {reply['error']}")
        return reply

    def describe(self) -> Description:
        """The engine, its llama.cpp commit and its context's sizes."""
        return cast("Description", self._ask({"op": "describe"}))

    def decode(self, windows: dict[int, list[int]], /) -> dict[int, Logits]:
        """One llama_decode of each sequence's window; each token's logits, by sequence."""
        seqs = list(windows)
        reply = self._ask({"op": "decode", "seqs": seqs, "tokens": [windows[s] for s in seqs]})
        rows = cast("list[Logits]", reply["logits"])
        return dict(zip(seqs, rows, strict=True))

    def rollback(self, seq: int, n: int, /) -> bool:
        """Roll ``seq`` back by ``n`` tokens; whether the engine accepted it."""
        return bool(self._ask({"op": "rollback", "seq": seq, "n": n})["ok"])

    def finish(self, seq: int, /) -> None:
        """End ``seq``, in the context under test and in the reference's."""
        self._ask({"op": "finish", "seq": seq})

    def reference(self, seq: int, tokens: list[int], /, *, restart: bool = False) -> Logits:
        """``tokens`` appended to ``seq``'s reference, one llama_decode each; their logits.

        ``restart`` empties the reference first: it never rolls back, so a
        history that lost tokens is decoded again from its start.
        """
        request: dict[str, object] = {"op": "reference", "seq": seq, "tokens": tokens}
        if restart:
            request["restart"] = 1
        reply = self._ask(request)
        return cast("list[Logits]", reply["logits"])[0]
