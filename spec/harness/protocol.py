# SPDX-License-Identifier: MIT OR Apache-2.0
"""The adapter protocol, version 2: JSON-lines requests and replies.

``docs/protocol.md`` is the page an adapter author reads; this module is its
executable form, shared by the Python adapter and the harness's drivers.
"""

from __future__ import annotations

import enum
import json
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "MAX_CELL_EVENTS",
    "MAX_DEPTH",
    "MAX_EVENTS",
    "MAX_LINE_BYTES",
    "MAX_ROUNDS",
    "PROTOCOL_VERSION",
    "SPANS",
    "STATEFUL_OPS",
    "ErrorKind",
    "MalformedReplyError",
    "Op",
    "ProtocolError",
    "Reply",
    "TooDeepError",
    "UnencodableMessageError",
    "bad_request",
    "decode_reply",
    "decode_request",
    "encode",
    "encode_line",
    "encode_value",
    "error_reply",
    "loads_bounded",
    "ok_reply",
    "op_named",
    "reply_matches",
    "required_field",
]

PROTOCOL_VERSION: Final = 2

#: The longest request line an adapter must read, newline included; a longer one is bad-request.
MAX_LINE_BYTES: Final = 1 << 20

#: The deepest nesting of arrays and objects a request may have; deeper is bad-request.
MAX_DEPTH: Final = 16

#: The most events a trace or race may hold; more is bad-request.
MAX_EVENTS: Final = 256

#: The most events (threads) of one ``race_cells`` round; more is bad-request.
MAX_CELL_EVENTS: Final = 16

#: The most rounds one ``race_cells`` request may ask for; more is bad-request.
MAX_ROUNDS: Final = 10_000

#: The request field that asks a ``race`` or ``race_cells`` for each call's
#: span, and the reply key beside ``ok`` that carries them (docs/protocol.md,
#: "Evidence of a race"); an adapter that ignores the field still conforms.
SPANS: Final = "spans"

_U64_MAX: Final = 2**64 - 1


class Op(enum.Enum):
    """The operations a request may name (RB-PROTO-2)."""

    DESCRIBE = "describe"
    PARSE = "parse"
    ROW_BYTES = "row_bytes"
    RING_BYTES = "ring_bytes"
    TRACE = "trace"
    RACE = "race"
    #: Opt-in: many fresh first-write-wins cells raced in one process.
    RACE_CELLS = "race_cells"
    VERIFY_ENTRY = "verify_entry"
    #: Opt-in: the runtime's own replay of checkpoints and ring rows
    #: (docs/protocol.md); its fields are decoded by :mod:`.replay_wire`.
    REPLAY = "replay"
    #: Opt-in: the same replay over a batch of sequences on a pool of slots
    #: (docs/protocol-replay-batch.md); decoded by :mod:`.replay_wire`.
    REPLAY_BATCH = "replay_batch"
    #: Opt-in: a loaded model's decodes, rollbacks and logits on named sequences
    #: (docs/protocol-model.md); decoded by :mod:`.model_wire`.
    MODEL = "model"


class ErrorKind(enum.Enum):
    """The kinds an error reply may carry (RB-PROTO-3)."""

    UNKNOWN_MODE = "unknown-mode"
    OVERFLOW = "overflow"
    UNSUPPORTED = "unsupported"
    UNKNOWN_OP = "unknown-op"
    BAD_REQUEST = "bad-request"


_OPS_BY_NAME: Final = {op.value: op for op in Op}

#: Operations whose outcome depends on the process-wide published mode.
STATEFUL_OPS: Final = frozenset({Op.TRACE, Op.RACE})

_U64_FIELDS: Final[Mapping[Op, tuple[str, ...]]] = {
    Op.ROW_BYTES: ("qkvz_elems", "nv"),
    Op.RING_BYTES: ("num_ssm_layers", "row_bytes", "k_ceiling", "mtp_state_slots"),
}

_MODE_NAMES: Final = ("snapshot", "replay")


class ProtocolError(ValueError):
    """A request line the adapter cannot serve; ``kind`` is its error kind."""

    def __init__(self, kind: ErrorKind, message: str, /) -> None:
        super().__init__(message)
        self.kind: Final = kind


class MalformedReplyError(ValueError):
    """A reply line that is not one of the protocol's reply shapes (RB-PROTO-3)."""


# One encoder for every line: json.dumps with options builds a new one per call.
_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def encode(message: Mapping[str, object], /) -> str:
    """One protocol line, without its newline: compact UTF-8 JSON."""
    return _ENCODER.encode(message)


class UnencodableMessageError(ValueError):
    """A message that cannot be written as a UTF-8 line: it holds a lone surrogate."""


def encode_line(message: Mapping[str, object], /) -> bytes:
    """One protocol line as sent: UTF-8, newline included.

    Raises:
        UnencodableMessageError: a string in ``message`` is not Unicode.
    """
    try:
        return _ENCODER.encode(message).encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        raise UnencodableMessageError(
            "cannot be sent as UTF-8, it holds a lone surrogate: "
            + json.dumps(dict(message), ensure_ascii=True)[:200]
        ) from None


