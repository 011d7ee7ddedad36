# SPDX-License-Identifier: MIT OR Apache-2.0
"""Serve an implementation of the contract over the adapter protocol.

``python -m spec.adapter`` serves :mod:`spec.rollback`. The in-process
driver answers through :func:`respond` too, so both paths share one
translation from Python calls to protocol replies.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, BinaryIO, Final, Protocol

from spec import protocol
from spec.protocol import ErrorKind, Op
from spec.rollback import (
    SsmReplayBytesOverflowError,
    SsmRollbackMode,
    UnknownSsmRollbackModeError,
    VerifyRollbackUnsupportedError,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["RollbackApi", "main", "respond", "serve"]


class RollbackApi(Protocol):
    """The Python API of an implementation: :mod:`spec.rollback` is one."""

    def parse_ssm_rollback_mode(self, text: str, /) -> SsmRollbackMode: ...  # noqa: D102
    def set_ssm_rollback_mode(self, mode: SsmRollbackMode, /) -> SsmRollbackMode: ...  # noqa: D102
    def ssm_rollback_mode(self) -> SsmRollbackMode: ...  # noqa: D102
    def ssm_replay_row_bytes(self, qkvz_elems: int, nv: int) -> int: ...  # noqa: D102
    def ssm_replay_ring_bytes(  # noqa: D102
        self, num_ssm_layers: int, row_bytes: int, k_ceiling: int, mtp_state_slots: int
    ) -> int: ...
    def require_verify_rollback_supported(self, mode: SsmRollbackMode, /) -> None: ...  # noqa: D102


def _mode_name(value: object, /) -> str:
    if not isinstance(value, SsmRollbackMode):
        raise TypeError(f"the implementation returned {value!r}, not an SsmRollbackMode")
    return value.value


def _call(api: RollbackApi, event: dict[str, object], /) -> str:
    if event["op"] == "set":
        return _mode_name(api.set_ssm_rollback_mode(SsmRollbackMode(event["mode"])))
    if event["op"] == "get":
        return _mode_name(api.ssm_rollback_mode())
    raise ValueError(f"not an event: {event!r}")


_BARRIER_SECONDS: Final = 30.0


def _race(api: RollbackApi, events: Sequence[dict[str, object]], /) -> list[str]:
    # Every thread waits at the barrier, so all the calls start together; the
    # timeout turns a barrier that can never fill into an error, not a hang.
    barrier = threading.Barrier(max(len(events), 1), timeout=_BARRIER_SECONDS)
    returned: list[str | None] = [None] * len(events)
    failures: list[BaseException] = []

    def run(index: int, event: dict[str, object]) -> None:
        try:
            barrier.wait()
            returned[index] = _call(api, event)
        except BaseException as error:  # noqa: BLE001 - re-raised on the caller's thread
            failures.append(error)

    threads = [threading.Thread(target=run, args=item) for item in enumerate(events)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return [name for name in returned if name is not None]


def _answer(api: RollbackApi, request: dict[str, object], /) -> object:  # noqa: PLR0911 - one return per op
    op = protocol.op_named(str(request["op"]))
    if op is Op.DESCRIBE:
        return {"name": "spec.rollback (Python reference)", "usize_bits": 64}
    if op is Op.PARSE:
        return _mode_name(api.parse_ssm_rollback_mode(str(request["text"])))
    if op is Op.ROW_BYTES:
        return api.ssm_replay_row_bytes(*_ints(request, "qkvz_elems", "nv"))
    if op is Op.RING_BYTES:
        fields = ("num_ssm_layers", "row_bytes", "k_ceiling", "mtp_state_slots")
        return api.ssm_replay_ring_bytes(*_ints(request, *fields))
    if op is Op.VERIFY_ENTRY:
        api.require_verify_rollback_supported(SsmRollbackMode(request["mode"]))
        return None
    events = request["events"]
    assert isinstance(events, list)
    if op is Op.TRACE:
        return [_call(api, event) for event in events]
    return _race(api, events)


def _ints(request: dict[str, object], /, *names: str) -> list[int]:
    # decode_request has checked every one of these fields is a u64.
    return [request[name] for name in names]  # type: ignore[misc]


def respond(api: RollbackApi, line: str, /) -> dict[str, object]:
    """The reply to one request line, computed with ``api``."""
    try:
        request = protocol.decode_request(line)
        return protocol.ok_reply(_answer(api, request))
    except protocol.ProtocolError as error:
        return protocol.error_reply(error.kind, str(error))
    except UnknownSsmRollbackModeError as error:
        return protocol.error_reply(ErrorKind.UNKNOWN_MODE, str(error))
    except SsmReplayBytesOverflowError as error:
        return protocol.error_reply(ErrorKind.OVERFLOW, str(error))
    except VerifyRollbackUnsupportedError as error:
        return protocol.error_reply(ErrorKind.UNSUPPORTED, str(error))


def serve(api: RollbackApi, requests: BinaryIO, replies: BinaryIO, /) -> None:
    """Answer each request line of ``requests`` on ``replies``, until end of input."""
    for raw in requests:
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            reply = protocol.error_reply(ErrorKind.BAD_REQUEST, f"not UTF-8: {error}")
        else:
            reply = respond(api, line)
        replies.write(protocol.encode(reply).encode("utf-8") + b"\n")
        replies.flush()


def main(api_factory: Callable[[], RollbackApi] | None = None) -> int:
    """Serve ``spec.rollback`` (or ``api_factory()``) on standard input and output."""
    if api_factory is None:
        from spec import rollback  # noqa: PLC0415 - only the default needs it

        api: RollbackApi = rollback
    else:
        api = api_factory()
    try:
        serve(api, sys.stdin.buffer, sys.stdout.buffer)
    except (BrokenPipeError, KeyboardInterrupt):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
