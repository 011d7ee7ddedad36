# SPDX-License-Identifier: MIT OR Apache-2.0
"""The fields the ``replay`` and ``replay_batch`` operations share on the wire.

Floats as ``float.hex`` strings, the pipelines and their old names, a
layer's dims, a (conv, h) state and a window's rows: each decoded against the
request's dims, or refused as ``bad-request`` named by its path.
:mod:`.replay_wire` (a ``replay`` request) and :mod:`.replay_batch_wire` (a
``replay_batch`` one) decode their requests with these; :mod:`.replay_wire`
re-exports the public names.
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
    "PIPELINE_ALIASES",
    "ReplayDims",
    "ReplayLayout",
    "ReplayRound",
    "ReplayRow",
    "ReplayState",
    "current_pipeline",
    "decode_dims",
    "decode_gate_parameters",
    "decode_pipeline",
    "decode_round",
    "decode_rows",
    "decode_state",
    "decode_weight",
    "finite_hex",
]


#: The largest head count, head size or conv kernel a replay request may give.
_MAX_DIM: Final = 4096

#: The pipelines that match an engine's own kernels (docs/engines.md): their
#: requests also carry the raw gate inputs the kernels take, ``a`` and ``b``
#: per row and ``a_log`` and ``dt_bias`` per layer.
ENGINE_PIPELINES: Final = ("vllm-bf16", "sglang-bf16", "fla-bf16", "ggml-f32")
_PIPELINES: Final = ("float64", "transformers-bf16", *ENGINE_PIPELINES)

#: Pipeline names protocol version 2 accepted and later renamed, each with its
#: current name (docs/protocol.md, "Changes", 2.4). Until the
#: protocol version changes, an old name is the current one wherever the wire
#: carries a pipeline: in a request, and in a ``describe`` that lists pipelines.
PIPELINE_ALIASES: Final = {"bf16-rows-fp32-state": "transformers-bf16"}


def current_pipeline(name: str, /) -> str:
    """The pipeline's current name: ``name`` itself, unless it is an old name of one."""
    return PIPELINE_ALIASES.get(name, name)


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


#: A float.hex string as C's ``%a`` and Python's ``float.hex`` write one.
HEX_FLOAT: Final = re.compile(
    r"[+-]?0[xX][0-9a-fA-F]{1,20}(\.[0-9a-fA-F]{0,20})?[pP][+-]?[0-9]{1,5}"
)


def finite_hex(value: object, /) -> float | None:
    """The value of a finite ``float.hex`` string of the protocol's spelling, or None."""
    if not isinstance(value, str) or not HEX_FLOAT.fullmatch(value):
        return None
    try:
        number = float.fromhex(value)
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _hex_float(value: object, where: str, /) -> float:
    number = finite_hex(value)
    if number is None:
        raise bad_request(f"{where} must be a finite float.hex string, got {encode_value(value)}")
    return number


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


def decode_dims(value: object, /) -> ReplayDims:
    """A request's ``dims``: five integers in range, the value heads a multiple of the key heads."""
    names = ("num_key_heads", "key_head_dim", "num_value_heads", "value_head_dim", "conv_kernel")
    if not isinstance(value, dict):
        raise bad_request(f"field 'dims' must be an object, got {encode_value(value)}")
    for name in names:
        number = required_field(value, name)
        # A conv of one tap keeps no columns: the conv state would be empty.
        least = 2 if name == "conv_kernel" else 1
        if type(number) is not int or not least <= number <= _MAX_DIM:
            raise bad_request(
                f"dims.{name} must be an integer in [{least}, {_MAX_DIM}], "
                f"got {encode_value(number)}"
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


def decode_state(value: object, where: str, dims: ReplayDims, /) -> ReplayState:
    """A (conv, h) state of ``dims``' shape, named ``where`` in a refusal."""
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


def decode_round(
    value: object, where: str, layout: ReplayLayout, dims: ReplayDims, /, *, gates: bool
) -> ReplayRound:
    """One window: its rows, an accepted count in [1, rows], and (post-conv) its conv columns."""
    if not isinstance(value, dict):
        raise bad_request(f"{where} must be an object, got {encode_value(value)}")
    key_dim = dims["num_key_heads"] * dims["key_head_dim"]
    value_dim = dims["num_value_heads"] * dims["value_head_dim"]
    rows = required_field(value, "rows")
    decoded = decode_rows(rows, f"{where}.rows", layout, dims, gates=gates)
    accepted = required_field(value, "accepted")
    if type(accepted) is not int or not 1 <= accepted <= len(decoded):
        raise bad_request(
            f"{where}.accepted must be an integer in [1, {len(decoded)}], "
            f"got {encode_value(accepted)}"
        )
    replay_round = ReplayRound(rows=decoded, accepted=accepted)
    if layout is ReplayLayout.POST_CONV:
        conv_dim = 2 * key_dim + value_dim
        window = _matrix(
            required_field(value, "conv_window"), f"{where}.conv_window", conv_dim, len(decoded)
        )
        replay_round["conv_window"] = window
    return replay_round


def decode_rows(
    rows: object, where: str, layout: ReplayLayout, dims: ReplayDims, /, *, gates: bool
) -> list[ReplayRow]:
    """A non-empty list of ring rows of ``layout``, with ``a`` and ``b`` when ``gates``."""
    key_dim = dims["num_key_heads"] * dims["key_head_dim"]
    value_dim = dims["num_value_heads"] * dims["value_head_dim"]
    width = 2 * key_dim + value_dim if layout is ReplayLayout.PRE_CONV else key_dim + value_dim
    name = "qkv" if layout is ReplayLayout.PRE_CONV else "k_and_v"
    if not isinstance(rows, list) or not rows:
        raise bad_request(f"{where} must be a non-empty list, got {encode_value(rows)}")
    decoded: list[ReplayRow] = []
    for index, row in enumerate(rows):
        at = f"{where}[{index}]"
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
    return decoded


def decode_pipeline(request: Mapping[str, object], /) -> str:
    """The request's pipeline under its current name, or ``bad-request`` for an unknown one."""
    pipeline = required_field(request, "pipeline")
    if not isinstance(pipeline, str) or current_pipeline(pipeline) not in _PIPELINES:
        raise bad_request(
            f"field 'pipeline' must be one of {list(_PIPELINES)}, got {encode_value(pipeline)}"
        )
    return current_pipeline(pipeline)


def decode_weight(request: Mapping[str, object], dims: ReplayDims, /) -> list[list[float]]:
    """The conv weight: one row of ``conv_kernel`` taps per conv channel."""
    conv_dim = 2 * dims["num_key_heads"] * dims["key_head_dim"]
    conv_dim += dims["num_value_heads"] * dims["value_head_dim"]
    return _matrix(
        required_field(request, "conv_weight"), "conv_weight", conv_dim, dims["conv_kernel"]
    )


def decode_gate_parameters(
    request: Mapping[str, object], dims: ReplayDims, /
) -> tuple[list[float], list[float]] | None:
    """``a_log`` and ``dt_bias``, when the request carries the raw gate inputs; else None.

    The raw gate inputs come as a whole: ``a_log`` and ``dt_bias``, then ``a``
    and ``b`` on every row.
    """
    if "a_log" not in request and "dt_bias" not in request:
        return None
    heads = dims["num_value_heads"]
    a_log = _floats(required_field(request, "a_log"), "a_log", heads)
    return a_log, _floats(required_field(request, "dt_bias"), "dt_bias", heads)