def ok_reply(value: object, /) -> dict[str, object]:
    """A successful reply."""
    return {"ok": value}


def error_reply(kind: ErrorKind, message: str, /) -> dict[str, object]:
    """An error reply."""
    return {"error": {"kind": kind.value, "message": message}}


def op_named(name: str, /) -> Op:
    """The operation called ``name``.

    Raises:
        KeyError: no operation has that name.
    """
    return _OPS_BY_NAME[name]


def bad_request(message: str, /) -> ProtocolError:
    """The error a malformed request gets: ``bad-request`` with ``message`` (RB-PROTO-4)."""
    return ProtocolError(ErrorKind.BAD_REQUEST, message)


def required_field(request: Mapping[str, object], name: str, /) -> object:
    """The value of a field the request must carry.

    Raises:
        ProtocolError: ``bad-request``, the field is missing (RB-PROTO-4).
    """
    if name not in request:
        raise bad_request(f"missing field '{name}'")
    return request[name]


def _u64(request: Mapping[str, object], name: str, /) -> int:
    value = required_field(request, name)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= _U64_MAX:
        raise bad_request(
            f"field '{name}' must be an integer in [0, {_U64_MAX}], got {encode_value(value)}"
        )
    return value


def _mode(container: Mapping[str, object], where: str, /) -> str:
    value = required_field(container, "mode")
    if value not in _MODE_NAMES:
        raise bad_request(
            f'{where}field \'mode\' must be "snapshot" or "replay", got {encode_value(value)}'
        )
    assert isinstance(value, str)
    return value


def _events(request: Mapping[str, object], /, limit: int = MAX_EVENTS) -> list[dict[str, object]]:
    events = required_field(request, "events")
    if not isinstance(events, list):
        raise bad_request(f"field 'events' must be a list, got {encode_value(events)}")
    if len(events) > limit:
        raise bad_request(f"field 'events' holds {len(events)} events, more than {limit}")
    checked: list[dict[str, object]] = []
    for index, event in enumerate(events):
        where = f"events[{index}] "
        if not isinstance(event, dict):
            raise bad_request(f"{where}must be an object, got {encode_value(event)}")
        kind = event.get("op")
        if kind == "set":
            checked.append({"op": "set", "mode": _mode(event, where)})
        elif kind == "get":
            checked.append({"op": "get"})
        else:
            raise bad_request(
                f'{where}field \'op\' must be "set" or "get", got {encode_value(kind)}'
            )
    return checked


def _rounds(request: Mapping[str, object], /) -> int:
    rounds = _u64(request, "rounds")
    if not 1 <= rounds <= MAX_ROUNDS:
        raise bad_request(f"field 'rounds' must be in [1, {MAX_ROUNDS}], got {rounds}")
    return rounds


def _spans_asked(op: Op, request: Mapping[str, object], /) -> dict[str, object]:
    # Kept only when asked, so a request that does not ask decodes as before.
    if op not in {Op.RACE, Op.RACE_CELLS}:
        return {}
    asked = request.get(SPANS, False)
    if not isinstance(asked, bool):
        raise bad_request(f"field '{SPANS}' must be true or false, got {encode_value(asked)}")
    return {SPANS: True} if asked else {}


def encode_value(value: object, /, limit: int = 80) -> str:
    """A JSON value as it appears in a message, shortened past ``limit`` characters."""
    try:
        shown = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        shown = repr(value)
    return shown if len(shown) <= limit else f"{shown[: limit - 3]}..."


def _reject_constant(name: str, /) -> object:
    raise ValueError(f"{name} is not JSON")


def _plain_integer(digits: str, /) -> int | float:
    # An integer is plain digits: "-0" reads as the number it is, -0.0, so
    # that no field takes it for the integer 0.
    return -0.0 if digits == "-0" else int(digits)


class TooDeepError(ValueError):
    """A JSON text nested deeper than its reader allows."""

    def __init__(self, limit: int, /) -> None:
        super().__init__(f"nested deeper than {limit} levels")


def _deeper_than(value: object, limit: int, /) -> bool:
    # Iterative, so a deep value cannot exhaust the interpreter's stack.
    stack = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        if isinstance(current, (list, dict)):
            if depth > limit:
                return True
            children = current.values() if isinstance(current, dict) else current
            stack.extend((child, depth + 1) for child in children)
    return False


def loads_bounded(text: str, /, max_depth: int) -> object:
    """Strict JSON (RFC 8259) nested at most ``max_depth`` deep.

    ``NaN`` and ``Infinity`` are Python's extensions, not JSON, so they are
    refused; ``-0`` is read as the float -0.0, so it is no integer.

    Raises:
        TooDeepError: the text nests deeper than ``max_depth``.
        ValueError: the text is not JSON.
    """
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_int=_plain_integer)
    except RecursionError:
        raise TooDeepError(max_depth) from None
    if _deeper_than(value, max_depth):
        raise TooDeepError(max_depth)
    return value


