# SPDX-License-Identifier: MIT OR Apache-2.0
"""The opt-in ``replay`` operation's fields on the wire (docs/protocol.md, "replay").

Floats travel as ``float.hex`` strings, exactly. An adapter that offers the
operation decodes a request with :func:`decode_replay` and answers with
:func:`encode_replay_states`; one that does not answers ``unknown-op``
(:data:`.protocol.Op.REPLAY` is known to every decoder, so the reply is the
adapter's own). Apart from :mod:`.protocol`, so that the mutation gate, whose
tests run in-process against the reference that offers no replay, leaves it
to ``tests/test_replay_protocol.py`` (docs/mutation.md).
"""

from __future__ import annotations

import enum
import math
import re
from typing import TYPE_CHECKING, Final, NotRequired, TypedDict

from .protocol import bad_request, encode_value, required_field

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "ENGINE_PIPELINES",
    "HEX_FLOAT",
    "REPLAY_FIELDS",
    "ReplayDims",
    "ReplayLayout",
    "ReplayRequest",
    "ReplayRound",
    "ReplayRow",
    "ReplayState",
    "decode_replay",
    "encode_replay_states",
]


#: The fields of a ``replay`` request.
REPLAY_FIELDS: Final = ("pipeline", "layout", "dims", "conv_weight", "checkpoint", "rounds")

#: The largest head count, head size or conv kernel a replay request may give.
_MAX_DIM: Final = 4096

#: The pipelines that match an engine's own kernels (docs/engines.md): their
#: requests also carry the raw gate inputs the kernels take, ``a`` and ``b``
#: per row and ``a_log`` and ``dt_bias`` per layer.
ENGINE_PIPELINES: Final = ("vllm-bf16", "sglang-bf16", "fla-bf16")
_PIPELINES: Final = ("float64", "transformers-bf16", *ENGINE_PIPELINES)


class ReplayLayout(enum.Enum):
    """What a ring row holds: the pre-conv inputs, or the post-conv k and v."""

    #: ``qkv`` (pre-conv q, k, v), ``g`` and ``beta``: the minimal ring.
    PRE_CONV = "pre-conv"
    #: ``k_and_v`` (post-SiLU k then v), ``g`` and ``beta``, and a ``conv_window`` per round.
    POST_CONV = "post-conv"


class ReplayDims(TypedDict):
    """A layer's head shapes and conv kernel."""

    num_key_heads: int
    key_head_dim: int
    num_value_heads: int
    value_head_dim: int
    conv_kernel: int


class ReplayState(TypedDict):
    """A (conv, h) state: conv_dim x (conv_kernel - 1) columns, and nv x dk x dv."""

    conv: list[list[float]]
    h: list[list[list[float]]]


class ReplayRow(TypedDict):
    """One ring row: ``values`` is qkv (pre-conv) or k_and_v (post-conv); g, beta per value head.

    ``a`` and ``b``, per value head, when the request carries the raw gate
    inputs (``a_log`` and ``dt_bias``).
    """

    values: list[float]
    g: list[float]
    beta: list[float]
    a: NotRequired[list[float]]
    b: NotRequired[list[float]]


class ReplayRound(TypedDict):
    """One verify round: its window's rows, how many are accepted, and (post-conv) its columns."""

    rows: list[ReplayRow]
    accepted: int
    conv_window: NotRequired[list[list[float]]]


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


#: A float.hex string as C's ``%a`` and Python's ``float.hex`` write one.
HEX_FLOAT: Final = re.compile(
    r"[+-]?0[xX][0-9a-fA-F]{1,20}(\.[0-9a-fA-F]{0,20})?[pP][+-]?[0-9]{1,5}"
)


def _hex_float(value: object, where: str, /) -> float:
    if isinstance(value, str) and HEX_FLOAT.fullmatch(value):
        try:
            number = float.fromhex(value)
        except (ValueError, OverflowError):
            pass
        else:
            if math.isfinite(number):
                return number
    raise bad_request(f"{where} must be a finite float.hex string, got {encode_value(value)}")


def _floats(value: object, where: str, length: int, /) -> list[float]:
    if not isinstance(value, list) or len(value) != length:
        raise bad_request(
            f"{where} must be a list of {length} float.hex strings, got {encode_value(value)}"
        )
    return [_hex_float(item, f"{where}[{index}]") for index, item in enumerate(value)]


def _matrix(value: object, where: str, rows: int, columns: int, /) -> list[list[float]]:
    if not isinstance(value, list) or len(value) != rows:
        raise bad_request(f"{where} must be a list of {rows} rows, got {encode_value(value)}")
    return [_floats(row, f"{where}[{index}]", columns) for index, row in enumerate(value)]


def _dims(value: object, /) -> ReplayDims:
    names = ("num_key_heads", "key_head_dim", "num_value_heads", "value_head_dim", "conv_kernel")
    if not isinstance(value, dict):
        raise bad_request(f"field 'dims' must be an object, got {encode_value(value)}")
    for name in names:
        number = required_field(value, name)
        if type(number) is not int or not 1 <= number <= _MAX_DIM:
            raise bad_request(
                f"dims.{name} must be an integer in [1, {_MAX_DIM}], got {encode_value(number)}"
            )
    dims = ReplayDims(
        num_key_heads=value["num_key_heads"],
        key_head_dim=value["key_head_dim"],
        num_value_heads=value["num_value_heads"],
        value_head_dim=value["value_head_dim"],
        conv_kernel=value["conv_kernel"],
    )
    if dims["num_value_heads"] % dims["num_key_heads"]:
        raise bad_request("dims.num_value_heads must be a multiple of dims.num_key_heads")
    return dims


