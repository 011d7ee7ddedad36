# SPDX-License-Identifier: MIT OR Apache-2.0
"""The adapter protocol's own obligations, checked on any implementation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spec.harness.protocol import ErrorKind, Op

if TYPE_CHECKING:
    from spec.harness.driver import Implementation

U64_MAX: Final = 2**64 - 1


def _kind(reply: dict[str, object]) -> object:
    error = reply.get("error")
    return error.get("kind") if isinstance(error, dict) else None


@pytest.mark.clause("RB-PROTO-2")
def test_describe_names_the_implementation_and_a_64_bit_usize(impl: Implementation) -> None:
    reply = impl.request({"op": "describe"})
    assert set(reply) == {"ok"}, reply
    described = reply["ok"]
    assert isinstance(described, dict)
    assert set(described) == {"name", "usize_bits"}, described
    assert isinstance(described["name"], str)
    assert described["name"]
    assert described["usize_bits"] == 64


@pytest.mark.clause("RB-PROTO-4")
@given(op=st.one_of(st.text(max_size=12), st.sampled_from(["Parse", "set", "get", "ring-bytes"])))
def test_an_unknown_op_is_refused_as_unknown_op(impl: Implementation, op: str) -> None:
    if op in {known.value for known in Op}:
        return
    assert _kind(impl.request({"op": op})) == ErrorKind.UNKNOWN_OP.value


_BAD_REQUESTS: Final = [
    {"text": "snapshot"},
    {"op": 7},
    {"op": None},
    {"op": "parse"},
    {"op": "parse", "text": 7},
    {"op": "parse", "text": None},
    {"op": "row_bytes", "qkvz_elems": 1},
    {"op": "row_bytes", "qkvz_elems": -1, "nv": 1},
    {"op": "row_bytes", "qkvz_elems": U64_MAX + 1, "nv": 1},
    {"op": "row_bytes", "qkvz_elems": 1.5, "nv": 1},
    {"op": "row_bytes", "qkvz_elems": 1.0, "nv": 1},
    {"op": "row_bytes", "qkvz_elems": True, "nv": 1},
    {"op": "row_bytes", "qkvz_elems": "1", "nv": 1},
    {"op": "ring_bytes", "num_ssm_layers": 1, "row_bytes": 1, "k_ceiling": 1},
    {"op": "verify_entry"},
    {"op": "verify_entry", "mode": "Replay"},
    {"op": "verify_entry", "mode": 1},
    {"op": "trace"},
    {"op": "trace", "events": {"op": "get"}},
    {"op": "trace", "events": [{"op": "set"}]},
    {"op": "trace", "events": [{"op": "set", "mode": "snap"}]},
    {"op": "trace", "events": [{"op": "put"}]},
    {"op": "race", "events": ["get"]},
]


@pytest.mark.clause("RB-PROTO-4")
@pytest.mark.parametrize("request_", _BAD_REQUESTS, ids=str)
def test_a_malformed_request_is_refused_as_bad_request(
    impl: Implementation, request_: dict[str, object]
) -> None:
    reply = impl.request(request_)
    assert _kind(reply) == ErrorKind.BAD_REQUEST.value, reply


@pytest.mark.clause("RB-PROTO-1")
def test_the_process_serves_on_after_a_bad_request(impl: Implementation) -> None:
    assert _kind(impl.request({"op": "parse"})) == ErrorKind.BAD_REQUEST.value
    assert impl.request({"op": "parse", "text": "replay"}) == {"ok": "replay"}


@pytest.mark.clause("RB-PROTO-3")
@given(extra=st.dictionaries(st.sampled_from(["id", "x", "version"]), st.integers(), max_size=2))
def test_unknown_fields_are_ignored(impl: Implementation, extra: dict[str, int]) -> None:
    assert impl.request({"op": "parse", "text": "snapshot", **extra}) == {"ok": "snapshot"}
