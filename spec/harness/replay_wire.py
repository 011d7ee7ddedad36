# SPDX-License-Identifier: MIT OR Apache-2.0
"""The opt-in ``replay`` operation's fields on the wire (docs/protocol-replay.md).

Floats travel as ``float.hex`` strings, exactly. An adapter that offers the
operation decodes a request with :func:`decode_replay` and answers with
:func:`encode_replay_states`; one that does not answers ``unknown-op``
(:data:`.protocol.Op.REPLAY` is known to every decoder, so the reply is the
adapter's own). Apart from :mod:`.protocol`, which every adapter uses, since
only an adapter that offers replay needs it. The fields both replay operations
share are :mod:`.replay_fields`'s, and the ``replay_batch`` operation is
:mod:`.replay_batch_wire`'s; this module re-exports both modules' public names,
so an adapter imports the wire from here alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, NotRequired, TypedDict

from .protocol import bad_request, encode_value, required_field
from .replay_batch_wire import (
    MAX_BATCH_SLOTS,
    REPLAY_BATCH_FIELDS,
    BatchForm,
    ReplayBatchEntry,
    ReplayBatchRequest,
    batch_forms,
    decode_replay_batch,
    rerouted_entries,
)
from .replay_fields import (
    ENGINE_PIPELINES,
    HEX_FLOAT,
    PIPELINE_ALIASES,
    ReplayDims,
    ReplayLayout,
    ReplayRound,
    ReplayRow,
    ReplayState,
    current_pipeline,
    decode_dims,
    decode_gate_parameters,
    decode_pipeline,
    decode_round,
    decode_state,
    decode_weight,
    finite_hex,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "ENGINE_PIPELINES",
    "HEX_FLOAT",
    "MAX_BATCH_SLOTS",
    "PIPELINE_ALIASES",
    "REPLAY_BATCH_FIELDS",
    "REPLAY_FIELDS",
    "BatchForm",
    "ReplayBatchEntry",
    "ReplayBatchRequest",
    "ReplayDims",
    "ReplayLayout",
    "ReplayRequest",
    "ReplayRound",
    "ReplayRow",
    "ReplayState",
    "batch_forms",
    "current_pipeline",
    "decode_replay",
    "decode_replay_batch",
    "encode_replay_states",
    "finite_hex",
    "rerouted_entries",
]


#: The fields of a ``replay`` request.
REPLAY_FIELDS: Final = ("pipeline", "layout", "dims", "conv_weight", "checkpoint", "rounds")


class ReplayRequest(TypedDict):
    """A decoded ``replay`` request, its floats parsed from hex."""

    pipeline: str
    layout: ReplayLayout
    dims: ReplayDims
    conv_weight: list[list[float]]
    checkpoint: ReplayState
    rounds: list[ReplayRound]
    #: Per value head, with ``dt_bias``, when the rows carry ``a`` and ``b``:
    #: ``g = -exp(a_log) * softplus(a + dt_bias)``, ``beta = sigmoid(b)``.
    a_log: NotRequired[list[float]]
    dt_bias: NotRequired[list[float]]


def decode_replay(request: Mapping[str, object], /) -> ReplayRequest:
    """A ``replay`` request's fields, checked against its dims and parsed from hex.

    Raises:
        ProtocolError: a field is missing, the wrong shape, or not a finite
            ``float.hex`` string (``bad-request``), named by its path.
    """
    pipeline = decode_pipeline(request)
    layout_name = required_field(request, "layout")
    layouts = [layout.value for layout in ReplayLayout]
    if layout_name not in layouts:
        raise bad_request(
            f"field 'layout' must be one of {layouts}, got {encode_value(layout_name)}"
        )
    layout = ReplayLayout(layout_name)
    dims = decode_dims(required_field(request, "dims"))
    weight = decode_weight(request, dims)
    checkpoint = decode_state(required_field(request, "checkpoint"), "checkpoint", dims)
    rounds = required_field(request, "rounds")
    if not isinstance(rounds, list) or not rounds:
        raise bad_request(f"field 'rounds' must be a non-empty list, got {encode_value(rounds)}")
    gates = "a_log" in request or "dt_bias" in request
    decoded = ReplayRequest(
        pipeline=pipeline,
        layout=layout,
        dims=dims,
        conv_weight=weight,
        checkpoint=checkpoint,
        rounds=[
            decode_round(item, f"rounds[{i}]", layout, dims, gates=gates)
            for i, item in enumerate(rounds)
        ],
    )
    parameters = decode_gate_parameters(request, dims)
    if parameters is not None:
        decoded["a_log"], decoded["dt_bias"] = parameters
    return decoded


def encode_replay_states(states: list[ReplayState], /) -> dict[str, object]:
    """A ``replay`` reply's value: the state after each round, its floats as ``float.hex``."""
    return {
        "states": [
            {
                "conv": [[value.hex() for value in row] for row in state["conv"]],
                "h": [[[value.hex() for value in row] for row in head] for head in state["h"]],
            }
            for state in states
        ]
    }