def _state(value: object, where: str, dims: ReplayDims, /) -> ReplayState:
    if not isinstance(value, dict):
        raise bad_request(f"field '{where}' must be an object, got {encode_value(value)}")
    conv_dim = 2 * dims["num_key_heads"] * dims["key_head_dim"]
    conv_dim += dims["num_value_heads"] * dims["value_head_dim"]
    conv = _matrix(
        required_field(value, "conv"), f"{where}.conv", conv_dim, dims["conv_kernel"] - 1
    )
    h = required_field(value, "h")
    heads = dims["num_value_heads"]
    if not isinstance(h, list) or len(h) != heads:
        raise bad_request(f"{where}.h must be a list of {heads} heads, got {encode_value(h)}")
    rows, columns = dims["key_head_dim"], dims["value_head_dim"]
    return ReplayState(
        conv=conv,
        h=[_matrix(head, f"{where}.h[{index}]", rows, columns) for index, head in enumerate(h)],
    )


def _round(
    value: object, where: str, layout: ReplayLayout, dims: ReplayDims, /, *, gates: bool
) -> ReplayRound:
    if not isinstance(value, dict):
        raise bad_request(f"{where} must be an object, got {encode_value(value)}")
    key_dim = dims["num_key_heads"] * dims["key_head_dim"]
    value_dim = dims["num_value_heads"] * dims["value_head_dim"]
    width = 2 * key_dim + value_dim if layout is ReplayLayout.PRE_CONV else key_dim + value_dim
    name = "qkv" if layout is ReplayLayout.PRE_CONV else "k_and_v"
    rows = required_field(value, "rows")
    if not isinstance(rows, list) or not rows:
        raise bad_request(f"{where}.rows must be a non-empty list, got {encode_value(rows)}")
    decoded: list[ReplayRow] = []
    for index, row in enumerate(rows):
        at = f"{where}.rows[{index}]"
        if not isinstance(row, dict):
            raise bad_request(f"{at} must be an object, got {encode_value(row)}")
        heads = dims["num_value_heads"]
        decoded_row = ReplayRow(
            values=_floats(required_field(row, name), f"{at}.{name}", width),
            g=_floats(required_field(row, "g"), f"{at}.g", heads),
            beta=_floats(required_field(row, "beta"), f"{at}.beta", heads),
        )
        if gates:
            decoded_row["a"] = _floats(required_field(row, "a"), f"{at}.a", heads)
            decoded_row["b"] = _floats(required_field(row, "b"), f"{at}.b", heads)
        decoded.append(decoded_row)
    accepted = required_field(value, "accepted")
    if type(accepted) is not int or not 1 <= accepted <= len(rows):
        raise bad_request(
            f"{where}.accepted must be an integer in [1, {len(rows)}], got {encode_value(accepted)}"
        )
    replay_round = ReplayRound(rows=decoded, accepted=accepted)
    if layout is ReplayLayout.POST_CONV:
        conv_dim = 2 * key_dim + value_dim
        window = _matrix(
            required_field(value, "conv_window"), f"{where}.conv_window", conv_dim, len(rows)
        )
        replay_round["conv_window"] = window
    return replay_round


def decode_replay(request: Mapping[str, object], /) -> ReplayRequest:
    """A ``replay`` request's fields, checked against its dims and parsed from hex.

    Raises:
        ProtocolError: a field is missing, the wrong shape, or not a finite
            ``float.hex`` string (``bad-request``), named by its path.
    """
    pipeline = required_field(request, "pipeline")
    if pipeline not in _PIPELINES:
        raise bad_request(
            f"field 'pipeline' must be one of {list(_PIPELINES)}, got {encode_value(pipeline)}"
        )
    layout_name = required_field(request, "layout")
    layouts = [layout.value for layout in ReplayLayout]
    if layout_name not in layouts:
        raise bad_request(
            f"field 'layout' must be one of {layouts}, got {encode_value(layout_name)}"
        )
    layout = ReplayLayout(layout_name)
    dims = _dims(required_field(request, "dims"))
    conv_dim = 2 * dims["num_key_heads"] * dims["key_head_dim"]
    conv_dim += dims["num_value_heads"] * dims["value_head_dim"]
    weight = _matrix(
        required_field(request, "conv_weight"), "conv_weight", conv_dim, dims["conv_kernel"]
    )
    checkpoint = _state(required_field(request, "checkpoint"), "checkpoint", dims)
    rounds = required_field(request, "rounds")
    if not isinstance(rounds, list) or not rounds:
        raise bad_request(f"field 'rounds' must be a non-empty list, got {encode_value(rounds)}")
    # The raw gate inputs come as a whole: a_log and dt_bias, then a and b on every row.
    gates = "a_log" in request or "dt_bias" in request
    decoded = ReplayRequest(
        pipeline=str(pipeline),
        layout=layout,
        dims=dims,
        conv_weight=weight,
        checkpoint=checkpoint,
        rounds=[
            _round(item, f"rounds[{i}]", layout, dims, gates=gates) for i, item in enumerate(rounds)
        ],
    )
    if gates:
        heads = dims["num_value_heads"]
        decoded["a_log"] = _floats(required_field(request, "a_log"), "a_log", heads)
        decoded["dt_bias"] = _floats(required_field(request, "dt_bias"), "dt_bias", heads)
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
