# SPDX-License-Identifier: MIT OR Apache-2.0
"""Serve a Python implementation of the contract over the adapter protocol.

``python -m ssm_rollback_spec.harness.adapter`` serves :mod:`ssm_rollback_spec.rollback`;
``--impl-module MODULE[:ATTR]`` serves any other Python implementation. The
in-process driver answers through :func:`respond` too, so both paths share
one translation from Python calls to protocol replies.
"""

from __future__ import annotations

import argparse
import functools
import sys
import threading
import time
from typing import TYPE_CHECKING, BinaryIO, Final

from .. import __version__
from . import protocol
from .protocol import ErrorKind, Op
from .python_impl import CELL_NAME, REFERENCE, ImplementationModuleError, load_python_implementation
from .versions import CURRENT, DESCRIBE_MEMBER

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from .python_impl import Cell, RollbackApi

__all__ = [
    "MODEL_NOT_OFFERED",
    "REFERENCE_DESCRIBE",
    "REPLAY_BATCH_NOT_OFFERED",
    "REPLAY_NOT_OFFERED",
    "main",
    "read_lines",
    "respond",
    "serve",
    "serve_lines",
]

#: The reference adapter's answer to ``replay``: the contract has no replay
#: kernel to serve (the replay model is numpy and draft; docs/protocol.md).
#: The reference's ``describe``: its name, the package's release it is, and
#: the protocol version it implements.
REFERENCE_DESCRIBE: Final = {
    "name": "ssm_rollback_spec.rollback (Python reference)",
    "usize_bits": 64,
    "release": __version__,
    DESCRIBE_MEMBER: str(CURRENT),
}

REPLAY_NOT_OFFERED: Final = "replay is not offered: ssm_rollback_spec.rollback has no replay kernel"
REPLAY_BATCH_NOT_OFFERED: Final = (
    "replay_batch is not offered: ssm_rollback_spec.rollback has no replay kernel"
)
MODEL_NOT_OFFERED: Final = "model is not offered: ssm_rollback_spec.rollback loads no model"


class _RaceError(RuntimeError):
    """A race the adapter could not run: its threads did not start or meet."""


def _mode_name(api: RollbackApi, value: object, /) -> str:
    if not isinstance(value, api.SsmRollbackMode):
        raise TypeError(f"the implementation returned {value!r}, not an SsmRollbackMode")
    return value.value


def _call(api: RollbackApi, event: dict[str, object], /) -> str:
    if event["op"] == "set":
        return _mode_name(api, api.set_ssm_rollback_mode(api.SsmRollbackMode(event["mode"])))
    if event["op"] == "get":
        return _mode_name(api, api.ssm_rollback_mode())
    raise ValueError(f"not an event: {event!r}")


_BARRIER_SECONDS: Final = 30.0

#: The interpreter's thread switch interval while racers run, in seconds. By
#: default a thread keeps the GIL for 5 ms, a thousand times a call's length,
#: so racers released together would still call one after another and no
#: race would be run (docs/protocol-race-evidence.md).
_RACE_SWITCH_SECONDS: Final = 1e-6

#: One round's calls' spans: (start, end) in nanoseconds, on the monotonic clock.
_Spans = list[tuple[int, int]]


