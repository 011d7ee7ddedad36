# SPDX-License-Identifier: MIT OR Apache-2.0
"""Offers float64 ``replay_batch``: ``python -m tests.fakes.replay_batch_adapter [WRONG]``.

It answers ``replay`` as ``tests/fakes/replay_adapter.py`` does, and ``replay_batch``
with a slot pool of its own, written from docs/protocol.md as a runtime's
team would: the batch's gates gathered flat, every verify reading its slot
before any commit. Its ``describe`` offers float64 pre-conv rows only.
WRONG makes one bookkeeping mistake such a team could make (the model's own
are ``tests/fakes/wrong_batch.py``):

- ``slot-0``: a decode with no drafts reads slot 0's state, not its own;
- ``neighbour-accepted``: each entry takes the next entry's accepted count;
- ``full-accept-uncommitted``: a window with drafts accepted whole is never committed;
- ``gates-by-window-index``: the gates are gathered at the token's index in
  its own window, not in the flat batch;
- ``prompt-gates-without-offset``: in a step whose prompt rows sit beside
  verifies, a prompt row's gates are gathered at its index among the prompt
  rows, not past the verifies' rows before it in the flat batch (a batch of
  one never shows it);
- ``slot-8-bits``: slot indices kept in 8 bits, so slot 256 is slot 0 and
  slot 4,095 is slot 255 (a pool of 256 slots or fewer never shows it);
- ``accepts-malformed``: no request is checked: whatever it cannot run is
  answered with no states, never ``bad-request``.

Its ``describe`` lists the batch form ``prompt-chunks``: a prompt, or a chunk
of one, runs in the step it comes in, beside the others' verifies.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Final

from ssm_rollback_spec.harness import protocol
from ssm_rollback_spec.harness.protocol import ErrorKind
from ssm_rollback_spec.harness.replay_wire import decode_replay_batch
from tests.fakes import replay_adapter

WRONG: Final = (
    "slot-0",
    "neighbour-accepted",
    "full-accept-uncommitted",
    "gates-by-window-index",
    "prompt-gates-without-offset",
    "slot-8-bits",
    "accepts-malformed",
)

#: What an 8-bit slot index keeps of a slot.
_EIGHT_BITS: Final = 0xFF

_DESCRIBE: Final = {
    "name": "float64 replay_batch (tests/fakes/replay_batch_adapter.py)",
    "usize_bits": 64,
    "replay": {
        "pipelines": ["float64"],
        "layouts": ["pre-conv"],
        "designs": [],
        "batch": ["prompt-chunks"],
    },
}

_Held = tuple[list[list[float]], list[list[list[float]]]]
_Row = dict[str, list[str]]


class _Slot:
    """A slot's state, the checkpoint its last verify started from, and its ring."""

    def __init__(self, state: _Held, /) -> None:
        self.state = self.checkpoint = state
        self.ring: list[tuple[_Row, tuple[list[float], list[float]]]] = []


def _admit(
    request: dict[str, object],
    batch: list[dict[str, Any]],
    slots: dict[int, _Slot],
    how: str | None,
) -> None:
    """A joining sequence's checkpoint into its slot, then every prompt row of the step.

    The step's rows are gathered flat, the verifies' first and the prompts'
    after them, as an engine lays a mixed batch out.
    """
    verifying = [row for entry in batch for row in entry.get("rows", [])]
    prompts = [row for entry in batch for row in entry.get("prefill", [])]
    gates = [replay_adapter.gates_of(row) for row in verifying + prompts]
    mixed = bool(verifying) and how == "prompt-gates-without-offset"
    at = 0
    for entry in batch:
        if "checkpoint" in entry:
            slots[entry["slot"]] = _Slot(replay_adapter.state_of(entry["checkpoint"]))
        slot = slots[entry["slot"]]
        held = slot.state
        for row in entry.get("prefill", []):
            gate = gates[at if mixed else len(verifying) + at]
            held = replay_adapter.step(request, *held, row, gate, None)
            at += 1
        slot.state = slot.checkpoint = held


def _verify(
    request: dict[str, object],
    batch: list[dict[str, Any]],
    slots: dict[int, _Slot],
    how: str | None,
) -> list[_Held]:
    """Every entry's window from the state its slot holds (or, wrongly, another's)."""
    batch = [entry for entry in batch if "rows" in entry]
    gates = [replay_adapter.gates_of(row) for entry in batch for row in entry["rows"]]
    starts = [sum(len(e["rows"]) for e in batch[:index]) for index in range(len(batch))]
    lives = []
    for index, entry in enumerate(batch):
        window, slot = entry["rows"], slots[entry["slot"]]
        read = slots[0] if how == "slot-0" and len(window) == 1 and 0 in slots else slot
        live = slot.checkpoint = read.state
        slot.ring = []
        for token, row in enumerate(window):
            at = token if how == "gates-by-window-index" else starts[index] + token
            live = replay_adapter.step(request, *live, row, gates[at], None)
            if token < len(window) - 1:
                slot.ring.append((row, gates[at]))
        lives.append(live)
    return lives


def _commit(
    request: dict[str, object],
    batch: list[dict[str, Any]],
    slots: dict[int, _Slot],
    lives: list[_Held],
    how: str | None,
    /,
) -> None:
    """A full accept keeps the live state; a partial one replays the ring from the checkpoint."""
    batch = [entry for entry in batch if "rows" in entry]
    for index, (entry, live) in enumerate(zip(batch, lives, strict=True)):
        slot, window = slots[entry["slot"]], len(entry["rows"])
        accepted = entry["accepted"]
        if how == "neighbour-accepted":
            accepted = min(batch[(index + 1) % len(batch)]["accepted"], window)
        if accepted < window:
            held = slot.checkpoint
            for row, gate in slot.ring[:accepted]:
                held = replay_adapter.step(request, *held, row, gate, None)
            slot.state = held
        elif not (how == "full-accept-uncommitted" and window > 1):
            slot.state = live


def _batch(request: dict[str, object], how: str | None, /) -> dict[str, object]:
    slots: dict[int, _Slot] = {}
    states = []
    for step in request["steps"]:  # type: ignore[attr-defined]
        batch = step["batch"]
        if how == "slot-8-bits":
            batch = [entry | {"slot": entry["slot"] & _EIGHT_BITS} for entry in batch]
        _admit(request, batch, slots, how)
        _commit(request, batch, slots, _verify(request, batch, slots, how), how)
        states += [replay_adapter.hexed(*slots[entry["slot"]].state) for entry in batch]
    return {"states": states}


def _reply(line: str, how: str | None, /) -> dict[str, object]:  # noqa: PLR0911 (one return a kind of reply)
    try:
        request = protocol.decode_request(line)
    except protocol.ProtocolError as error:
        return protocol.error_reply(error.kind, str(error))
    if request.get("op") == "describe":
        return protocol.ok_reply(_DESCRIBE)
    if request.get("op") != "replay_batch":
        return replay_adapter.reply(line, None)
    request = json.loads(line)
    if how == "accepts-malformed":
        try:
            return protocol.ok_reply(_batch(request, how))
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, ZeroDivisionError):
            return protocol.ok_reply({"states": []})
    try:
        decode_replay_batch(request)
    except protocol.ProtocolError as error:
        return protocol.error_reply(error.kind, str(error))
    if request.get("pipeline") != "float64":
        return protocol.error_reply(ErrorKind.BAD_REQUEST, "only float64 batches")
    return protocol.ok_reply(_batch(request, how))


def main() -> int:
    return replay_adapter.serve_fake("replay_batch_adapter.py", WRONG, _reply)


if __name__ == "__main__":
    sys.exit(main())
