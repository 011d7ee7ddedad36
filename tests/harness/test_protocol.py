# SPDX-License-Identifier: MIT OR Apache-2.0
"""The harness's own parts: request and reply checking, the judge, the adapter core."""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING, Final

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ssm_rollback_spec import __version__, model, rollback
from ssm_rollback_spec.first_write_wins import FirstWriteWins
from ssm_rollback_spec.harness import protocol
from ssm_rollback_spec.harness.adapter import REFERENCE_DESCRIBE, main, respond, serve
from ssm_rollback_spec.harness.driver import InProcessDriver
from ssm_rollback_spec.harness.oracle import allowed_replies, blamed_clauses
from ssm_rollback_spec.harness.protocol import (
    ErrorKind,
    MalformedReplyError,
    ProtocolError,
    decode_reply,
)
from ssm_rollback_spec.harness.python_impl import fresh_module
from ssm_rollback_spec.harness.versions import CURRENT
from tests.properties.strategies import mode_texts, texts, usizes

if TYPE_CHECKING:
    from ssm_rollback_spec.rollback import SsmRollbackMode

U64_MAX: Final = 2**64 - 1


def _refusal(line: str) -> tuple[str, str]:
    with pytest.raises(ProtocolError) as raised:
        protocol.decode_request(line)
    return raised.value.kind.value, str(raised.value)


@pytest.mark.parametrize(
    ("line", "kind", "message"),
    [
        ("", "bad-request", "not a JSON line: Expecting value: line 1 column 1 (char 0)"),
        ("[1]", "bad-request", "a request must be a JSON object, got [1]"),
        ("{}", "bad-request", "missing field 'op'"),
        ('{"op": 1}', "bad-request", "field 'op' must be a string, got 1"),
        ('{"op": "Parse"}', "unknown-op", 'unknown op "Parse"'),
        ('{"op": "parse"}', "bad-request", "missing field 'text'"),
        ('{"op": "parse", "text": 7}', "bad-request", "field 'text' must be a string, got 7"),
        ('{"op": "réplay"}', "unknown-op", 'unknown op "réplay"'),
        (
            '{"op": "row_bytes", "qkvz_elems": -1, "nv": 0}',
            "bad-request",
            f"field 'qkvz_elems' must be an integer in [0, {U64_MAX}], got -1",
        ),
        (
            '{"op": "row_bytes", "qkvz_elems": 1, "nv": true}',
            "bad-request",
            f"field 'nv' must be an integer in [0, {U64_MAX}], got true",
        ),
        (
            '{"op": "verify_entry", "mode": "Replay"}',
            "bad-request",
            'field \'mode\' must be "snapshot" or "replay", got "Replay"',
        ),
        ('{"op": "trace", "events": 3}', "bad-request", "field 'events' must be a list, got 3"),
        ('{"op": "race", "events": [1]}', "bad-request", "events[0] must be an object, got 1"),
        (
            '{"op": "trace", "events": [{"op": "get"}, {"op": "put"}]}',
            "bad-request",
            'events[1] field \'op\' must be "set" or "get", got "put"',
        ),
        (
            '{"op": "trace", "events": [{"op": "set", "mode": "x"}]}',
            "bad-request",
            'events[0] field \'mode\' must be "snapshot" or "replay", got "x"',
        ),
    ],
)
def test_a_refused_request_says_exactly_what_was_wrong(line: str, kind: str, message: str) -> None:
    assert _refusal(line) == (kind, message)


def test_a_request_keeps_only_the_fields_its_op_uses() -> None:
    line = '{"op": "trace", "id": 4, "events": [{"op": "set", "mode": "replay", "x": 1}]}'
    assert protocol.decode_request(line) == {
        "op": "trace",
        "events": [{"op": "set", "mode": "replay"}],
    }


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("nope", "not a JSON line (Expecting value: line 1 column 1 (char 0))"),
        ("[]", 'not {"ok": VALUE} or {"error": {"kind": ..., "message": ...}}'),
        ('{"ok": 1, "error": 2}', 'not {"ok": VALUE} or {"error": {"kind": ..., "message": ...}}'),
        ('{"result": 1}', 'not {"ok": VALUE} or {"error": {"kind": ..., "message": ...}}'),
        ('{"error": "overflow"}', '"error" must be {"kind": KIND, "message": TEXT}'),
        ('{"error": {"kind": "overflow"}}', '"error" must be {"kind": KIND, "message": TEXT}'),
        (
            '{"error": {"kind": "overflow", "message": 3}}',
            '"error" must be {"kind": KIND, "message": TEXT}',
        ),
        (
            '{"error": {"kind": "boom", "message": ""}}',
            (
                "error kind \"boom\" is not one of ['unknown-mode', 'overflow', "
                "'unsupported', 'unknown-op', 'bad-request']"
            ),
        ),
    ],
)
def test_a_malformed_reply_says_exactly_what_was_wrong(line: str, message: str) -> None:
    with pytest.raises(MalformedReplyError) as raised:
        decode_reply(line)
    assert str(raised.value) == message


