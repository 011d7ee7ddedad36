# SPDX-License-Identifier: MIT OR Apache-2.0
"""The protocol's message schemas (docs/protocol.md, "Message schemas") hold what the suite sends.

Every request of the shipped corpus (``vectors/``, ``vectors/replay/``) that
the suite expects an adapter to take is valid against its operation's request
schema, and every reply the reference adapter gives to them is valid against
the reply schema; a few malformed messages are refused.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any, Final

import jsonschema
import pytest

from ssm_rollback_spec import corpus
from ssm_rollback_spec.harness.adapter import REFERENCE_DESCRIBE
from ssm_rollback_spec.harness.protocol import Op
from ssm_rollback_spec.harness.subprocess_driver import SubprocessDriver

ROOT: Final = Path(__file__).resolve().parents[2]
SCHEMAS: Final = ROOT / "spec" / "harness" / "schemas"
VECTORS: Final = ROOT / "vectors"
#: The operations whose requests carry the replay corpus's matrices.
_REPLAY_OPS: Final = frozenset({"replay", "replay_batch"})
#: Error kinds a well-formed request may still be answered with.
_WELL_FORMED_ERRORS: Final = {"unknown-mode", "overflow", "unsupported"}


@functools.cache
def _schema(name: str, /) -> jsonschema.Draft202012Validator:
    document = json.loads((SCHEMAS / name).read_text(encoding="ascii"))
    jsonschema.Draft202012Validator.check_schema(document)
    return jsonschema.Draft202012Validator(document)


def _well_formed(case: corpus.Case, /) -> bool:
    """Whether every reply the case allows is an ok or an error of a well-formed request."""
    expected: list[dict[str, Any]] = case["expected"]
    return all("ok" in reply or reply["error"]["kind"] in _WELL_FORMED_ERRORS for reply in expected)


@functools.cache
def _sent() -> tuple[dict[str, Any], ...]:
    """Every well-formed request the shipped corpus sends, replay's and model's included.

    Read once a process: the two tests below send the same requests, and the
    replay corpus takes a second or more to load.
    """
    protocol = [case["request"] for case in corpus.load_cases(VECTORS) if _well_formed(case)]
    replay = [
        case.request for case in corpus.load_replay_cases(VECTORS / "replay") if not case.refused
    ]
    scripts = [case.request for case in corpus.load_model_cases(VECTORS / "replay")]
    # What check's race properties send besides: spans asked, fresh cells raced.
    events = [{"op": "set", "mode": "replay"}, {"op": "get"}]
    races: list[dict[str, Any]] = [
        {"op": "race", "events": events, "spans": True},
        {"op": "race_cells", "rounds": 3, "events": events, "spans": True},
        {"op": "race_cells", "rounds": 1, "events": events},
    ]
    return (*protocol, *replay, *scripts, *races)


def test_every_operation_has_a_request_and_a_reply_schema() -> None:
    names = {path.name for path in SCHEMAS.glob("*.schema.json")}
    for op in Op:
        assert f"{op.value}.request.schema.json" in names
        assert f"{op.value}.reply.schema.json" in names
    assert "error.reply.schema.json" in names


def _kind(request: dict[str, Any], /) -> tuple[object, ...]:
    """What a replay request's shape turns on: its operation, fields and their choices."""
    return (
        request["op"],
        tuple(sorted(request)),
        *(json.dumps(request.get(field)) for field in ("pipeline", "layout", "design", "dims")),
    )


def _smallest_of_each_kind(requests: tuple[dict[str, Any], ...], /) -> list[dict[str, Any]]:
    kept: dict[tuple[object, ...], dict[str, Any]] = {}
    for request in sorted(requests, key=lambda request: len(json.dumps(request))):
        kept.setdefault(_kind(request), request)
    return list(kept.values())


def _every_kind() -> list[dict[str, Any]]:
    """What the suite sends, of the replay operations only the smallest request of each kind."""
    sent = _sent()
    return [
        *(request for request in sent if request["op"] not in _REPLAY_OPS),
        *_smallest_of_each_kind(tuple(request for request in sent if request["op"] in _REPLAY_OPS)),
    ]


def test_every_request_the_suite_sends_is_valid() -> None:
    """Every request, but of the replay operations only the smallest of each kind.

    A replay request holds thousands of hex floats, which jsonschema takes
    about ten seconds to walk for the whole corpus: the long runs' test below
    validates every one.
    """
    sent = _sent()
    ops = {str(request["op"]) for request in sent}
    assert ops == {op.value for op in Op} - {"describe"}
    requests = [*_every_kind(), {"op": "describe"}]
    replay = [request for request in requests if request["op"] in _REPLAY_OPS]
    assert {request["op"] for request in replay} == _REPLAY_OPS
    assert len(replay) < sum(request["op"] in _REPLAY_OPS for request in sent)
    for request in requests:
        _schema(f"{request['op']}.request.schema.json").validate(request)


@pytest.mark.slow
def test_every_replay_request_of_the_corpus_is_valid() -> None:
    for request in _sent():
        if request["op"] in _REPLAY_OPS:
            _schema(f"{request['op']}.request.schema.json").validate(request)


def test_every_reply_of_the_reference_adapter_is_valid() -> None:
    # One process for all: a trace's modes after an earlier one differ, never their shape.
    driver = SubprocessDriver([sys.executable, "-m", "ssm_rollback_spec.harness.adapter"])
    try:
        replies = [
            (str(request["op"]), driver.request(request))
            # Its replay replies are all one refusal (unknown-op): one request of each kind.
            for request in [{"op": "describe"}, *_every_kind()]
        ]
    finally:
        driver.close()
    errors: list[dict[str, Any]] = [reply for _, reply in replies if "error" in reply]
    assert replies[0][1] == {"ok": REFERENCE_DESCRIBE}
    for op, reply in replies:
        _schema(f"{op}.reply.schema.json").validate(reply)
    kinds = {reply["error"]["kind"] for reply in errors}
    assert "unknown-op" in kinds  # replay, replay_batch and model are not offered


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("row_bytes.request.schema.json", {"op": "row_bytes", "qkvz_elems": -1, "nv": 0}),
        ("row_bytes.request.schema.json", {"op": "row_bytes", "qkvz_elems": 2**64, "nv": 0}),
        ("trace.request.schema.json", {"op": "trace", "events": [{"op": "get"}] * 257}),
        ("trace.request.schema.json", {"op": "trace", "events": [{"op": "set"}]}),
        ("verify_entry.request.schema.json", {"op": "verify_entry", "mode": "Replay"}),
        ("race_cells.request.schema.json", {"op": "race_cells", "rounds": 0, "events": []}),
        ("replay.request.schema.json", {"op": "replay", "pipeline": "float64"}),
        ("describe.reply.schema.json", {"ok": {"name": "x", "usize_bits": 32}}),
        ("describe.reply.schema.json", {"ok": {"name": "x", "usize_bits": 64, "protocol": "3"}}),
        ("parse.reply.schema.json", {"ok": "replay", "error": {"kind": "overflow"}}),
        ("parse.reply.schema.json", {"error": {"kind": "oops", "message": ""}}),
        ("replay.reply.schema.json", {"ok": {"states": [{"conv": [[1.5]], "h": []}]}}),
        ("error.reply.schema.json", {"error": {"kind": "bad-request"}}),
    ],
)
def test_a_malformed_message_is_refused(name: str, message: dict[str, object]) -> None:
    assert not _schema(name).is_valid(message)