def _race(
    events: Sequence[dict[str, object]],
    /,
    call: Callable[[int, dict[str, object]], str],
    rounds: int = 1,
) -> tuple[list[list[str]], list[_Spans]]:
    """Run ``call(round, event)`` for every event on a thread of its own, ``rounds`` times.

    The threads live for every round and meet at one barrier before each, so
    all the calls of a round start together; the barrier's timeout turns a
    round that can never fill into an error, not a hang. Returns what each
    call returned and its span, round by round.
    """
    barrier = threading.Barrier(max(len(events), 1), timeout=_BARRIER_SECONDS)
    returned: list[list[str]] = [[""] * len(events) for _ in range(rounds)]
    spans: list[_Spans] = [[(0, 0)] * len(events) for _ in range(rounds)]
    failures: list[BaseException] = []

    def run(index: int, event: dict[str, object]) -> None:
        try:
            for round_ in range(rounds):
                barrier.wait()
                start = time.monotonic_ns()
                returned[round_][index] = call(round_, event)
                spans[round_][index] = (start, time.monotonic_ns())
        except BaseException as error:  # noqa: BLE001 - re-raised on the caller's thread
            failures.append(error)
            barrier.abort()

    threads = [threading.Thread(target=run, args=item) for item in enumerate(events)]
    started = []
    start_error: RuntimeError | None = None
    switch = sys.getswitchinterval()
    sys.setswitchinterval(_RACE_SWITCH_SECONDS)
    try:
        for thread in threads:
            thread.start()
            started.append(thread)
    except RuntimeError as error:
        # The threads already waiting would wait out the barrier: release them.
        barrier.abort()
        start_error = error
    finally:
        for thread in started:
            thread.join()
        sys.setswitchinterval(switch)
    if start_error is not None:
        raise _RaceError(f"could not start the race's threads: {start_error}")
    real = [
        failure for failure in failures if not isinstance(failure, threading.BrokenBarrierError)
    ]
    if real:
        raise real[0]
    if failures:
        raise _RaceError("the race's threads did not all meet at its barrier")
    return returned, spans


class _WithSpans:
    """An ``ok`` value sent with its calls' spans beside it, as the request asked."""

    def __init__(self, value: object, spans: object, /) -> None:
        self.value: Final = value
        self.spans: Final = spans


def _race_published(api: RollbackApi, request: dict[str, object], /) -> object:
    events = request["events"]
    assert isinstance(events, list)
    [returned], [spans] = _race(events, lambda _, event: _call(api, event))
    return _WithSpans(returned, spans) if request.get(protocol.SPANS) else returned


def _race_cells(api: RollbackApi, request: dict[str, object], /) -> object:
    # A fresh cell of the implementation's own type for every round.
    new_cell = getattr(api, CELL_NAME, None)
    if new_cell is None:
        raise protocol.ProtocolError(
            ErrorKind.UNKNOWN_OP, "race_cells is not offered: the implementation has no cell type"
        )
    events = request["events"]
    assert isinstance(events, list)
    cells: list[Cell[object]] = [new_cell() for _ in range(int(str(request["rounds"])))]
    snapshot = api.SsmRollbackMode.SNAPSHOT

    def call(round_: int, event: dict[str, object]) -> str:
        if event["op"] == "set":
            return _mode_name(api, cells[round_].set(api.SsmRollbackMode(event["mode"])))
        return _mode_name(api, cells[round_].get_or_init(snapshot))

    returned, spans = _race(events, call, len(cells))
    return _WithSpans(returned, spans) if request.get(protocol.SPANS) else returned


def _answer(api: RollbackApi, request: dict[str, object], /) -> object:  # noqa: C901, PLR0911 - one return per op
    op = protocol.op_named(str(request["op"]))
    if op is Op.DESCRIBE:
        return dict(REFERENCE_DESCRIBE)
    if op is Op.PARSE:
        return _mode_name(api, api.parse_ssm_rollback_mode(str(request["text"])))
    if op is Op.ROW_BYTES:
        return api.ssm_replay_row_bytes(*_ints(request, "qkvz_elems", "nv"))
    if op is Op.RING_BYTES:
        fields = ("num_ssm_layers", "row_bytes", "k_ceiling", "mtp_state_slots")
        return api.ssm_replay_ring_bytes(*_ints(request, *fields))
    if op is Op.VERIFY_ENTRY:
        api.require_verify_rollback_supported(api.SsmRollbackMode(request["mode"]))
        return None
    if op is Op.RACE_CELLS:
        return _race_cells(api, request)
    if op is Op.REPLAY:
        raise protocol.ProtocolError(ErrorKind.UNKNOWN_OP, REPLAY_NOT_OFFERED)
    if op is Op.REPLAY_BATCH:
        raise protocol.ProtocolError(ErrorKind.UNKNOWN_OP, REPLAY_BATCH_NOT_OFFERED)
    if op is Op.MODEL:
        raise protocol.ProtocolError(ErrorKind.UNKNOWN_OP, MODEL_NOT_OFFERED)
    if op is Op.RACE:
        return _race_published(api, request)
    events = request["events"]
    assert isinstance(events, list)
    return [_call(api, event) for event in events]