def _load_json(line: str, /) -> object:
    try:
        value = loads_bounded(line, MAX_DEPTH)
    except TooDeepError as error:
        raise bad_request(str(error)) from None
    except ValueError as error:
        raise bad_request(f"not a JSON line: {error}") from None
    try:
        if "\\u" in line:
            _ENCODER.encode(value).encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate escape is valid JSON but not Unicode, so no reply
        # could echo it as UTF-8.
        raise bad_request("a string holds a lone surrogate, which is not Unicode") from None
    return value


def decode_request(line: str, /) -> dict[str, object]:
    """Check one request line and return it with only the fields its op uses.

    Raises:
        ProtocolError: the line is not a request (``bad-request``) or names an
            unknown op (``unknown-op``).
    """
    request = _load_json(line)
    if not isinstance(request, dict):
        raise bad_request(f"a request must be a JSON object, got {encode_value(request)}")
    name = required_field(request, "op")
    if not isinstance(name, str):
        raise bad_request(f"field 'op' must be a string, got {encode_value(name)}")
    op = _OPS_BY_NAME.get(name)
    if op is None:
        raise ProtocolError(ErrorKind.UNKNOWN_OP, f"unknown op {encode_value(name)}")
    checked: dict[str, object] = {"op": op.value}
    if op is Op.PARSE:
        text = required_field(request, "text")
        if not isinstance(text, str):
            raise bad_request(f"field 'text' must be a string, got {encode_value(text)}")
        checked["text"] = text
    elif op is Op.VERIFY_ENTRY:
        checked["mode"] = _mode(request, "")
    elif op in STATEFUL_OPS:
        checked["events"] = _events(request)
    elif op is Op.RACE_CELLS:
        checked["events"] = _events(request, limit=MAX_CELL_EVENTS)
        checked["rounds"] = _rounds(request)
    checked.update(_spans_asked(op, request))
    for field in _U64_FIELDS.get(op, ()):
        checked[field] = _u64(request, field)
    return checked


_REPLY_KEYS: Final = ({"ok"}, {"error"}, {"ok", SPANS})


class Reply(dict[str, object]):
    """A decoded reply that keeps the line the adapter wrote (``line``), to show as written."""

    line: str = ""


def decode_reply(line: str, /) -> dict[str, object]:
    """Check one reply line's shape and return it, as a :class:`Reply` holding the line.

    Raises:
        MalformedReplyError: the line is not JSON, or not ``{"ok": VALUE}`` or
            ``{"error": {"kind": KIND, "message": TEXT}}`` with a known kind.
    """
    try:
        reply = loads_bounded(line, MAX_DEPTH)
    except ValueError as error:
        raise MalformedReplyError(f"not a JSON line ({error})") from None
    # A race's spans ride beside "ok" (docs/protocol-race-evidence.md).
    if not isinstance(reply, dict) or set(reply) not in _REPLY_KEYS:
        raise MalformedReplyError('not {"ok": VALUE} or {"error": {"kind": ..., "message": ...}}')
    if "error" in reply:
        body = reply["error"]
        if (
            not isinstance(body, dict)
            or set(body) != {"kind", "message"}
            or not isinstance(body["message"], str)
        ):
            raise MalformedReplyError('"error" must be {"kind": KIND, "message": TEXT}')
        kinds = [kind.value for kind in ErrorKind]
        if body["kind"] not in kinds:
            got = encode_value(body["kind"])
            raise MalformedReplyError(f"error kind {got} is not one of {kinds}")
    kept = Reply(reply)
    kept.line = line.removesuffix("\n").removesuffix("\r")
    return kept


def reply_matches(actual: Mapping[str, object], expected: Mapping[str, object], /) -> bool:
    """Whether a reply is the expected one.

    An expected error without a ``message`` accepts any message of its kind;
    values compare exactly, so ``1`` does not match ``true`` or ``1.0``.
    """
    if "ok" in expected:
        return "ok" in actual and _same_json(actual["ok"], expected["ok"])
    actual_error = actual.get("error")
    expected_error = expected["error"]
    if not isinstance(actual_error, dict) or not isinstance(expected_error, dict):
        return False
    if actual_error.get("kind") != expected_error["kind"]:
        return False
    return (
        "message" not in expected_error or actual_error.get("message") == expected_error["message"]
    )


def _same_json(left: object, right: object, /) -> bool:
    if type(left) is not type(right):
        return False
    if isinstance(left, list):
        assert isinstance(right, list)
        return len(left) == len(right) and all(map(_same_json, left, right))
    if isinstance(left, dict):
        assert isinstance(right, dict)
        return left.keys() == right.keys() and all(_same_json(left[k], right[k]) for k in left)
    return left == right