@given(value=st.one_of(st.none(), st.integers(), texts(), st.lists(st.integers())))
def test_every_ok_reply_decodes_to_itself(value: object) -> None:
    assert decode_reply(json.dumps({"ok": value})) == {"ok": value}


def test_a_long_value_is_shown_shortened_to_its_limit() -> None:
    assert protocol.encode_value("x" * 10, limit=8) == '"xxxx...'
    assert protocol.encode_value("x" * 6, limit=8) == '"xxxxxx"'
    assert protocol.encode_value(object()).startswith("<object object at ")
    assert len(protocol.encode_value(list(range(100)))) == 80


@given(value=st.one_of(st.integers(), st.booleans(), st.floats(allow_nan=False), st.none()))
def test_the_judge_compares_json_values_by_type_as_well_as_value(value: object) -> None:
    for other in (1, True, 1.0, None, 0, False, [1], {"a": 1}):
        same = type(value) is type(other) and value == other
        assert protocol.reply_matches({"ok": value}, {"ok": other}) is same


@given(text=mode_texts, wrong=texts(max_size=30))
def test_the_judge_demands_the_exact_parse_error_text(text: str, wrong: str) -> None:
    expected = model.parse(text)
    if not isinstance(expected, model.Rejected) or wrong == expected.message:
        return
    [allowed] = allowed_replies({"op": "parse", "text": text})
    reply = {"error": {"kind": "unknown-mode", "message": wrong}}
    assert not protocol.reply_matches(reply, allowed)
    right = {"error": {"kind": "unknown-mode", "message": expected.message}}
    assert protocol.reply_matches(right, allowed)


@given(k=usizes, wrong_kind=st.sampled_from([k.value for k in ErrorKind]))
def test_the_judge_takes_any_message_but_only_the_right_kind(k: int, wrong_kind: str) -> None:
    request = {"op": "ring_bytes", "num_ssm_layers": 2**63, "row_bytes": 2}
    request |= {"k_ceiling": max(k, 2), "mtp_state_slots": 1}
    [allowed] = allowed_replies(request)
    reply = {"error": {"kind": wrong_kind, "message": "anything"}}
    assert protocol.reply_matches(reply, allowed) is (wrong_kind == "overflow")
    assert not protocol.reply_matches({"ok": 0}, allowed)


def test_the_judge_compares_lists_and_objects_member_by_member() -> None:
    assert protocol.reply_matches({"ok": ["replay"]}, {"ok": ["replay"]})
    assert not protocol.reply_matches({"ok": ["replay"]}, {"ok": ["replay", "replay"]})
    assert not protocol.reply_matches({"ok": ["replay"]}, {"ok": ["snapshot"]})
    assert protocol.reply_matches({"ok": {"a": [1]}}, {"ok": {"a": [1]}})
    assert not protocol.reply_matches({"ok": {"a": [1]}}, {"ok": {"b": [1]}})
    assert not protocol.reply_matches({"ok": {"a": [1]}}, {"ok": {"a": [True]}})
    assert not protocol.reply_matches({"error": "x"}, {"error": {"kind": "overflow"}})
    assert not protocol.reply_matches({"ok": None}, {"error": {"kind": "overflow"}})


def test_describe_is_not_judged_by_the_oracle() -> None:
    with pytest.raises(ValueError, match=r"^describe has no single expected reply$"):
        allowed_replies({"op": "describe"})


