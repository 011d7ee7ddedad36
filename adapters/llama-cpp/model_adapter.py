# SPDX-License-Identifier: MIT OR Apache-2.0
"""The protocol's opt-in ``model`` operation over llama.cpp: a thin adapter over ``llama-rollback``.

``python adapters/llama-cpp/model_adapter.py BIN MODEL.gguf [WAY,...] [--bound B]
[--fault FAULT]`` answers the JSON-lines protocol (docs/protocol.md) on
stdin/stdout: ``describe`` names the model with a ``model`` member, and each
``model`` request runs its script in a fresh ``BIN serve MODEL N_SEQ N_RS_SEQ
WAY [FAULT]`` (adapters/llama-cpp/rollback.cpp), so nothing survives a
request. Its ways come from llama.cpp itself: a context whose
``llama_n_rs_seq`` is 0 (Qwen3-Next: ``llm_arch_supports_rs_rollback`` does
not list it) offers ``checkpoint`` alone, and ``WAY,...`` narrows them
(``checkpoint``: the way llama.cpp gets right). Every other op is ``unknown-op``.

``--bound B`` (a decimal or ``float.hex`` number, finite, at least 0)
declares B as the ``describe``'s ``model.bound``, for a ggml CPU variant
whose kernels give a window's tokens other bits than the same tokens one at
a time (tests/llamacpp/test_prebuilt.py); without it the bound is 0.
``--fault FAULT`` serves llama-rollback's self-test runtime instead of
llama.cpp's own rollback: ``ahead`` (rolls back one token too few and
carries on one position later, either way) or ``other-seq`` (restores
another sequence's checkpoint: the checkpoint way alone, so name it). Its
``describe`` names the fault. Standard library only.
"""

from __future__ import annotations

import json
import math
import struct
import subprocess
import sys
from typing import Final, cast

__all__ = ["main"]

#: Sequences (slots) and per-token snapshots the adapter asks llama.cpp for.
_N_SEQ: Final = 3
_N_RS_SEQ: Final = 4
#: Each live sequence's length in the request being run, by name.
_LENGTHS: Final[dict[str, int]] = {}
#: llama-rollback's self-test runtimes, and the ways each runs in.
_FAULTS: Final = {"ahead": ("snapshot", "checkpoint"), "other-seq": ("checkpoint",)}
_USAGE: Final = (
    "usage: model_adapter.py LLAMA_ROLLBACK_BIN MODEL.gguf [WAY,...] [--bound B] [--fault FAULT]"
)


class _BadRequestError(Exception):
    """A request this adapter cannot run; its text is the error's message."""


