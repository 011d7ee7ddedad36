# SPDX-License-Identifier: MIT OR Apache-2.0
"""An adapter of protocol 2's first ``replay``: ``python -m tests.fakes.first_replay_adapter``.

Written as an outside team wrote one from docs/protocol.md when ``replay``
first came, before a ``describe`` could list pipelines and before
``transformers-bf16`` was renamed: its ``describe`` is the oldest shape,
``{"name": ..., "usize_bits": 64}``, and it knows the two pipelines of that
page by their first names, ``float64`` and ``bf16-rows-fp32-state``, in both
layouts. Any other name is ``bad-request`` with the message such an adapter
gave (``field 'pipeline' must be "float64" or "bf16-rows-fp32-state", got
"transformers-bf16"``). Its states are the replay model's (numpy), so it is
right wherever it is sent what it knows. ``replay_batch`` and ``model``
came later: it answers them ``unknown-op``, as the reference does.
"""

from __future__ import annotations

import json
import sys
from typing import Final

import numpy as np

from ssm_rollback_spec import rollback
from ssm_rollback_spec.harness import protocol
from ssm_rollback_spec.harness.adapter import respond
from ssm_rollback_spec.harness.protocol import ErrorKind
from ssm_rollback_spec.harness.replay_wire import ReplayLayout, ReplayRequest, decode_replay
from ssm_rollback_spec.replay.layer import GdnLayer, LayerState, Pipeline, delta_rule_step
from ssm_rollback_spec.replay.paths import MinimalRow, replay_rows
from tests.fakes.replay_adapter import serve_fake

#: Its ``describe`` reply: no ``replay`` member, as before one existed.
DESCRIBE: Final = {
    "name": "protocol 2's first replay (tests/fakes/first_replay_adapter.py)",
    "usize_bits": 64,
}
#: The pipelines it knows, each as the model names it now.
KNOWN: Final = {"float64": Pipeline.FLOAT64, "bf16-rows-fp32-state": Pipeline.TRANSFORMERS_BF16}


def _layer(request: ReplayRequest, pipeline: Pipeline, /) -> GdnLayer:
    dims, dtype = request["dims"], pipeline.dtype
    return GdnLayer(
        num_key_heads=dims["num_key_heads"],
        key_head_dim=dims["key_head_dim"],
        num_value_heads=dims["num_value_heads"],
        value_head_dim=dims["value_head_dim"],
        conv_kernel=dims["conv_kernel"],
        conv_weight=np.array(request["conv_weight"], dtype=dtype),
        a_log=np.zeros(dims["num_value_heads"]),
        dt_bias=np.zeros(dims["num_value_heads"]),
        norm_weight=np.ones(dims["value_head_dim"]),
        pipeline=pipeline,
    )


def _states(request: ReplayRequest, pipeline: Pipeline, /) -> list[dict[str, object]]:
    layer, dtype = _layer(request, pipeline), pipeline.dtype
    checkpoint = request["checkpoint"]
    state = LayerState(
        conv=np.array(checkpoint["conv"], dtype=dtype), h=np.array(checkpoint["h"], dtype=dtype)
    )
    states: list[dict[str, object]] = []
    for each in request["rounds"]:
        rows = [
            MinimalRow(
                np.array(row["values"], dtype=dtype),
                np.array(row["g"], dtype=dtype),
                np.array(row["beta"], dtype=dtype),
            )
            for row in each["rows"]
        ]
        accepted = each["accepted"]
        if request["layout"] is ReplayLayout.PRE_CONV:
            state = replay_rows(layer, state, rows, accepted)
        else:
            h = state.h
            for row in rows[:accepted]:
                h = delta_rule_step(layer, h, row.qkv, row.g, row.beta)
            window = np.array(each.get("conv_window", []), dtype=dtype)
            columns = np.concatenate([state.conv, window], axis=1)
            state = LayerState(conv=columns[:, accepted : accepted + layer.conv_kernel - 1], h=h)
        states.append(
            {
                "conv": [[float(x).hex() for x in line] for line in state.conv],
                "h": [[[float(x).hex() for x in line] for line in head] for head in state.h],
            }
        )
    return states


def reply(line: str, _: str | None, /) -> dict[str, object]:
    """Its reply to one request line."""
    try:
        op = protocol.decode_request(line).get("op")
    except protocol.ProtocolError as error:
        return protocol.error_reply(error.kind, str(error))
    if op == "describe":
        return protocol.ok_reply(DESCRIBE)
    if op != "replay":
        return respond(rollback, line)
    request = json.loads(line)
    name = request.get("pipeline")
    if name not in KNOWN:
        message = f"field 'pipeline' must be {' or '.join(map(json.dumps, KNOWN))}, got "
        return protocol.error_reply(ErrorKind.BAD_REQUEST, message + json.dumps(name))
    try:
        return protocol.ok_reply({"states": _states(decode_replay(request), KNOWN[name])})
    except protocol.ProtocolError as error:
        return protocol.error_reply(error.kind, str(error))


def main() -> int:
    return serve_fake("first_replay_adapter.py", (), reply)


if __name__ == "__main__":
    sys.exit(main())