def test_the_reference_adapter_describes_itself() -> None:
    assert respond(rollback, '{"op": "describe"}') == {
        "ok": {
            "name": "ssm_rollback_spec.rollback (Python reference)",
            "usize_bits": 64,
            "release": __version__,
            "protocol": str(CURRENT),
        }
    }


def test_the_adapter_passes_the_implementations_messages_on() -> None:
    overflow = respond(rollback, f'{{"op": "row_bytes", "qkvz_elems": {U64_MAX}, "nv": 0}}')
    assert overflow == protocol.error_reply(
        ErrorKind.OVERFLOW,
        f"ssm_replay_row_bytes(qkvz_elems={U64_MAX}, nv=0) = {2 * U64_MAX} "
        f"exceeds usize max {U64_MAX}",
    )
    refused = respond(rollback, '{"op": "verify_entry", "mode": "replay"}')
    assert refused == protocol.error_reply(
        ErrorKind.UNSUPPORTED,
        "speculative verify refused: ssm-rollback-mode 'replay' "
        "has no capture or replay implementation",
    )
    assert respond(rollback, '{"op": "parse"}') == protocol.error_reply(
        ErrorKind.BAD_REQUEST, "missing field 'text'"
    )


class _Raising:
    """An implementation whose read of the mode fails."""

    def __getattr__(self, name: str) -> object:
        return getattr(rollback, name)

    def ssm_rollback_mode(self) -> SsmRollbackMode:
        raise RuntimeError("the read failed")


class _FailsOnce(_Raising):
    """Only the first read fails."""

    def __init__(self) -> None:
        self._reads = 0

    def ssm_rollback_mode(self) -> SsmRollbackMode:
        self._reads += 1
        if self._reads == 1:
            raise RuntimeError("the first read failed")
        return rollback.SsmRollbackMode.SNAPSHOT


def test_one_failing_call_in_a_race_is_raised() -> None:
    line = json.dumps({"op": "race", "events": [{"op": "get"}, {"op": "get"}]})
    with pytest.raises(RuntimeError, match=r"^the first read failed$"):
        respond(_FailsOnce(), line)  # type: ignore[arg-type]


class _ReturnsText(_Raising):
    def ssm_rollback_mode(self) -> SsmRollbackMode:
        return "snapshot"  # type: ignore[return-value]


@pytest.mark.parametrize("op", ["trace", "race"])
def test_a_failing_call_in_a_trace_or_race_is_raised_not_hidden(op: str) -> None:
    line = json.dumps({"op": op, "events": [{"op": "get"}, {"op": "get"}]})
    with pytest.raises(RuntimeError, match=r"^the read failed$"):
        respond(_Raising(), line)  # type: ignore[arg-type]


def test_a_mode_of_the_wrong_type_is_named() -> None:
    with pytest.raises(TypeError) as raised:
        respond(_ReturnsText(), '{"op": "trace", "events": [{"op": "get"}]}')  # type: ignore[arg-type]
    assert str(raised.value) == "the implementation returned 'snapshot', not an SsmRollbackMode"


@pytest.mark.parametrize("events", [[], [{"op": "get"}]])
def test_a_race_of_zero_or_one_call_still_answers(events: list[dict[str, str]]) -> None:
    reply = InProcessDriver.load().request({"op": "race", "events": events})
    assert reply == {"ok": ["snapshot"] * len(events)}


def test_the_reference_driver_names_itself_and_its_import_path() -> None:
    driver = InProcessDriver.load()
    assert driver.name == "ssm_rollback_spec.rollback (in-process)"
    assert repr(driver) == "InProcessDriver('ssm_rollback_spec.rollback')"
    assert driver.python.import_path == "ssm_rollback_spec.rollback"
    assert driver.python.new_cell is not None
    assert driver.python.new_cell().get() is None


def test_a_cell_shows_its_value() -> None:
    cell: FirstWriteWins[int] = FirstWriteWins()
    assert repr(cell) == "FirstWriteWins(<empty>)"
    cell.set(3)
    assert repr(cell) == "FirstWriteWins(3)"


