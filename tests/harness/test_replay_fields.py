# SPDX-License-Identifier: MIT OR Apache-2.0
"""The replay requests' fields, decoded one by one: each value kept, each refusal naming its path.

The decoders run here on the smallest dims there are (one head of one
column each way, a conv of two taps: three conv channels), so each
refusal's message can be written out whole.
"""

from __future__ import annotations

from typing import Final

import pytest

from ssm_rollback_spec.harness.protocol import ErrorKind, ProtocolError
from ssm_rollback_spec.harness.replay_fields import (
    ReplayDims,
    ReplayLayout,
    decode_dims,
    decode_gate_parameters,
    decode_round,
    decode_rows,
    decode_state,
    decode_weight,
    finite_hex,
)

_DIMS: Final = ReplayDims(
    num_key_heads=1, key_head_dim=1, num_value_heads=1, value_head_dim=1, conv_kernel=2
)
_ONE: Final = "0x1.0000000000000p+0"
_HALF: Final = "0x1.0000000000000p-1"
_PRE: Final = ReplayLayout.PRE_CONV
_POST: Final = ReplayLayout.POST_CONV


def _refused(error: pytest.ExceptionInfo[ProtocolError], /) -> str:
    assert error.value.kind is ErrorKind.BAD_REQUEST
    return str(error.value)


def _row(**changes: object) -> dict[str, object]:
    return {"qkv": [_ONE, _HALF, _ONE], "g": [_HALF], "beta": [_ONE]} | changes


def test_dims_that_are_not_an_object_or_share_no_heads_are_refused() -> None:
    with pytest.raises(ProtocolError) as raised:
        decode_dims(3)
    assert _refused(raised) == "field 'dims' must be an object, got 3"
    uneven = dict(_DIMS) | {"num_key_heads": 2, "num_value_heads": 3}
    with pytest.raises(ProtocolError) as raised:
        decode_dims(uneven)
    assert _refused(raised) == "dims.num_value_heads must be a multiple of dims.num_key_heads"


def test_the_raw_gate_inputs_come_as_a_whole_or_not_at_all() -> None:
    assert decode_gate_parameters({}, _DIMS) is None
    both = {"a_log": [_ONE], "dt_bias": [_HALF]}
    assert decode_gate_parameters(both, _DIMS) == ([1.0], [0.5])
    for present, missing in (("a_log", "dt_bias"), ("dt_bias", "a_log")):
        with pytest.raises(ProtocolError) as raised:
            decode_gate_parameters({present: [_ONE]}, _DIMS)
        assert _refused(raised) == f"missing field '{missing}'"


@pytest.mark.parametrize("name", ["a_log", "dt_bias"])
def test_a_gate_parameter_of_another_length_is_named(name: str) -> None:
    request = {"a_log": [_ONE], "dt_bias": [_HALF]} | {name: [_ONE, _ONE]}
    with pytest.raises(ProtocolError) as raised:
        decode_gate_parameters(request, _DIMS)
    assert _refused(raised) == (
        f'{name} must be a list of 1 float.hex strings, got ["{_ONE}", "{_ONE}"]'
    )


def test_a_conv_weight_is_a_row_of_taps_per_channel_named_by_its_path() -> None:
    weight = [[_ONE, _HALF], [_HALF, _ONE], [_ONE, _ONE]]
    assert decode_weight({"conv_weight": weight}, _DIMS) == [[1.0, 0.5], [0.5, 1.0], [1.0, 1.0]]
    with pytest.raises(ProtocolError) as raised:
        decode_weight({"conv_weight": "taps"}, _DIMS)
    assert _refused(raised) == 'conv_weight must be a list of 3 rows, got "taps"'
    with pytest.raises(ProtocolError) as raised:
        decode_weight({"conv_weight": [*weight[:2], [_ONE]]}, _DIMS)
    assert _refused(raised) == (
        f'conv_weight[2] must be a list of 2 float.hex strings, got ["{_ONE}"]'
    )


def test_a_state_keeps_its_conv_and_its_heads() -> None:
    state = {"conv": [[_ONE], [_HALF], [_ONE]], "h": [[[_HALF]]]}
    assert decode_state(state, "state", _DIMS) == {"conv": [[1.0], [0.5], [1.0]], "h": [[[0.5]]]}


