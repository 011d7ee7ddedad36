# SPDX-License-Identifier: MIT OR Apache-2.0
"""ggml's own GDN ops over the protocol's ``replay``: llama.cpp's arithmetic and its rollback.

``python adapters/llama-cpp/ggml_adapter.py [--version 0.3.36] [--control off-by-one]``
builds (or finds in its cache) the release's ggml and ``ggml-replay``
(adapters/llama-cpp/build.py), then serves the adapter protocol on standard
input and output. ``replay`` runs in ``ggml-replay`` (ggml_replay.cpp):
ggml_ssm_conv, ggml_silu, the L2 norm of llama.cpp's Qwen3.5 graph, the gate
and beta from ggml's softplus and sigmoid, and ggml_gated_delta_net with a
snapshot per token, each round keeping the snapshot of its last accepted
token. Its pipeline is ``ggml-f32`` and its design ``snapshot``. Every other
operation is the package's Python reference adapter's answer, as the engine
adapters do (adapters/engines/serve.py): ggml has no mode cell of its own.

``--control off-by-one`` is the wrong build: ``ggml-replay`` keeps the snapshot
one token off the accepted count, so every replay case of a partial accept
must fail.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import TYPE_CHECKING, Final

import build

from ssm_rollback_spec.harness import adapter, protocol
from ssm_rollback_spec.harness.protocol import ErrorKind, Op
from ssm_rollback_spec.harness.python_impl import REFERENCE, load_python_implementation
from ssm_rollback_spec.harness.replay_wire import ReplayLayout, decode_replay, encode_replay_states

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ssm_rollback_spec.harness.replay_wire import ReplayRequest, ReplayState

__all__ = ["PIPELINE", "main"]

#: What ggml-replay computes (spec/replay/layer.py, ``Pipeline.GGML_F32``).
PIPELINE: Final = "ggml-f32"
_DESIGN: Final = "snapshot"
_OFF_BY_ONE: Final = "off-by-one"
#: The longest reply line read back from ggml-replay (states of a large request).
_MAX_REPLY: Final = 64 << 20


class _Kernel:
    """One ggml-replay process, started on the first replay and ended with the adapter."""

    def __init__(self, binary: str, /, *, control: bool) -> None:
        self.control = control
        self._command = [binary, *([_OFF_BY_ONE] if control else [])]
        self._process: subprocess.Popen[str] | None = None

    def replay(self, request: ReplayRequest, /) -> list[ReplayState]:
        if self._process is None:
            self._process = subprocess.Popen(
                self._command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
        process = self._process
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.write(_encode(request) + "\n")
        process.stdin.flush()
        line = process.stdout.readline(_MAX_REPLY)
        if not line.endswith("\n"):
            raise protocol.ProtocolError(ErrorKind.BAD_REQUEST, "ggml-replay gave no reply")
        if line.startswith("error "):
            raise protocol.ProtocolError(ErrorKind.BAD_REQUEST, line[len("error ") :].strip())
        return _decode(request, line.split())

    def close(self) -> None:
        if self._process is not None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            self._process.wait(timeout=10)


def _hexes(values: Sequence[float], /) -> str:
    return " ".join(value.hex() for value in values)


def _encode(request: ReplayRequest, /) -> str:
    dims = request["dims"]
    gates = "a_log" in request
    parts = [
        " ".join(
            str(n)
            for n in (
                dims["num_key_heads"],
                dims["key_head_dim"],
                dims["num_value_heads"],
                dims["value_head_dim"],
                dims["conv_kernel"],
                int(gates),
                len(request["rounds"]),
            )
        ),
        *(_hexes(row) for row in request["conv_weight"]),
    ]
    if gates:
        parts += [_hexes(request["a_log"]), _hexes(request["dt_bias"])]
    parts += [_hexes(row) for row in request["checkpoint"]["conv"]]
    parts += [_hexes(row) for head in request["checkpoint"]["h"] for row in head]
    for item in request["rounds"]:
        parts.append(f"{len(item['rows'])} {item['accepted']}")
        for row in item["rows"]:
            parts += [_hexes(row["values"]), _hexes(row["g"]), _hexes(row["beta"])]
            if gates:
                parts += [_hexes(row["a"]), _hexes(row["b"])]
    return " ".join(parts)


def _decode(request: ReplayRequest, words: list[str], /) -> list[ReplayState]:
    dims = request["dims"]
    nk, dk, nv, dv = (
        dims["num_key_heads"],
        dims["key_head_dim"],
        dims["num_value_heads"],
        dims["value_head_dim"],
    )
    conv_dim, kept = 2 * nk * dk + nv * dv, dims["conv_kernel"] - 1
    values = iter(float.fromhex(word) for word in words)
    states: list[ReplayState] = []
    for _ in request["rounds"]:
        conv = [[next(values) for _ in range(kept)] for _ in range(conv_dim)]
        h = [[[next(values) for _ in range(dv)] for _ in range(dk)] for _ in range(nv)]
        states.append({"conv": conv, "h": h})
    return states


def _describe(built: build.Built, /, *, control: bool) -> dict[str, object]:
    wrong = ", control build: off by one in the accepted count" if control else ""
    return {
        "name": f"llama.cpp ggml kernels (adapters/llama-cpp){wrong}",
        "usize_bits": 64,
        "release": f"llama-cpp-python=={built['version']} (llama.cpp {built['commit']})",
        "replay": {
            "pipelines": [PIPELINE],
            "layouts": [ReplayLayout.PRE_CONV.value],
            "designs": [_DESIGN],
        },
    }


def _replay(kernel: _Kernel, line: str, /) -> object:
    decoded = decode_replay(json.loads(line))
    if decoded["pipeline"] != PIPELINE:
        raise protocol.ProtocolError(
            ErrorKind.BAD_REQUEST,
            f"ggml's kernels compute pipeline {PIPELINE}, not {decoded['pipeline']} "
            "(see its describe)",
        )
    if decoded["layout"] is not ReplayLayout.PRE_CONV:
        raise protocol.ProtocolError(
            ErrorKind.BAD_REQUEST, "the ggml adapter replays pre-conv rows only"
        )
    return encode_replay_states(kernel.replay(decoded))


def _respond(built: build.Built, kernel: _Kernel, api: object, line: str, /) -> dict[str, object]:
    try:
        request = protocol.decode_request(line)
        op = protocol.op_named(str(request["op"]))
        if op is Op.DESCRIBE:
            return protocol.ok_reply(_describe(built, control=kernel.control))
        if op is Op.REPLAY:
            # decode_request keeps only the contract's fields; the replay fields are the line's.
            return protocol.ok_reply(_replay(kernel, line))
    except protocol.ProtocolError as error:
        return protocol.error_reply(error.kind, str(error))
    return adapter.respond(api, line)  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> int:
    """Serve ggml's replay on standard input and output; return the exit status."""
    parser = argparse.ArgumentParser(
        prog="python adapters/llama-cpp/ggml_adapter.py",
        description="Serve ggml's GDN ops (llama.cpp's release) over the protocol's replay.",
    )
    parser.add_argument(
        "--version",
        default=build.PINNED,
        help=f"a llama-cpp-python release (default {build.PINNED})",
    )
    parser.add_argument(
        "--control",
        choices=[_OFF_BY_ONE],
        help="the wrong build: the snapshot kept is one token off the accepted count",
    )
    arguments = parser.parse_args(argv)
    problem = build.version_problem(arguments.version)
    if problem:
        parser.error(problem)
    try:
        built = build.build(arguments.version)
    except build.LlamaCppBuildError as error:
        print(f"adapters/llama-cpp/ggml_adapter.py: {error}", file=sys.stderr)
        return 1
    kernel = _Kernel(built["replay_adapter"], control=arguments.control is not None)
    api = load_python_implementation(REFERENCE).api
    try:
        adapter.serve_lines(
            lambda text: _respond(built, kernel, api, text), sys.stdin.buffer, sys.stdout.buffer
        )
    except (BrokenPipeError, KeyboardInterrupt):
        return 1
    finally:
        kernel.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
