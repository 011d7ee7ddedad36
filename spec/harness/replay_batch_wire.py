# SPDX-License-Identifier: MIT OR Apache-2.0
"""The opt-in ``replay_batch`` operation on the wire (docs/protocol-replay-batch.md).

Its request is a pool of slots and steps of entries, one a sequence: the
bookkeeping of who holds which slot is checked step by step as the request
is decoded (:func:`decode_replay_batch`). The forms an adapter is sent only
when its ``describe`` lists them (:class:`BatchForm`, :func:`batch_forms`),
and the entries an engine may run on another path in a batch than alone
(:func:`rerouted_entries`), are read from the request's steps here too.
:mod:`.replay_wire` re-exports the public names.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Final, NotRequired, TypedDict

from .protocol import bad_request, encode_value, required_field
from .replay_fields import (
    ReplayDims,
    ReplayLayout,
    ReplayRound,
    ReplayRow,
    ReplayState,
    decode_dims,
    decode_gate_parameters,
    decode_pipeline,
    decode_round,
    decode_rows,
    decode_state,
    decode_weight,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "MAX_BATCH_SLOTS",
    "REPLAY_BATCH_FIELDS",
    "BatchForm",
    "ReplayBatchEntry",
    "ReplayBatchRequest",
    "batch_forms",
    "decode_replay_batch",
    "rerouted_entries",
]


#: The fields of a ``replay_batch`` request (docs/protocol-replay-batch.md).
REPLAY_BATCH_FIELDS: Final = ("pipeline", "dims", "conv_weight", "slots", "steps")

#: The most slots a ``replay_batch`` request's pool may have.
MAX_BATCH_SLOTS: Final = 4096
#: The longest sequence name a ``replay_batch`` entry may give.
_MAX_NAME: Final = 64


class BatchForm(enum.Enum):
    """A form of ``replay_batch`` request an adapter is sent only when its ``describe`` lists it.

    ``prompt-chunks``: prompt rows beside verifies, as an engine's scheduler
    mixes them: an entry with ``prefill`` rows and no window (a prompt, or a
    chunk of one), and ``prefill`` on any entry before the sequence's first
    verify (docs/protocol-replay-batch.md).

    ``prefix-hits``: a join that a prefix cache serves from a verify's tokens:
    its checkpoint is an earlier sequence's, and its prompt is that sequence's
    prompt followed by at least the first row it verified. Every adapter can
    take such a request; one that lists the form says it answers it from its
    prefix cache, as its engine does (docs/protocol-replay-batch.md, "Prefix-cache hits").
    """

    PROMPT_CHUNKS = "prompt-chunks"
    PREFIX_HITS = "prefix-hits"


def _prompt(entry: Mapping[str, object], /) -> list[object]:
    prefill = entry.get("prefill")
    return prefill if isinstance(prefill, list) else []


def batch_forms(request: Mapping[str, object], /) -> frozenset[BatchForm]:
    """The forms a well-formed ``replay_batch`` request uses beyond the first one."""
    joined: set[object] = set()
    #: Each sequence so far: its checkpoint, its prompt rows, and its first verified row.
    starts: dict[object, tuple[object, list[object], object]] = {}
    forms: set[BatchForm] = set()
    steps = request.get("steps")
    for step in steps if isinstance(steps, list) else []:
        batch = step.get("batch") if isinstance(step, dict) else None
        for entry in batch if isinstance(batch, list) else []:
            if not isinstance(entry, dict):
                continue
            name = entry.get("sequence")
            later = name in joined
            joined.add(name)
            if "prefill" in entry and (later or "rows" not in entry):
                forms.add(BatchForm.PROMPT_CHUNKS)
            rows = entry.get("rows")
            first = rows[0] if isinstance(rows, list) and rows else None
            if not later:
                prompt = _prompt(entry)
                if any(
                    checkpoint == entry.get("checkpoint")
                    and verified is not None
                    and prompt[: len(earlier) + 1] == [*earlier, verified]
                    for checkpoint, earlier, verified in starts.values()
                ):
                    forms.add(BatchForm.PREFIX_HITS)
                starts[name] = (entry.get("checkpoint"), prompt, first)
            elif name in starts and starts[name][2] is None:
                checkpoint, prompt, _ = starts[name]
                starts[name] = (checkpoint, prompt + _prompt(entry), first)
    return frozenset(forms)


class ReplayBatchEntry(TypedDict):
    """One sequence's part of a batch step: its slot, its window's rows, its accepted count.

    ``checkpoint`` on the sequence's first entry only; ``prefill`` rows on
    any entry before its first verify (a prompt, or a chunk of one), run
    before its window and all kept; ``finish`` frees its slot after the step.
    A prompt chunk has no window: its ``rows`` are empty and ``accepted`` 0.
    """

    sequence: str
    slot: int
    rows: list[ReplayRow]
    accepted: int
    finish: bool
    checkpoint: NotRequired[ReplayState]
    prefill: NotRequired[list[ReplayRow]]


class ReplayBatchRequest(TypedDict):
    """A decoded ``replay_batch`` request: pre-conv rows, a pool of slots, steps of entries."""

    pipeline: str
    dims: ReplayDims
    conv_weight: list[list[float]]
    slots: int
    steps: list[list[ReplayBatchEntry]]
    a_log: NotRequired[list[float]]
    dt_bias: NotRequired[list[float]]


def rerouted_entries(steps: Sequence[Sequence[Mapping[str, object]]], /) -> list[int]:
    """The entries of a batch that an engine may run on another path than alone, by flat index.

    ``steps`` are a ``replay_batch`` request's steps, each its entries (with
    ``sequence``, and ``prefill`` and ``finish`` where they have them). A
    sequence's entry is rerouted from the first one whose prompt rows are a
    single row in a step with other entries, until it finishes: alone, one
    entry a step, such a row is a decode, and in a batch vLLM 0.33.0 runs it
    through its chunked rule where verifies are beside it (``gdn_attn.py``
    lines 422-430) or a longer prompt chunk comes before it (``split_decodes_and_prefills``,
    ``v1/attention/backends/utils.py`` lines 879-882), one BF16 rounding of h
    away from the decode (docs/engines-vllm.md, "Prompts beside verifies"). Every
    other entry must be the same bit for bit in a batch as alone (RB-REPLAY-13).
    """
    marked: set[str] = set()
    out: list[int] = []
    number = 0
    for step in steps:
        for entry in step:
            sequence = str(entry["sequence"])
            prefill = entry.get("prefill")
            if len(step) > 1 and isinstance(prefill, list) and len(prefill) == 1:
                marked.add(sequence)
            if sequence in marked:
                out.append(number)
            if entry.get("finish"):
                marked.discard(sequence)
            number += 1
    return out


class _Pool:
    """Who holds which slot, and which sequences have finished, as a request goes on."""

    def __init__(self, slots: int, /) -> None:
        self.holders: dict[int, str] = {}
        self.slots: dict[str, int] = {}
        self.finished: set[str] = set()
        #: The sequences that have verified a window: a prompt is over for them.
        self.verified: set[str] = set()
        self.size = slots

    def enter(self, entry: Mapping[str, object], where: str, /, *, joins: bool) -> tuple[str, int]:
        sequence, slot = entry.get("sequence"), entry.get("slot")
        if not isinstance(sequence, str) or not 1 <= len(sequence) <= _MAX_NAME:
            raise bad_request(
                f"{where}.sequence must be a string of 1 to {_MAX_NAME} characters, "
                f"got {encode_value(sequence)}"
            )
        if type(slot) is not int or not 0 <= slot < self.size:
            raise bad_request(
                f"{where}.slot must be an integer in [0, {self.size - 1}], got {encode_value(slot)}"
            )
        if sequence in self.finished:
            raise bad_request(f"{where}: sequence {encode_value(sequence)} has finished")
        if joins:
            if sequence in self.slots:
                raise bad_request(
                    f"{where}.checkpoint: sequence {encode_value(sequence)} has already joined"
                )
            holder = self.holders.get(slot)
            if holder is not None:
                raise bad_request(
                    f"{where}.slot: slot {slot} is held by sequence {encode_value(holder)}"
                )
            self.holders[slot], self.slots[sequence] = sequence, slot
        elif sequence not in self.slots:
            raise bad_request(
                f"{where}.checkpoint is required: sequence {encode_value(sequence)} joins here"
            )
        elif self.slots[sequence] != slot:
            raise bad_request(
                f"{where}.slot must be {self.slots[sequence]}, the slot sequence "
                f"{encode_value(sequence)} holds, got {slot}"
            )
        return sequence, slot

    def leave(self, sequence: str, /) -> None:
        del self.holders[self.slots.pop(sequence)]
        self.finished.add(sequence)


def _batch_entry(  # noqa: PLR0913 (the request's parts an entry is checked against)
    value: object, where: str, dims: ReplayDims, pool: _Pool, seen: set[str], /, *, gates: bool
) -> ReplayBatchEntry:
    if not isinstance(value, dict):
        raise bad_request(f"{where} must be an object, got {encode_value(value)}")
    joins = "checkpoint" in value
    sequence, slot = pool.enter(value, where, joins=joins)
    if sequence in seen:
        raise bad_request(f"{where}: sequence {encode_value(sequence)} is already in this step")
    seen.add(sequence)
    if "prefill" in value and sequence in pool.verified:
        raise bad_request(
            f"{where}.prefill: sequence {encode_value(sequence)} has verified, its prompt is over"
        )
    # A prompt chunk: prefill rows and no window (docs/protocol-replay-batch.md).
    chunk = "prefill" in value and "rows" not in value and "accepted" not in value
    if chunk:
        window = ReplayRound(rows=[], accepted=0)
    else:
        window = decode_round(value, where, ReplayLayout.PRE_CONV, dims, gates=gates)
        pool.verified.add(sequence)
    finish = value.get("finish", False)
    if type(finish) is not bool:
        raise bad_request(f"{where}.finish must be true or false, got {encode_value(finish)}")
    entry = ReplayBatchEntry(
        sequence=sequence,
        slot=slot,
        rows=window["rows"],
        accepted=window["accepted"],
        finish=finish,
    )
    if joins:
        entry["checkpoint"] = decode_state(value["checkpoint"], f"{where}.checkpoint", dims)
    if "prefill" in value:
        entry["prefill"] = decode_rows(
            value["prefill"], f"{where}.prefill", ReplayLayout.PRE_CONV, dims, gates=gates
        )
    return entry


def decode_replay_batch(request: Mapping[str, object], /) -> ReplayBatchRequest:
    """A ``replay_batch`` request's fields, its slot bookkeeping checked step by step.

    Raises:
        ProtocolError: a field is missing, the wrong shape, or not a finite
            ``float.hex`` string, or the steps break the pool's bookkeeping (a
            slot held by another sequence, a sequence that joins twice, comes
            back after it finished, moves to another slot, or appears twice in
            a step) (``bad-request``), named by its path.
    """
    pipeline = decode_pipeline(request)
    dims = decode_dims(required_field(request, "dims"))
    weight = decode_weight(request, dims)
    slots = required_field(request, "slots")
    if type(slots) is not int or not 1 <= slots <= MAX_BATCH_SLOTS:
        raise bad_request(
            f"field 'slots' must be an integer in [1, {MAX_BATCH_SLOTS}], got {encode_value(slots)}"
        )
    steps = required_field(request, "steps")
    if not isinstance(steps, list) or not steps:
        raise bad_request(f"field 'steps' must be a non-empty list, got {encode_value(steps)}")
    gates = "a_log" in request or "dt_bias" in request
    pool = _Pool(slots)
    decoded_steps: list[list[ReplayBatchEntry]] = []
    for number, step in enumerate(steps):
        where = f"steps[{number}]"
        batch = step.get("batch") if isinstance(step, dict) else None
        if not isinstance(batch, list) or not batch:
            raise bad_request(
                f"{where} must be an object whose batch is a non-empty list, "
                f"got {encode_value(step)}"
            )
        seen: set[str] = set()
        entries = [
            _batch_entry(item, f"{where}.batch[{index}]", dims, pool, seen, gates=gates)
            for index, item in enumerate(batch)
        ]
        for entry in entries:
            if entry["finish"]:
                pool.leave(entry["sequence"])
        decoded_steps.append(entries)
    decoded = ReplayBatchRequest(
        pipeline=pipeline, dims=dims, conv_weight=weight, slots=slots, steps=decoded_steps
    )
    parameters = decode_gate_parameters(request, dims)
    if parameters is not None:
        decoded["a_log"], decoded["dt_bias"] = parameters
    return decoded