@pytest.mark.parametrize(
    ("state", "message"),
    [
        pytest.param(3, "field 'state' must be an object, got 3", id="not-an-object"),
        pytest.param(
            {"conv": [[_ONE]], "h": [[[_HALF]]]},
            f'state.conv must be a list of 3 rows, got [["{_ONE}"]]',
            id="conv-rows",
        ),
        pytest.param(
            {"conv": [[_ONE], [_HALF], [_ONE]], "h": 3},
            "state.h must be a list of 1 heads, got 3",
            id="h-not-a-list",
        ),
        pytest.param(
            {"conv": [[_ONE], [_HALF], [_ONE]], "h": []},
            "state.h must be a list of 1 heads, got []",
            id="h-no-head",
        ),
        pytest.param(
            {"conv": [[_ONE], [_HALF], [_ONE]], "h": [3]},
            "state.h[0] must be a list of 1 rows, got 3",
            id="a-head-not-a-list",
        ),
    ],
)
def test_a_state_of_another_shape_is_named_by_its_path(state: object, message: str) -> None:
    with pytest.raises(ProtocolError) as raised:
        decode_state(state, "state", _DIMS)
    assert _refused(raised) == message


def test_rows_keep_their_raw_gate_inputs_when_the_request_carries_them() -> None:
    row = _row(a=[_HALF], b=[_ONE])
    assert decode_rows([row], "rows", _PRE, _DIMS, gates=True) == [
        {"values": [1.0, 0.5, 1.0], "g": [0.5], "beta": [1.0], "a": [0.5], "b": [1.0]}
    ]
    assert decode_rows([row], "rows", _PRE, _DIMS, gates=False) == [
        {"values": [1.0, 0.5, 1.0], "g": [0.5], "beta": [1.0]}
    ]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        pytest.param(3, "rows[0] must be an object, got 3", id="not-an-object"),
        pytest.param(
            _row(qkv=[_ONE], a=[_HALF], b=[_ONE]),
            f'rows[0].qkv must be a list of 3 float.hex strings, got ["{_ONE}"]',
            id="qkv",
        ),
        pytest.param(
            _row(a=[], b=[_ONE]), "rows[0].a must be a list of 1 float.hex strings, got []", id="a"
        ),
        pytest.param(
            _row(a=[_HALF], b=[]), "rows[0].b must be a list of 1 float.hex strings, got []", id="b"
        ),
    ],
)
def test_a_row_of_another_shape_is_named_by_its_path(row: object, message: str) -> None:
    with pytest.raises(ProtocolError) as raised:
        decode_rows([row], "rows", _PRE, _DIMS, gates=True)
    assert _refused(raised) == message


def test_a_round_keeps_its_rows_gates_and_post_conv_window() -> None:
    row = _row(a=[_HALF], b=[_ONE])
    decoded = decode_round({"rows": [row], "accepted": 1}, "round", _PRE, _DIMS, gates=True)
    assert decoded == {
        "rows": [{"values": [1.0, 0.5, 1.0], "g": [0.5], "beta": [1.0], "a": [0.5], "b": [1.0]}],
        "accepted": 1,
    }
    post = {"k_and_v": [_ONE, _HALF], "g": [_HALF], "beta": [_ONE]}
    window = [[_ONE], [_HALF], [_ONE]]
    value = {"rows": [post], "accepted": 1, "conv_window": window}
    assert decode_round(value, "round", _POST, _DIMS, gates=False) == {
        "rows": [{"values": [1.0, 0.5], "g": [0.5], "beta": [1.0]}],
        "accepted": 1,
        "conv_window": [[1.0], [0.5], [1.0]],
    }


def test_a_round_of_another_shape_is_named_by_its_path() -> None:
    with pytest.raises(ProtocolError) as raised:
        decode_round(3, "rounds[2]", _PRE, _DIMS, gates=False)
    assert _refused(raised) == "rounds[2] must be an object, got 3"
    post = {"k_and_v": [_ONE, _HALF], "g": [_HALF], "beta": [_ONE]}
    value = {"rows": [post], "accepted": 1, "conv_window": [[_ONE]]}
    with pytest.raises(ProtocolError) as raised:
        decode_round(value, "rounds[2]", _POST, _DIMS, gates=False)
    assert _refused(raised) == f'rounds[2].conv_window must be a list of 3 rows, got [["{_ONE}"]]'


def test_a_finite_hex_is_read_and_a_value_past_the_largest_float_is_none() -> None:
    assert finite_hex(_HALF) == 0.5
    assert finite_hex("0x1.fffffffffffffp+1023") == 1.7976931348623157e308
    assert finite_hex("0x1p+1024") is None
    assert finite_hex("inf") is None