def test_serve_answers_each_line_in_order_until_end_of_input() -> None:
    requests = io.BytesIO(b'{"op": "parse", "text": "replay"}\n\xff\n{"op": "describe"}\n')
    replies = io.BytesIO()
    serve(rollback, requests, replies)
    lines = replies.getvalue().split(b"\n")
    assert lines[-1] == b""
    assert [json.loads(line) for line in lines[:-1]] == [
        {"ok": "replay"},
        {
            "error": {
                "kind": "bad-request",
                "message": "not UTF-8: 'utf-8' codec can't decode byte 0xff in position 0: "
                "invalid start byte",
            }
        },
        {"ok": dict(REFERENCE_DESCRIBE)},
    ]


def test_main_serves_standard_input(monkeypatch: pytest.MonkeyPatch) -> None:
    replies = io.BytesIO()
    stdin = io.TextIOWrapper(io.BytesIO(b'{"op": "parse", "text": "snapshot"}\n'))
    stdout = io.TextIOWrapper(replies)
    monkeypatch.setattr("sys.stdin", stdin)
    monkeypatch.setattr("sys.stdout", stdout)
    assert main([]) == 0
    assert replies.getvalue() == b'{"ok":"snapshot"}\n'


class _AlwaysReplay(_Raising):
    def parse_ssm_rollback_mode(self, text: str, /) -> SsmRollbackMode:
        del text
        return rollback.SsmRollbackMode.REPLAY


def test_main_serves_the_api_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    replies = io.BytesIO()
    stdin = io.TextIOWrapper(io.BytesIO(b'{"op": "parse", "text": "snapshot"}\n'))
    monkeypatch.setattr("sys.stdin", stdin)
    monkeypatch.setattr("sys.stdout", io.TextIOWrapper(replies))
    assert main(["--impl-module", f"{__name__}:_AlwaysReplay"]) == 0
    assert replies.getvalue() == b'{"ok":"replay"}\n'


class _ClosedPipe(io.BytesIO):
    def write(self, data: object, /) -> int:
        del data
        raise BrokenPipeError(32, "Broken pipe")


def test_main_exits_1_when_the_reader_goes_away(monkeypatch: pytest.MonkeyPatch) -> None:
    stdin = io.TextIOWrapper(io.BytesIO(b'{"op": "describe"}\n'))
    monkeypatch.setattr("sys.stdin", stdin)
    monkeypatch.setattr("sys.stdout", io.TextIOWrapper(_ClosedPipe()))
    assert main([]) == 1


def test_the_model_refuses_a_call_it_does_not_know() -> None:
    with pytest.raises(ValueError, match="not a call on the published mode"):
        model.trace_outcomes([("put", None)])  # type: ignore[list-item]


# --- the protocol page's decisions -------------------------------------------


@pytest.mark.parametrize("number", ["-0", "1e2", "1.0", "NaN", "Infinity"])
def test_only_plain_digits_are_an_integer(number: str) -> None:
    reply = respond(rollback, f'{{"op":"row_bytes","qkvz_elems":{number},"nv":0}}')
    assert reply["error"]["kind"] == "bad-request"  # type: ignore[index]


def test_a_bad_event_refuses_the_whole_request_and_publishes_nothing() -> None:
    api = fresh_module("ssm_rollback_spec.rollback")
    for bad in ({"op": "reset"}, {"op": "set", "mode": "Replay"}):
        line = json.dumps({"op": "trace", "events": [{"op": "set", "mode": "replay"}, bad]})
        assert respond(api, line)["error"]["kind"] == "bad-request"  # type: ignore[index]
    assert api.ssm_rollback_mode().value == "snapshot"


def test_replies_may_escape_non_ascii_or_not() -> None:
    assert protocol.decode_reply('{"ok":"r\\u00e9play"}') == protocol.decode_reply(
        '{"ok":"réplay"}'
    )


def test_the_oracle_allows_a_refused_request_only_its_error_kind() -> None:
    with pytest.raises(ProtocolError) as raised:
        protocol.decode_request('{"op": "parse"}')
    assert raised.value.kind.value == "bad-request"
    assert allowed_replies({"op": "parse"}) == [{"error": {"kind": "bad-request"}}]
    assert allowed_replies({"op": "rewind"}) == [{"error": {"kind": "unknown-op"}}]


def _race_cells(rounds: object, events: list[dict[str, str]]) -> str:
    return json.dumps({"op": "race_cells", "rounds": rounds, "events": events})


