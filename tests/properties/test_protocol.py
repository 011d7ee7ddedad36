# SPDX-License-Identifier: MIT OR Apache-2.0
"""The adapter protocol's own obligations, checked on any implementation.

Every failure here names the line sent and the reply received, in JSON, so
an adapter's authors in any language can act on it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ssm_rollback_spec.harness.failures import NonConformingReply
from ssm_rollback_spec.harness.protocol import (
    MAX_DEPTH,
    MAX_EVENTS,
    ErrorKind,
    Op,
    encode,
    loads_bounded,
)
from ssm_rollback_spec.harness.versions import ProtocolVersionError, described_version

from .conformance import exchange
from .strategies import texts

if TYPE_CHECKING:
    from ssm_rollback_spec.harness.driver import Implementation

U64_MAX: Final = 2**64 - 1
_DESCRIBED: Final = (
    'exactly {"ok": {"name": TEXT (not empty), "usize_bits": 64}}, and maybe "replay",'
    ' "model", "release" (TEXT, not empty) and "protocol" (a known version, "2.N")'
)


def _known_version(described: dict[str, object], /) -> bool:
    try:
        described_version(described)
    except ProtocolVersionError:
        return False
    return True


@pytest.mark.clause("RB-PROTO-2")
def test_describe_names_the_implementation_and_a_64_bit_usize(impl: Implementation) -> None:
    request = {"op": "describe"}
    reply = impl.request(request)
    described = reply.get("ok")
    if not (
        set(reply) == {"ok"}
        and isinstance(described, dict)
        # "replay" and "model" (optional): what its replay computes, the model
        # it loaded (docs/protocol.md).
        and set(described) - {"replay", "release", "model", "protocol"} == {"name", "usize_bits"}
        and isinstance(described["name"], str)
        # "release" (optional): which release is judged, for the results page.
        and (isinstance(described.get("release", "-"), str) and described.get("release") != "")
        and described["name"]
        and type(described["usize_bits"]) is int
        and described["usize_bits"] == 64
        # "protocol" (optional): the version it implements, one this suite knows.
        and _known_version(described)
    ):
        raise NonConformingReply(request, reply, _DESCRIBED)


@pytest.mark.clause("RB-PROTO-4")
@given(op=st.one_of(texts(max_size=12), st.sampled_from(["Parse", "set", "get", "ring-bytes"])))
@example(op="rewind")
@example(op="")
def test_an_unknown_op_is_refused_as_unknown_op(impl: Implementation, op: str) -> None:
    if op in {known.value for known in Op}:
        return
    exchange(impl, {"op": op})


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
@pytest.mark.parametrize("request_", _BAD_REQUESTS, ids=encode)
def test_a_malformed_request_is_refused_as_bad_request(
    impl: Implementation, request_: dict[str, object]
) -> None:
    exchange(impl, request_)


#: Numbers that are no integer as the protocol writes one: plain digits.
NOT_PLAIN_INTEGERS: Final = ("1.0", "1e2", "-0", "1E2", "0.0", "-0.0", "1e0", "10e-1", "-1")


@pytest.mark.clause("RB-PROTO-4")
@given(
    written=st.sampled_from(NOT_PLAIN_INTEGERS),
    field=st.sampled_from(["qkvz_elems", "nv"]),
)
@example(written="1.0", field="qkvz_elems")
@example(written="1e2", field="qkvz_elems")
@example(written="-0", field="nv")
def test_an_integer_written_with_a_fraction_an_exponent_or_a_sign_is_bad_request(
    impl: Implementation, written: str, field: str
) -> None:
    # Written by hand: no JSON encoder writes 1e2 or -0 for a number.
    other = "nv" if field == "qkvz_elems" else "qkvz_elems"
    line = f'{{"op":"row_bytes","{field}":{written},"{other}":1}}'
    request = loads_bounded(line, MAX_DEPTH)
    assert isinstance(request, dict)
    exchange(impl, request, line=line)


def _events(count: int, /) -> list[dict[str, str]]:
    # Every event publishes replay, so only the bound can make it fail.
    return [{"op": "set", "mode": "replay"}] * count


@pytest.mark.clause("RB-PROTO-4")
@pytest.mark.parametrize("count", [MAX_EVENTS, MAX_EVENTS + 1])
@pytest.mark.parametrize("op", ["trace", "race"])
def test_a_trace_or_race_holds_256_events_and_257_are_bad_request(
    impl: Implementation, op: str, count: int
) -> None:
    exchange(impl, {"op": op, "events": _events(count)})


def _nested(levels: int, container: str, /) -> object:
    value: object = 0
    for _ in range(levels):
        value = [value] if container == "array" else {"a": value}
    return value


@pytest.mark.clause("RB-PROTO-4")
@pytest.mark.parametrize("depth", [MAX_DEPTH, MAX_DEPTH + 1])
@pytest.mark.parametrize("container", ["array", "object"])
def test_a_request_nests_16_levels_deep_and_17_are_bad_request(
    impl: Implementation, depth: int, container: str
) -> None:
    # The request object is level 1; an ignored field carries the rest.
    exchange(impl, {"op": "parse", "text": "replay", "x": _nested(depth - 1, container)})


@pytest.mark.clause("RB-PROTO-1")
def test_the_process_serves_on_after_a_bad_request(impl: Implementation) -> None:
    exchange(impl, {"op": "parse"})
    exchange(impl, {"op": "parse", "text": "replay"})


@pytest.mark.clause("RB-PROTO-3")
@given(extra=st.dictionaries(st.sampled_from(["id", "x", "version"]), st.integers(), max_size=2))
@example(extra={"id": 7})
@example(extra={"mode": "junk"})
def test_unknown_fields_are_ignored(impl: Implementation, extra: dict[str, object]) -> None:
    exchange(impl, {"op": "parse", "text": "snapshot", **extra})


@pytest.mark.clause("RB-PROTO-3", "RB-PUB-2")
@given(mode=st.one_of(texts(max_size=8), st.integers(), st.none()))
@example(mode="junk")
@example(mode="replay")
def test_a_get_event_ignores_a_mode_field(impl: Implementation, mode: object) -> None:
    # A get uses no mode, so its mode field is one "a request does not use".
    exchange(impl, {"op": "trace", "events": [{"op": "get", "mode": mode}, {"op": "get"}]})


@pytest.mark.clause("RB-PROTO-3")
@pytest.mark.parametrize(
    ("line", "last"),
    [
        ('{"op":"parse","text":"Snapshot","text":"replay"}', "replay"),
        ('{"op":"parse","text":"replay","text":"snapshot "}', "snapshot "),
        ('{"op":"bogus","op":"parse","text":"snapshot"}', "snapshot"),
    ],
)
def test_of_duplicate_keys_the_last_one_counts(impl: Implementation, line: str, last: str) -> None:
    request = json.loads(line)
    assert request["text"] == last
    exchange(impl, request, line=line)


@pytest.mark.clause("RB-PROTO-1")
def test_a_line_starting_with_a_byte_order_mark_is_read_or_refused(impl: Implementation) -> None:
    # RFC 8259, section 8.1: a reader MAY ignore a BOM rather than refuse it.
    request = {"op": "parse", "text": "replay"}
    allowed: list[dict[str, object]] = [
        {"ok": "replay"},
        {"error": {"kind": ErrorKind.BAD_REQUEST.value}},
    ]
    exchange(impl, request, line="\ufeff" + encode(request), allowed=allowed)
