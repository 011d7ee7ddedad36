# SPDX-License-Identifier: MIT OR Apache-2.0
"""One mistake, as adapters are written: ``python tests/fakes/wrong_adapter.py MISTAKE``.

It serves the reference through the Python adapter's own translation, but
reads each request line with one mistake of its JSON layer first, a mistake
no wrong implementation of ``tests/fakes/wrong.py`` can make, since the
harness decodes those requests itself.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Final

from ssm_rollback_spec import rollback
from ssm_rollback_spec.harness import protocol
from ssm_rollback_spec.harness.adapter import respond

#: Every mistake, by the name the command line takes.
MISTAKES: Final = (
    # An integer reader that takes 1.0, 1e2 and -0 for integers.
    "lenient-integers",
    # A trace or race of more than 256 events is run, not refused.
    "no-event-bound",
    # A request nested deeper than 16 levels is read, not refused.
    "no-depth-bound",
    # A C-string parse: a parse text ends at its first NUL.
    "nul-cut",
    # A cell that loses a race_cells round, every time (a racy cell, made sure).
    "mixed-round",
    # No mistake: a race's events on a pool of 16 threads, which the
    # protocol allows (docs/protocol.md, race).
    "pool-of-16",
    # A check-then-set cell with a wide window, its racers released together
    # and their spans given: the race shows whenever two calls overlap.
    "racy-window",
    # The control: the same cell, its racers run one after another (spans
    # given), so no race is ever run: not observed, never a pass.
    "serial-racers",
    # An adapter written before the spans: the reference's races, no spans.
    "no-spans",
)

#: The mistakes that are in a race's reply alone.
_RACING: Final = frozenset({"racy-window", "serial-racers", "no-spans"})

#: How long the racy cell waits between its check and its set.
_WINDOW_SECONDS: Final = 0.002

#: The pool a race's events run on under "pool-of-16".
_POOL: Final = 16


def _lenient_number(text: str, /) -> int | float:
    number = float(text)
    return int(number) if number.is_integer() else number


def _plain_integer(text: str, /) -> int | float:
    # As the protocol reads it: -0 is the float it is, no integer.
    return -0.0 if text == "-0" else int(text)


def _call(event: dict[str, object], /) -> str:
    if event.get("op") == "set":
        return rollback.set_ssm_rollback_mode(rollback.SsmRollbackMode(event["mode"])).value
    return rollback.ssm_rollback_mode().value


#: The fields some op uses: a reader that keeps only these never sees the rest.
_USED: Final = frozenset(
    {"op", "text", "mode", "events", "rounds", "qkvz_elems", "nv", "num_ssm_layers"}
    | {"row_bytes", "k_ceiling", "mtp_state_slots"}
)


def _mixed(reply: dict[str, object], /) -> dict[str, object]:
    # One round's first call flipped: a mix, or a mode no call gave.
    rounds = reply.get("ok")
    if isinstance(rounds, list) and rounds and rounds[0]:
        index = min(3, len(rounds) - 1)
        first = rounds[index][0]
        rounds[index][0] = "snapshot" if first == "replay" else "replay"
    return reply


def _race_on_a_pool(events: list[dict[str, object]], /) -> list[str]:
    # Thread k makes calls k, k + 16, ... in turn, all threads released together.
    size = max(1, min(len(events), _POOL))
    barrier = threading.Barrier(size)
    returned = [""] * len(events)

    def run(first: int) -> None:
        barrier.wait()
        for index in range(first, len(events), size):
            returned[index] = _call(events[index])

    threads = [threading.Thread(target=run, args=(first,)) for first in range(size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return returned


def _racy_call(cell: dict[str, str], event: dict[str, object], /) -> tuple[str, tuple[int, int]]:
    # Check, wait, then set: two calls inside the window both win.
    start = time.monotonic_ns()
    mode = str(event["mode"]) if event["op"] == "set" else "snapshot"
    if "mode" not in cell:
        time.sleep(_WINDOW_SECONDS)
        cell["mode"] = mode
    else:
        mode = cell["mode"]
    return mode, (start, time.monotonic_ns())


def _racy_round(
    events: list[dict[str, object]], /, *, together: bool
) -> tuple[list[str], list[tuple[int, int]]]:
    """One round on a fresh racy cell: what each call returned, and its span."""
    cell: dict[str, str] = {}
    results: list[tuple[str, tuple[int, int]]] = [("", (0, 0))] * len(events)
    barrier = threading.Barrier(max(1, len(events)))

    def run(index: int, event: dict[str, object]) -> None:
        if together:
            barrier.wait()
        results[index] = _racy_call(cell, event)

    threads = [threading.Thread(target=run, args=item) for item in enumerate(events)]
    for thread in threads:
        thread.start()
        if not together:
            thread.join()
    for thread in threads:
        thread.join()
    return [mode for mode, _ in results], [span for _, span in results]


def _racing_reply(mistake: str, line: str, /) -> dict[str, object] | None:
    """The reply of a mistake that is in its races alone; None for any other request."""
    try:
        checked = protocol.decode_request(line)
    except protocol.ProtocolError:
        return None
    if checked["op"] not in {"race", "race_cells"}:
        return None
    if mistake == "no-spans":
        reply = respond(rollback, line)
        reply.pop(protocol.SPANS, None)
        return reply
    events = checked["events"]
    assert isinstance(events, list)
    rounds = [
        _racy_round(events, together=mistake == "racy-window")
        for _ in range(int(str(checked.get("rounds", 1))))
    ]
    if checked["op"] == "race":
        [(returned, spans)] = rounds
        return {"ok": returned, protocol.SPANS: spans}
    return {
        "ok": [round_[0] for round_ in rounds],
        protocol.SPANS: [round_[1] for round_ in rounds],
    }


def _reply(mistake: str, line: str, /) -> dict[str, object]:  # noqa: PLR0911 - one return per mistake
    try:
        if mistake == "lenient-integers":
            request = json.loads(line, parse_float=_lenient_number, parse_int=int)
        else:
            request = json.loads(line, parse_int=_plain_integer)
    except ValueError:
        return respond(rollback, line)
    if not isinstance(request, dict):
        return respond(rollback, line)
    events = request.get("events")
    if mistake == "pool-of-16" and request.get("op") == "race":
        try:
            checked = protocol.decode_request(line)
        except protocol.ProtocolError:
            return respond(rollback, line)
        events_checked = checked["events"]
        assert isinstance(events_checked, list)
        return protocol.ok_reply(_race_on_a_pool(events_checked))
    if mistake == "no-event-bound" and isinstance(events, list) and len(events) > 256:
        # Every call in turn, the bound never looked at.
        return protocol.ok_reply([_call(event) for event in events])
    if mistake == "no-depth-bound":
        # The fields the op uses, read by a reader without a depth limit.
        request = {key: value for key, value in request.items() if key in _USED}
    if mistake == "nul-cut" and isinstance(request.get("text"), str):
        request["text"] = request["text"].split("\x00", 1)[0]
    reply = respond(rollback, protocol.encode(request))
    if mistake == "mixed-round" and request.get("op") == "race_cells":
        return _mixed(reply)
    return reply


def main() -> int:
    if len(sys.argv) != 2 or sys.argv[1] not in MISTAKES:
        sys.stderr.write(f"usage: wrong_adapter.py {{{','.join(MISTAKES)}}}\n")
        return 2
    for line in sys.stdin:
        mistake, request = sys.argv[1], line.rstrip("\n")
        racing = _racing_reply(mistake, request) if mistake in _RACING else None
        reply = _reply(mistake, request) if racing is None else racing
        sys.stdout.write(protocol.encode(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