def test_the_reference_races_fresh_cells_round_by_round() -> None:
    replays = [{"op": "set", "mode": "replay"}] * 2
    assert respond(rollback, _race_cells(3, replays)) == {"ok": [["replay", "replay"]] * 3}
    reads = [{"op": "get"}] * 2
    assert respond(rollback, _race_cells(1, reads)) == {"ok": [["snapshot", "snapshot"]]}


def test_race_cells_rounds_and_events_are_bounded_at_the_bound_and_one_past() -> None:
    one = [{"op": "get"}]
    assert respond(rollback, _race_cells(1, one)) == {"ok": [["snapshot"]]}
    ok = respond(rollback, _race_cells(protocol.MAX_ROUNDS, one))["ok"]
    assert isinstance(ok, list)
    assert len(ok) == protocol.MAX_ROUNDS
    for rounds in (0, protocol.MAX_ROUNDS + 1):
        assert respond(rollback, _race_cells(rounds, one)) == protocol.error_reply(
            ErrorKind.BAD_REQUEST,
            f"field 'rounds' must be in [1, {protocol.MAX_ROUNDS}], got {rounds}",
        )
    limit = protocol.MAX_CELL_EVENTS
    at_bound = respond(rollback, _race_cells(1, one * limit))
    assert at_bound == {"ok": [["snapshot"] * limit]}
    assert respond(rollback, _race_cells(1, one * (limit + 1))) == protocol.error_reply(
        ErrorKind.BAD_REQUEST, f"field 'events' holds {limit + 1} events, more than {limit}"
    )


class _NoCell:
    """The public names of ssm_rollback_spec.rollback without a cell type."""

    def __getattr__(self, name: str) -> object:
        if name == "FirstWriteWins":
            raise AttributeError(name)
        return getattr(rollback, name)


def test_an_implementation_without_a_cell_type_does_not_offer_race_cells() -> None:
    reply = respond(_NoCell(), _race_cells(1, [{"op": "get"}]))  # type: ignore[arg-type]
    assert reply == protocol.error_reply(
        ErrorKind.UNKNOWN_OP, "race_cells is not offered: the implementation has no cell type"
    )


def test_minus_zero_is_refused_as_the_float_it_is() -> None:
    reply = respond(rollback, '{"op":"row_bytes","qkvz_elems":-0,"nv":0}')
    assert reply == protocol.error_reply(
        ErrorKind.BAD_REQUEST,
        f"field 'qkvz_elems' must be an integer in [0, {U64_MAX}], got -0.0",
    )


def test_a_request_that_cannot_be_sent_is_named_shortened() -> None:
    request = {"op": "parse", "text": "\ud800" + "x" * 400}
    with pytest.raises(protocol.UnencodableMessageError) as raised:
        protocol.encode_line(request)
    shown = json.dumps(request)[:200]
    assert str(raised.value) == (f"cannot be sent as UTF-8, it holds a lone surrogate: {shown}")


class _OnlyBoundedReads(io.BytesIO):
    """A stream that refuses a read without a size bound."""

    def readline(self, size: int | None = -1, /) -> bytes:
        assert size is not None
        assert size > 0, "an unbounded read"
        return super().readline(size)


def test_an_over_long_line_is_read_past_in_bounded_pieces() -> None:
    limit = protocol.MAX_LINE_BYTES
    data = b"x" * (3 * limit) + b"\n" + b'{"op":"parse","text":"replay"}\n'
    replies = io.BytesIO()
    serve(rollback, _OnlyBoundedReads(data), replies)
    assert replies.getvalue().splitlines() == [
        protocol.encode(
            protocol.error_reply(ErrorKind.BAD_REQUEST, f"line longer than {limit} bytes")
        ).encode(),
        b'{"ok":"replay"}',
    ]


def test_the_model_allows_one_race_outcome_per_possible_winner() -> None:
    calls: list[model.Call] = [("get", None), ("set", "replay"), ("set", "snapshot")]
    assert model.allowed_race_outcomes(calls) == {("snapshot",) * 3, ("replay",) * 3}


