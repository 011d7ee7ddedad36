# SPDX-License-Identifier: MIT OR Apache-2.0
"""An adapter that offers float64 ``replay``: ``python tests/fakes/replay_adapter.py [WRONG]``.

It serves the reference for every other op, and replays float64 requests
with a step of its own, written from docs/protocol.md as a runtime's team
would; WRONG makes one mistake such a team could make:

- ``g-after-delta``: the decay applied after the delta rule's write, not before;
- ``head-modulo``: value head j reads key head ``j % num_key_heads``, not
  ``j // (num_value_heads // num_key_heads)``.

A replay the wire format refuses is ``bad-request``; another pipeline is too.
"""

from __future__ import annotations

import json
import math
import sys
from typing import TYPE_CHECKING, Final

from ssm_rollback_spec import rollback
from ssm_rollback_spec.harness import protocol
from ssm_rollback_spec.harness.adapter import respond, serve_lines
from ssm_rollback_spec.harness.protocol import ErrorKind
from ssm_rollback_spec.harness.replay_wire import decode_replay

if TYPE_CHECKING:
    from collections.abc import Callable

WRONG: Final = ("g-after-delta", "head-modulo")


def _floats(values: list[str], /) -> list[float]:
    return [float.fromhex(value) for value in values]


def _hexes(values: list[float], /) -> list[str]:
    return [value.hex() for value in values]


def _l2norm(values: list[float], /) -> list[float]:
    total = 0.0
    for value in values:
        total += value * value
    norm = math.sqrt(total + 1e-6)
    return [value / norm for value in values]


def step(
    request: dict[str, object],
    conv: list[list[float]],
    h: list[list[list[float]]],
    row: dict[str, list[str]],
    gates: tuple[list[float], list[float]],
    how: str | None,
    /,
) -> tuple[list[list[float]], list[list[list[float]]]]:
    """One row through the conv and the gated delta rule, with the gates ``g`` and ``beta``."""
    dims: dict[str, int] = request["dims"]  # type: ignore[assignment]
    nk, dk, nv, dv = (
        dims[name]
        for name in ("num_key_heads", "key_head_dim", "num_value_heads", "value_head_dim")
    )
    key_dim = nk * dk
    weight = [_floats(row) for row in request["conv_weight"]]  # type: ignore[attr-defined]
    qkv, (g, beta) = _floats(row["qkv"]), gates
    windows = [[*columns, value] for columns, value in zip(conv, qkv, strict=True)]
    post = []
    for window, taps in zip(windows, weight, strict=True):
        mixed = 0.0
        for x, w in zip(window, taps, strict=True):
            mixed += x * w
        post.append(mixed / (1 + math.exp(-mixed)))
    conv = [window[1:] for window in windows]
    keys = [_l2norm(post[key_dim + i * dk : key_dim + (i + 1) * dk]) for i in range(nk)]
    h = [list(head) for head in h]
    for j in range(nv):
        k = keys[j % nk if how == "head-modulo" else j // (nv // nk)]
        v = post[2 * key_dim + j * dv : 2 * key_dim + (j + 1) * dv]
        decay = math.exp(g[j])
        state = h[j] if how == "g-after-delta" else [[s * decay for s in line] for line in h[j]]
        u = [(v[b] - sum(state[a][b] * k[a] for a in range(dk))) * beta[j] for b in range(dv)]
        state = [[state[a][b] + k[a] * u[b] for b in range(dv)] for a in range(dk)]
        if how == "g-after-delta":
            state = [[s * decay for s in line] for line in state]
        h[j] = state
    return conv, h


def gates_of(row: dict[str, list[str]], /) -> tuple[list[float], list[float]]:
    return _floats(row["g"]), _floats(row["beta"])


def state_of(
    found: dict[str, list[object]], /
) -> tuple[list[list[float]], list[list[list[float]]]]:
    conv = [_floats(line) for line in found["conv"]]  # type: ignore[arg-type]
    return conv, [[_floats(line) for line in head] for head in found["h"]]  # type: ignore[attr-defined]


def hexed(conv: list[list[float]], h: list[list[list[float]]], /) -> dict[str, object]:
    return {
        "conv": [_hexes(line) for line in conv],
        "h": [[_hexes(line) for line in head] for head in h],
    }


def _replay(request: dict[str, object], how: str | None, /) -> dict[str, object]:
    conv, h = state_of(request["checkpoint"])  # type: ignore[arg-type]
    states = []
    for each in request["rounds"]:  # type: ignore[attr-defined]
        for row in each["rows"][: each["accepted"]]:
            conv, h = step(request, conv, h, row, gates_of(row), how)
        states.append(hexed(conv, h))
    return {"states": states}


def reply(line: str, how: str | None, /) -> dict[str, object]:
    try:
        request = protocol.decode_request(line)
    except protocol.ProtocolError as error:
        return protocol.error_reply(error.kind, str(error))
    if request.get("op") != "replay":
        return respond(rollback, line)
    # The protocol's decoder keeps the op; the replay's own fields are read here.
    request = json.loads(line)
    try:
        decode_replay(request)
    except protocol.ProtocolError as error:
        return protocol.error_reply(error.kind, str(error))
    if request.get("pipeline") != "float64" or request.get("layout") != "pre-conv":
        return protocol.error_reply(ErrorKind.BAD_REQUEST, "only float64 pre-conv replays")
    try:
        return protocol.ok_reply(_replay(request, how))
    except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError) as error:
        return protocol.error_reply(ErrorKind.BAD_REQUEST, f"malformed replay: {error}")


def serve_fake(
    program: str, wrong: tuple[str, ...], answer: Callable[[str, str | None], dict[str, object]], /
) -> int:
    """Serve ``answer`` as the wrong implementation named by the first argument, if any.

    The lines are read and written by the harness's own loop, as a real adapter's are.
    """
    how = sys.argv[1] if len(sys.argv) > 1 else None
    if how is not None and how not in wrong:
        sys.stderr.write(f"usage: {program} [{'|'.join(wrong)}]\n")
        return 2
    serve_lines(lambda line: answer(line, how), sys.stdin.buffer, sys.stdout.buffer)
    return 0


def main() -> int:
    return serve_fake("replay_adapter.py", WRONG, reply)


if __name__ == "__main__":
    sys.exit(main())
