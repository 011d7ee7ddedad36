# SPDX-License-Identifier: MIT OR Apache-2.0
"""The protocol's opt-in ``model`` operation over llama.cpp: a thin adapter over ``llama-rollback``.

``python adapters/llama-cpp/model_adapter.py BIN MODEL.gguf [WAY,...]`` answers the
JSON-lines protocol (docs/protocol.md) on stdin/stdout: ``describe`` names the
model with a ``model`` member, and each ``model`` request runs its script in a
fresh ``BIN serve MODEL N_SEQ N_RS_SEQ WAY`` (adapters/llama-cpp/rollback.cpp),
so nothing survives a request. Its ways come from llama.cpp itself: a context
whose ``llama_n_rs_seq`` is 0 (Qwen3-Next: ``llm_arch_supports_rs_rollback``
does not list it) offers ``checkpoint`` alone, and ``WAY,...`` narrows them
(``checkpoint``: the way llama.cpp gets right). Every other op is ``unknown-op``.
Standard library only.
"""

from __future__ import annotations

import json
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


class _BadRequestError(Exception):
    """A request this adapter cannot run; its text is the error's message."""


class _Child:
    """One ``llama-rollback serve`` process, one JSON line each way."""

    def __init__(self, binary: str, model: str, way: str) -> None:
        self._proc = subprocess.Popen(
            [binary, "serve", model, str(_N_SEQ), str(_N_RS_SEQ), way],
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


def _describe(binary: str, model: str) -> dict[str, object]:
    child = _Child(binary, model, "snapshot")
    try:
        got = cast("dict[str, object]", child.ask({"op": "describe"}))
    finally:
        child.close()
    n_rs = cast("int", got["n_rs_seq"])
    member: dict[str, object] = {
        "name": f"llama.cpp {got['commit']} {got['arch']} ({model.rsplit('/', 1)[-1]})",
        "vocab": got["n_vocab"],
        "sequences": got["n_seq"],
        "rollback": ["snapshot", "checkpoint"] if n_rs > 0 else ["checkpoint"],
        "bound": "0x0.0p+0",
    }
    if n_rs > 0:
        member["snapshot_depth"] = n_rs
    return {
        "name": "llama.cpp through llama.h (adapters/llama-cpp/model_adapter.py)",
        "usize_bits": 64,
        "model": member,
    }


def _run(binary: str, model: str, ways: list[str], request: dict[str, object]) -> object:
    way = request.get("rollback")
    if way not in ways:
        msg = f"rollback must be one of {ways}, got {way!r}"
        raise _BadRequestError(msg)
    script = request.get("script")
    if not isinstance(script, list) or not script:
        msg = "script must be a non-empty list"
        raise _BadRequestError(msg)
    child = _Child(binary, model, way)
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


def main(argv: list[str] | None = None) -> int:
    """Serve the protocol until stdin ends."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in {2, 3}:
        sys.stderr.write("usage: model_adapter.py LLAMA_ROLLBACK_BIN MODEL.gguf [WAY,...]\n")
        return 2
    binary, model = args[0], args[1]
    description = _describe(binary, model)
    member = cast("dict[str, object]", description["model"])
    ways = cast("list[str]", member["rollback"])
    if len(args) == 3:
        ways = [way for way in ways if way in args[2].split(",")]
        if not ways:
            sys.stderr.write(f"model_adapter.py: llama.cpp offers none of {args[2]}\n")
            return 2
        member["rollback"] = ways
        if "snapshot" not in ways:
            member.pop("snapshot_depth", None)
    for line in sys.stdin:
        try:
            request = json.loads(line)
            op = request.get("op") if isinstance(request, dict) else None
            if op == "describe":
                reply: object = {"ok": description}
            elif op == "model":
                reply = {"ok": _run(binary, model, ways, request)}
            else:
                reply = {
                    "error": {
                        "kind": "unknown-op",
                        "message": f"{op} is not offered: this adapter offers model alone",
                    }
                }
        except (_BadRequestError, KeyError, TypeError, ValueError) as error:
            reply = {"error": {"kind": "bad-request", "message": str(error)}}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