@pytest.mark.parametrize(
    ("op", "requests"),
    [
        pytest.param(
            protocol.Op.REPLAY,
            ({"op": "replay"}, {"op": "replay", "pipeline": "float64", "rounds": []}),
            id="replay",
        ),
        pytest.param(
            protocol.Op.REPLAY_BATCH,
            ({"op": "replay_batch"}, {"op": "replay_batch", "slots": 1, "steps": []}),
            id="replay_batch",
        ),
    ],
)
def test_the_reference_adapter_does_not_offer_a_replay_whatever_the_request_holds(
    op: protocol.Op, requests: tuple[dict[str, object], ...]
) -> None:
    for request in requests:
        assert respond(rollback, json.dumps(request)) == protocol.error_reply(
            ErrorKind.UNKNOWN_OP,
            f"{op.value} is not offered: ssm_rollback_spec.rollback has no replay kernel",
        )
    assert protocol.op_named(op.value) is op


@pytest.mark.parametrize(
    ("op", "message"),
    [
        pytest.param(
            "replay",
            "replay is judged against the replay corpus with a tolerance, not by a list",
            id="replay",
        ),
        pytest.param(
            "replay_batch",
            "replay_batch is judged against the replay corpus with a tolerance",
            id="replay_batch",
        ),
        pytest.param(
            "model",
            "model is judged against the same adapter's plain decode, not by a list",
            id="model",
        ),
    ],
)
def test_the_oracle_lists_no_reply_for_a_replay_which_is_judged_within_a_bound(
    op: str, message: str
) -> None:
    with pytest.raises(ValueError, match=f"^{op} is judged") as raised:
        allowed_replies({"op": op})
    assert str(raised.value) == message


def test_the_reference_adapter_does_not_offer_a_model_whatever_the_request_holds() -> None:
    # model is an op of the protocol (opt-in): the reference, which loads none,
    # answers unknown-op with its reason, not the decoder's "unknown op".
    for request in ({"op": "model"}, {"op": "model", "rollback": "snapshot", "script": []}):
        assert respond(rollback, json.dumps(request)) == protocol.error_reply(
            ErrorKind.UNKNOWN_OP, "model is not offered: ssm_rollback_spec.rollback loads no model"
        )
    assert protocol.op_named("model") is protocol.Op.MODEL


def test_the_in_process_driver_sends_the_exact_line_it_is_given() -> None:
    # 1e2 decodes to the integer 100, but the protocol wants an integer written
    # plainly: the line, not the request it decodes to, is what is judged.
    request = {"op": "row_bytes", "qkvz_elems": 100, "nv": 1}
    driver = InProcessDriver.load()
    assert driver.request(request) == {"ok": 208}
    line = '{"op": "row_bytes", "qkvz_elems": 1e2, "nv": 1}'
    refused = driver.request(request, line=line)["error"]
    assert isinstance(refused, dict)
    assert refused["kind"] == "bad-request"


@pytest.mark.parametrize("ending", ["\n", "\r\n", ""])
def test_a_decoded_reply_keeps_the_line_the_adapter_wrote(ending: str) -> None:
    reply = protocol.decode_reply(f'{{"ok" : [1,2]}}{ending}')
    assert reply == {"ok": [1, 2]}
    assert getattr(reply, "line", None) == '{"ok" : [1,2]}'


@pytest.mark.parametrize(
    ("request_", "reply", "clauses"),
    [
        # The right kind of refusal with another text: the text's clause alone.
        (
            {"op": "parse", "text": "x"},
            {"error": {"kind": "unknown-mode", "message": "bad mode x"}},
            ("RB-PARSE-2",),
        ),
        # A text accepted that must be refused, or refused that must be accepted.
        ({"op": "parse", "text": "x"}, {"ok": "replay"}, ("RB-PARSE-1",)),
        (
            {"op": "parse", "text": "replay"},
            {"error": {"kind": "unknown-mode", "message": "unknown ssm-rollback-mode 'replay'"}},
            ("RB-PARSE-1",),
        ),
        ({"op": "parse", "text": "replay"}, {"ok": "snapshot"}, ("RB-PARSE-1",)),
        # Another op, or a request the protocol refuses: the property's own clauses.
        ({"op": "row_bytes", "qkvz_elems": 1, "nv": 1}, {"ok": 0}, ()),
        ({"op": "parse"}, {"ok": "replay"}, ()),
    ],
)
def test_a_wrong_reply_is_blamed_on_the_clause_its_wrong_part_breaks(
    request_: dict[str, object], reply: dict[str, object], clauses: tuple[str, ...]
) -> None:
    assert blamed_clauses(request_, reply) == clauses