def _ints(request: dict[str, object], /, *names: str) -> list[int]:
    # decode_request has checked every one of these fields is a u64.
    return [request[name] for name in names]  # type: ignore[misc]


def _ok_reply(answer: object, /) -> dict[str, object]:
    if isinstance(answer, _WithSpans):
        return protocol.ok_reply(answer.value) | {protocol.SPANS: answer.spans}
    return protocol.ok_reply(answer)


def respond(api: RollbackApi, line: str, /) -> dict[str, object]:
    """The reply to one request line, computed with ``api``'s own names."""
    try:
        request = protocol.decode_request(line)
        return _ok_reply(_answer(api, request))
    except protocol.ProtocolError as error:
        return protocol.error_reply(error.kind, str(error))
    except api.UnknownSsmRollbackModeError as error:
        return protocol.error_reply(ErrorKind.UNKNOWN_MODE, str(error))
    except api.SsmReplayBytesOverflowError as error:
        return protocol.error_reply(ErrorKind.OVERFLOW, str(error))
    except api.VerifyRollbackUnsupportedError as error:
        return protocol.error_reply(ErrorKind.UNSUPPORTED, str(error))
    except _RaceError as error:
        return protocol.error_reply(ErrorKind.BAD_REQUEST, str(error))


def read_lines(requests: BinaryIO, /) -> Iterator[bytes | None]:
    """Each line of ``requests``, or None for one longer than ``MAX_LINE_BYTES``.

    An over-long line is read past in bounded pieces, never held whole.
    """
    limit = protocol.MAX_LINE_BYTES
    while raw := requests.readline(limit):
        if raw.endswith(b"\n") or len(raw) < limit:
            yield raw
            continue
        while (rest := requests.readline(limit)) and not rest.endswith(b"\n"):
            pass
        yield None


def _reply_line(answer: Callable[[str], dict[str, object]], raw: bytes | None, /) -> bytes:
    if raw is None:
        limit = protocol.MAX_LINE_BYTES
        reply = protocol.error_reply(ErrorKind.BAD_REQUEST, f"line longer than {limit} bytes")
    else:
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            reply = protocol.error_reply(ErrorKind.BAD_REQUEST, f"not UTF-8: {error}")
        else:
            reply = answer(line)
    return protocol.encode(reply).encode("utf-8") + b"\n"


def serve_lines(
    answer: Callable[[str], dict[str, object]], requests: BinaryIO, replies: BinaryIO, /
) -> None:
    """Answer each request line of ``requests`` with ``answer`` on ``replies``, until end of input.

    A line too long or not UTF-8 is answered ``bad-request`` here, so an adapter
    that answers more ops than the reference (the engines') reads as it does.
    """
    for raw in read_lines(requests):
        replies.write(_reply_line(answer, raw))
        replies.flush()


def serve(api: RollbackApi, requests: BinaryIO, replies: BinaryIO, /) -> None:
    """Answer each request line of ``requests`` on ``replies``, until end of input."""
    serve_lines(functools.partial(respond, api), requests, replies)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ssm_rollback_spec.harness.adapter",
        description="Serve a Python implementation over the adapter protocol (docs/protocol.md).",
    )
    parser.add_argument(
        "--impl-module",
        default=REFERENCE,
        metavar="MODULE[:ATTR]",
        help=f"the implementation to serve (default {REFERENCE})",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Serve an implementation on standard input and output; return the exit status."""
    arguments = _parser().parse_args(argv)
    try:
        api = load_python_implementation(arguments.impl_module).api
    except ImplementationModuleError as error:
        sys.stderr.write(
            f"python -m ssm_rollback_spec.harness.adapter: error: --impl-module: {error}\n"
        )
        return 2
    try:
        serve(api, sys.stdin.buffer, sys.stdout.buffer)
    except (BrokenPipeError, KeyboardInterrupt):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
