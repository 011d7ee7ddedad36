# SPDX-License-Identifier: MIT OR Apache-2.0
"""The replies the reference model allows for a protocol request.

The properties and the vector generator both judge replies by this module,
so a request means the same thing to either of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from .. import model
from .protocol import ErrorKind, Op, ProtocolError, decode_request, encode

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["allowed_replies", "blamed_clauses"]


def _overflow_or(value: int, /) -> dict[str, object]:
    if model.fits_usize(value):
        return {"ok": value}
    # Only the kind is contractual; each runtime words its own message.
    return {"error": {"kind": ErrorKind.OVERFLOW.value}}


def _calls(request: Mapping[str, object], /) -> list[model.Call]:
    events = request["events"]
    assert isinstance(events, list)
    calls: list[model.Call] = []
    for event in events:
        if event["op"] == "set":
            calls.append(("set", str(event["mode"])))
        elif event["op"] == "get":
            calls.append(("get", None))
        else:
            raise ValueError(f"not an event: {event!r}")
    return calls


def _numbers(request: Mapping[str, object], /, *names: str) -> list[int]:
    numbers = []
    for name in names:
        value = request[name]
        assert isinstance(value, int)
        numbers.append(value)
    return numbers


# The describe property checks its shape (the name is the adapter's own), and
# race_cells rounds may each have any winner: neither is a list of replies.
_NOT_LISTED: Final = {
    Op.DESCRIBE: "describe has no single expected reply",
    Op.RACE_CELLS: "race_cells is judged round by round, not by a list of replies",
    Op.REPLAY: "replay is judged against the replay corpus with a tolerance, not by a list",
    Op.REPLAY_BATCH: "replay_batch is judged against the replay corpus with a tolerance",
    Op.MODEL: "model is judged against the same adapter's plain decode, not by a list",
}


def allowed_replies(request: Mapping[str, object], /) -> list[dict[str, object]]:  # noqa: PLR0911 - one return per op
    """Every reply the model accepts for ``request``; an error without a message accepts any.

    A request the protocol refuses allows only an error of the kind it
    refuses it with (RB-PROTO-4).

    Raises:
        ValueError: ``request`` is a ``describe``, whose reply names the adapter,
            a ``race_cells``, judged round by round, or a ``replay``, judged
            with a tolerance.
    """
    try:
        checked = decode_request(encode(request))
    except ProtocolError as error:
        # Only the kind is contractual; each runtime words its own message.
        return [{"error": {"kind": error.kind.value}}]
    op = Op(checked["op"])
    if op in _NOT_LISTED:
        raise ValueError(_NOT_LISTED[op])
    if op is Op.PARSE:
        parsed = model.parse(str(checked["text"]))
        if isinstance(parsed, model.Rejected):
            return [{"error": {"kind": ErrorKind.UNKNOWN_MODE.value, "message": parsed.message}}]
        return [{"ok": parsed}]
    if op is Op.ROW_BYTES:
        return [_overflow_or(model.row_bytes(*_numbers(checked, "qkvz_elems", "nv")))]
    if op is Op.RING_BYTES:
        fields = ("num_ssm_layers", "row_bytes", "k_ceiling", "mtp_state_slots")
        return [_overflow_or(model.ring_bytes(*_numbers(checked, *fields)))]
    if op is Op.VERIFY_ENTRY:
        if model.verify_may_enter(str(checked["mode"])):
            return [{"ok": None}]
        return [{"error": {"kind": ErrorKind.UNSUPPORTED.value}}]
    calls = _calls(checked)
    if op is Op.TRACE:
        return [{"ok": model.trace_outcomes(calls)}]
    return [{"ok": list(outcome)} for outcome in sorted(model.allowed_race_outcomes(calls))]


def _error_kind(reply: Mapping[str, object], /) -> object:
    error = reply.get("error")
    return error.get("kind") if isinstance(error, dict) else None


def blamed_clauses(
    request: Mapping[str, object], reply: Mapping[str, object], /
) -> tuple[str, ...]:
    """The clauses a reply the model does not allow breaks, when narrower than its property's.

    A parse answered with the right kind of error but another text breaks
    RB-PARSE-2 alone (the text); one that accepts what it must refuse, or
    refuses what it must accept, breaks RB-PARSE-1. Otherwise none is named
    here: the property's own clauses stand.
    """
    try:
        checked = decode_request(encode(request))
    except ProtocolError:
        return ()
    if Op(checked["op"]) is not Op.PARSE:
        return ()
    [allowed] = allowed_replies(checked)
    if _error_kind(allowed) == _error_kind(reply) == ErrorKind.UNKNOWN_MODE.value:
        return ("RB-PARSE-2",)
    return ("RB-PARSE-1",)