class _Child:
    """One ``llama-rollback serve`` process, one JSON line each way."""

    def __init__(self, binary: str, model: str, way: str, fault: str | None = None) -> None:
        self._proc = subprocess.Popen(
            [binary, "serve", model, str(_N_SEQ), str(_N_RS_SEQ), way, *([fault] if fault else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    def ask(self, request: dict[str, object]) -> object:
        stdin, stdout = self._proc.stdin, self._proc.stdout
        assert stdin is not None
        assert stdout is not None
        stdin.write(json.dumps(request) + "\n")
        stdin.flush()
        line = stdout.readline()
        if not line:
            msg = "llama-rollback exited"
            raise RuntimeError(msg)
        reply = json.loads(line)
        if isinstance(reply, dict) and "error" in reply:
            msg = f"llama-rollback: {reply['error']}"
            raise RuntimeError(msg)
        return reply

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def _describe(binary: str, model: str, bound: float, fault: str | None) -> dict[str, object]:
    child = _Child(binary, model, "snapshot")
    try:
        got = cast("dict[str, object]", child.ask({"op": "describe"}))
    finally:
        child.close()
    n_rs = cast("int", got["n_rs_seq"])
    faulty = f", self-test fault {fault}" if fault else ""
    member: dict[str, object] = {
        "name": f"llama.cpp {got['commit']} {got['arch']} ({model.rsplit('/', 1)[-1]}{faulty})",
        "vocab": got["n_vocab"],
        "sequences": got["n_seq"],
        "rollback": ["snapshot", "checkpoint"] if n_rs > 0 else ["checkpoint"],
        "bound": bound.hex(),
    }
    if n_rs > 0:
        member["snapshot_depth"] = n_rs
    return {
        "name": "llama.cpp through llama.h (adapters/llama-cpp/model_adapter.py)",
        "usize_bits": 64,
        "model": member,
    }


def _run(
    binary: str, model: str, ways: list[str], fault: str | None, request: dict[str, object]
) -> object:
    way = request.get("rollback")
    if way not in ways:
        msg = f"rollback must be one of {ways}, got {way!r}"
        raise _BadRequestError(msg)
    script = request.get("script")
    if not isinstance(script, list) or not script:
        msg = "script must be a non-empty list"
        raise _BadRequestError(msg)
    child = _Child(binary, model, way, fault)
    _LENGTHS.clear()
    slots: dict[str, int] = {}
    results: list[object] = []
    try:
        results.extend(_step(child, slots, step) for step in script)
    finally:
        child.close()
    return {"results": results}


def _decode(child: _Child, slots: dict[str, int], entries: list[dict[str, object]]) -> object:
    seqs: list[int] = []
    tokens: list[list[int]] = []
    for entry in entries:
        name = cast("str", entry["sequence"])
        if name not in slots:
            free = sorted(set(range(_N_SEQ)) - set(slots.values()))
            if not free:
                msg = "no free slot"
                raise _BadRequestError(msg)
            slots[name] = free[0]
        seqs.append(slots[name])
        tokens.append(list(cast("list[int]", entry["tokens"])))
        _LENGTHS[name] = _LENGTHS.get(name, 0) + len(tokens[-1])
    reply = cast(
        "dict[str, list[list[list[float]]]]",
        child.ask({"op": "decode", "seqs": seqs, "tokens": tokens}),
    )
    return {"logits": [[[_f32(x).hex() for x in row] for row in rows] for rows in reply["logits"]]}


def _step(child: _Child, slots: dict[str, int], step: object) -> object:
    if not isinstance(step, dict):
        msg = "each step must be an object"
        raise _BadRequestError(msg)
    if "decode" in step:
        return _decode(child, slots, step["decode"])
    if "rollback" in step:
        name = step["rollback"]
        if name not in slots:
            msg = f"sequence {name!r} is not live"
            raise _BadRequestError(msg)
        n = step["tokens"]
        if not isinstance(n, int) or not 1 <= n <= _LENGTHS[name]:
            # More than the sequence holds: llama-rollback would refuse the request itself.
            return {"accepted": False}
        got = cast("dict[str, bool]", child.ask({"op": "rollback", "seq": slots[name], "n": n}))
        if got["ok"]:
            _LENGTHS[name] -= n
        return {"accepted": bool(got["ok"])}
    if "finish" in step:
        name = step["finish"]
        if name not in slots:
            msg = f"sequence {name!r} is not live"
            raise _BadRequestError(msg)
        child.ask({"op": "finish", "seq": slots.pop(name)})
        del _LENGTHS[name]
        return {}
    msg = "a step must be decode, rollback or finish"
    raise _BadRequestError(msg)


def _f32(value: float) -> float:
    """``value`` rounded to the float32 llama.cpp's logit was (it prints nine digits)."""
    return cast("float", struct.unpack("<f", struct.pack("<f", value))[0])


class _Options:
    """The command line: the binary, the model, the ways asked for, the bound and the fault."""

    def __init__(self, args: list[str], /) -> None:
        named: dict[str, str] = {}
        plain: list[str] = []
        rest = list(args)
        while rest:
            arg = rest.pop(0)
            if arg in {"--bound", "--fault"}:
                if not rest or arg in named:
                    msg = f"{arg} takes one value, given once"
                    raise _BadRequestError(msg)
                named[arg] = rest.pop(0)
            else:
                plain.append(arg)
        if len(plain) not in {2, 3}:
            raise _BadRequestError(_USAGE)
        self.binary, self.model = plain[0], plain[1]
        self.ways = plain[2].split(",") if len(plain) == 3 else None
        self.bound = _bound(named.get("--bound", "0"))
        self.fault = named.get("--fault")
        if self.fault is not None and self.fault not in _FAULTS:
            msg = f"--fault must be one of {list(_FAULTS)}, got {self.fault!r}"
            raise _BadRequestError(msg)


def _bound(text: str, /) -> float:
    """``--bound``'s value: a finite number of at least 0, decimal or ``float.hex``."""
    try:
        value = float.fromhex(text) if "0x" in text.lower() else float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        msg = f"--bound must be a finite number of at least 0, got {text!r}"
        raise _BadRequestError(msg)
    return value


def _offer(options: _Options, /) -> tuple[dict[str, object], list[str]]:
    """The ``describe`` reply and the ways offered: llama.cpp's, narrowed as asked."""
    try:
        description = _describe(options.binary, options.model, options.bound, options.fault)
    except (OSError, RuntimeError, ValueError) as error:
        msg = f"{options.binary} could not describe {options.model}: {error}"
        raise _BadRequestError(msg) from None
    member = cast("dict[str, object]", description["model"])
    ways = cast("list[str]", member["rollback"])
    if options.ways is not None:
        ways = [way for way in ways if way in options.ways]
        if not ways:
            msg = f"llama.cpp offers none of {','.join(options.ways)}"
            raise _BadRequestError(msg)
    fault = options.fault
    if fault is not None and not set(ways) <= set(_FAULTS[fault]):
        msg = (
            f"the fault {fault} runs in {' and '.join(_FAULTS[fault])} alone; "
            f"name {','.join(_FAULTS[fault])} after the model"
        )
        raise _BadRequestError(msg)
    member["rollback"] = ways
    if "snapshot" not in ways:
        member.pop("snapshot_depth", None)
    return description, ways


def _reply(options: _Options, description: object, ways: list[str], line: str, /) -> object:
    """The reply to one request line."""
    try:
        request = json.loads(line)
        op = request.get("op") if isinstance(request, dict) else None
        if op == "describe":
            return {"ok": description}
        if op == "model":
            return {"ok": _run(options.binary, options.model, ways, options.fault, request)}
    except (_BadRequestError, KeyError, TypeError, ValueError) as error:
        return {"error": {"kind": "bad-request", "message": str(error)}}
    return {
        "error": {
            "kind": "unknown-op",
            "message": f"{op} is not offered: this adapter offers model alone",
        }
    }


def main(argv: list[str] | None = None) -> int:
    """Serve the protocol until stdin ends."""
    args = sys.argv[1:] if argv is None else argv
    try:
        options = _Options(args)
        description, ways = _offer(options)
    except _BadRequestError as error:
        message = str(error)
        line = message if message.startswith("usage: ") else f"model_adapter.py: {message}"
        sys.stderr.write(line + "\n")
        return 2
    for line in sys.stdin:
        sys.stdout.write(json.dumps(_reply(options, description, ways, line)) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
