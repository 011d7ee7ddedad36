# SPDX-License-Identifier: MIT OR Apache-2.0
"""The opt-in ``replay`` operation's fields on the wire (docs/protocol-replay.md).

Floats travel as ``float.hex`` strings, exactly. An adapter that offers the
operation decodes a request with :func:`decode_replay` and answers with
:func:`encode_replay_states`; one that does not answers ``unknown-op``
(:data:`.protocol.Op.REPLAY` is known to every decoder, so the reply is the
adapter's own). Apart from :mod:`.protocol`, so that the mutation gate, whose
tests run in-process against the reference that offers no replay, leaves it
to ``tests/replay/test_replay_protocol.py`` (docs/mutation.md).
"""

from __future__ import annotations

import enum
import math
import re
from typing import TYPE_CHECKING, Final, NotRequired, TypedDict

from .protocol import bad_request, encode_value, required_field

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "ENGINE_PIPELINES",
    "HEX_FLOAT",
    "MAX_BATCH_SLOTS",
    "PIPELINE_ALIASES",
    "REPLAY_BATCH_FIELDS",
    "REPLAY_FIELDS",
    "BatchForm",
    "ReplayBatchEntry",
    "ReplayBatchRequest",
    "ReplayDims",
    "ReplayLayout",
    "ReplayRequest",
    "ReplayRound",
    "ReplayRow",
    "ReplayState",
    "batch_forms",
    "current_pipeline",
    "decode_replay",
    "decode_replay_batch",
    "encode_replay_states",
    "finite_hex",
    "rerouted_entries",
]


#: The fields of a ``replay`` request.
REPLAY_FIELDS: Final = ("pipeline", "layout", "dims", "conv_weight", "checkpoint", "rounds")

#: The fields of a ``replay_batch`` request (docs/protocol-replay-batch.md).
REPLAY_BATCH_FIELDS: Final = ("pipeline", "dims", "conv_weight", "slots", "steps")

#: The most slots a ``replay_batch`` request's pool may have.
MAX_BATCH_SLOTS: Final = 4096


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


#: The longest sequence name a ``replay_batch`` entry may give.
_MAX_NAME: Final = 64

#: The largest head count, head size or conv kernel a replay request may give.
_MAX_DIM: Final = 4096

#: The pipelines that match an engine's own kernels (docs/engines.md): their
#: requests also carry the raw gate inputs the kernels take, ``a`` and ``b``
#: per row and ``a_log`` and ``dt_bias`` per layer.
ENGINE_PIPELINES: Final = ("vllm-bf16", "sglang-bf16", "fla-bf16", "ggml-f32")
_PIPELINES: Final = ("float64", "transformers-bf16", *ENGINE_PIPELINES)

#: Pipeline names protocol version 2 accepted and later renamed, each with its
#: current name (docs/protocol.md, "Changes", 2.4). Until the
#: protocol version changes, an old name is the current one wherever the wire
#: carries a pipeline: in a request, and in a ``describe`` that lists pipelines.
PIPELINE_ALIASES: Final = {"bf16-rows-fp32-state": "transformers-bf16"}


def current_pipeline(name: str, /) -> str:
    """The pipeline's current name: ``name`` itself, unless it is an old name of one."""
    return PIPELINE_ALIASES.get(name, name)


class ReplayLayout(enum.Enum):
    """What a ring row holds: the pre-conv inputs, or the post-conv k and v."""

    #: ``qkv`` (pre-conv q, k, v), ``g`` and ``beta``: the minimal ring.
    PRE_CONV = "pre-conv"
    #: ``k_and_v`` (post-SiLU k then v), ``g`` and ``beta``, and a ``conv_window`` per round.
    POST_CONV = "post-conv"


class ReplayDims(TypedDict):
    """A layer's head shapes and conv kernel."""

    num_key_heads: int
    key_head_dim: int
    num_value_heads: int
    value_head_dim: int
    conv_kernel: int


class ReplayState(TypedDict):
    """A (conv, h) state: conv_dim x (conv_kernel - 1) columns, and nv x dk x dv."""

    conv: list[list[float]]
    h: list[list[list[float]]]


class ReplayRow(TypedDict):
    """One ring row: ``values`` is qkv (pre-conv) or k_and_v (post-conv); g, beta per value head.

    ``a`` and ``b``, per value head, when the request carries the raw gate
    inputs (``a_log`` and ``dt_bias``).
    """

    values: list[float]
    g: list[float]
    beta: list[float]
    a: NotRequired[list[float]]
    b: NotRequired[list[float]]


class ReplayRound(TypedDict):
    """One verify round: its window's rows, how many are accepted, and (post-conv) its columns."""

    rows: list[ReplayRow]
    accepted: int
    conv_window: NotRequired[list[list[float]]]


class ReplayRequest(TypedDict):
    """A decoded ``replay`` request, its floats parsed from hex."""

    pipeline: str
    layout: ReplayLayout
    dims: ReplayDims
    conv_weight: list[list[float]]
    checkpoint: ReplayState
    rounds: list[ReplayRound]
    #: Per value head, with ``dt_bias``, when the rows carry ``a`` and ``b``:
    #: ``g = -exp(a_log) * softplus(a + dt_bias)``, ``beta = sigmoid(b)``.
    a_log: NotRequired[list[float]]
    dt_bias: NotRequired[list[float]]


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


#: A float.hex string as C's ``%a`` and Python's ``float.hex`` write one.
HEX_FLOAT: Final = re.compile(
    r"[+-]?0[xX][0-9a-fA-F]{1,20}(\.[0-9a-fA-F]{0,20})?[pP][+-]?[0-9]{1,5}"
)


def finite_hex(value: object, /) -> float | None:
    """The value of a finite ``float.hex`` string of the protocol's spelling, or None."""
    if not isinstance(value, str) or not HEX_FLOAT.fullmatch(value):
        return None
    try:
        number = float.fromhex(value)
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _hex_float(value: object, where: str, /) -> float:
    number = finite_hex(value)
    if number is None:
        raise bad_request(f"{where} must be a finite float.hex string, got {encode_value(value)}")
    return number


def _floats(value: object, where: str, length: int, /) -> list[float]:
    if not isinstance(value, list) or len(value) != length:
        raise bad_request(
            f"{where} must be a list of {length} float.hex strings, got {encode_value(value)}"
        )
    return [_hex_float(item, f"{where}[{index}]") for index, item in enumerate(value)]


def _matrix(value: object, where: str, rows: int, columns: int, /) -> list[list[float]]:
    if not isinstance(value, list) or len(value) != rows:
        raise bad_request(f"{where} must be a list of {rows} rows, got {encode_value(value)}")
    return [_floats(row, f"{where}[{index}]", columns) for index, row in enumerate(value)]


def _dims(value: object, /) -> ReplayDims:
    names = ("num_key_heads", "key_head_dim", "num_value_heads", "value_head_dim", "conv_kernel")
    if not isinstance(value, dict):
        raise bad_request(f"field 'dims' must be an object, got {encode_value(value)}")
    for name in names:
        number = required_field(value, name)
        # A conv of one tap keeps no columns: the conv state would be empty.
        least = 2 if name == "conv_kernel" else 1
        if type(number) is not int or not least <= number <= _MAX_DIM:
            raise bad_request(
                f"dims.{name} must be an integer in [{least}, {_MAX_DIM}], "
                f"got {encode_value(number)}"
            )
    dims = ReplayDims(
        num_key_heads=value["num_key_heads"],
        key_head_dim=value["key_head_dim"],
        num_value_heads=value["num_value_heads"],
        value_head_dim=value["value_head_dim"],
        conv_kernel=value["conv_kernel"],
    )
    if dims["num_value_heads"] % dims["num_key_heads"]:
        raise bad_request("dims.num_value_heads must be a multiple of dims.num_key_heads")
    return dims


def _state(value: object, where: str, dims: ReplayDims, /) -> ReplayState:
    if not isinstance(value, dict):
        raise bad_request(f"field '{where}' must be an object, got {encode_value(value)}")
    conv_dim = 2 * dims["num_key_heads"] * dims["key_head_dim"]
    conv_dim += dims["num_value_heads"] * dims["value_head_dim"]
    conv = _matrix(
        required_field(value, "conv"), f"{where}.conv", conv_dim, dims["conv_kernel"] - 1
    )
    h = required_field(value, "h")
    heads = dims["num_value_heads"]
    if not isinstance(h, list) or len(h) != heads:
        raise bad_request(f"{where}.h must be a list of {heads} heads, got {encode_value(h)}")
    rows, columns = dims["key_head_dim"], dims["value_head_dim"]
    return ReplayState(
        conv=conv,
        h=[_matrix(head, f"{where}.h[{index}]", rows, columns) for index, head in enumerate(h)],
    )


def _round(
    value: object, where: str, layout: ReplayLayout, dims: ReplayDims, /, *, gates: bool
) -> ReplayRound:
    if not isinstance(value, dict):
        raise bad_request(f"{where} must be an object, got {encode_value(value)}")
    key_dim = dims["num_key_heads"] * dims["key_head_dim"]
    value_dim = dims["num_value_heads"] * dims["value_head_dim"]
    rows = required_field(value, "rows")
    decoded = _rows(rows, f"{where}.rows", layout, dims, gates=gates)
    accepted = required_field(value, "accepted")
    if type(accepted) is not int or not 1 <= accepted <= len(decoded):
        raise bad_request(
            f"{where}.accepted must be an integer in [1, {len(decoded)}], "
            f"got {encode_value(accepted)}"
        )
    replay_round = ReplayRound(rows=decoded, accepted=accepted)
    if layout is ReplayLayout.POST_CONV:
        conv_dim = 2 * key_dim + value_dim
        window = _matrix(
            required_field(value, "conv_window"), f"{where}.conv_window", conv_dim, len(decoded)
        )
        replay_round["conv_window"] = window
    return replay_round


def _rows(
    rows: object, where: str, layout: ReplayLayout, dims: ReplayDims, /, *, gates: bool
) -> list[ReplayRow]:
    key_dim = dims["num_key_heads"] * dims["key_head_dim"]
    value_dim = dims["num_value_heads"] * dims["value_head_dim"]
    width = 2 * key_dim + value_dim if layout is ReplayLayout.PRE_CONV else key_dim + value_dim
    name = "qkv" if layout is ReplayLayout.PRE_CONV else "k_and_v"
    if not isinstance(rows, list) or not rows:
        raise bad_request(f"{where} must be a non-empty list, got {encode_value(rows)}")
    decoded: list[ReplayRow] = []
    for index, row in enumerate(rows):
        at = f"{where}[{index}]"
        if not isinstance(row, dict):
            raise bad_request(f"{at} must be an object, got {encode_value(row)}")
        heads = dims["num_value_heads"]
        decoded_row = ReplayRow(
            values=_floats(required_field(row, name), f"{at}.{name}", width),
            g=_floats(required_field(row, "g"), f"{at}.g", heads),
            beta=_floats(required_field(row, "beta"), f"{at}.beta", heads),
        )
        if gates:
            decoded_row["a"] = _floats(required_field(row, "a"), f"{at}.a", heads)
            decoded_row["b"] = _floats(required_field(row, "b"), f"{at}.b", heads)
        decoded.append(decoded_row)
    return decoded


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
    away from the decode (docs/engines.md, "Prompts beside verifies"). Every
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


def _pipeline(request: Mapping[str, object], /) -> str:
    pipeline = required_field(request, "pipeline")
    if not isinstance(pipeline, str) or current_pipeline(pipeline) not in _PIPELINES:
        raise bad_request(
            f"field 'pipeline' must be one of {list(_PIPELINES)}, got {encode_value(pipeline)}"
        )
    return current_pipeline(pipeline)


def _weight(request: Mapping[str, object], dims: ReplayDims, /) -> list[list[float]]:
    conv_dim = 2 * dims["num_key_heads"] * dims["key_head_dim"]
    conv_dim += dims["num_value_heads"] * dims["value_head_dim"]
    return _matrix(
        required_field(request, "conv_weight"), "conv_weight", conv_dim, dims["conv_kernel"]
    )


def _gate_parameters(
    request: Mapping[str, object], dims: ReplayDims, /
) -> tuple[list[float], list[float]] | None:
    # The raw gate inputs come as a whole: a_log and dt_bias, then a and b on every row.
    if "a_log" not in request and "dt_bias" not in request:
        return None
    heads = dims["num_value_heads"]
    a_log = _floats(required_field(request, "a_log"), "a_log", heads)
    return a_log, _floats(required_field(request, "dt_bias"), "dt_bias", heads)


def decode_replay(request: Mapping[str, object], /) -> ReplayRequest:
    """A ``replay`` request's fields, checked against its dims and parsed from hex.

    Raises:
        ProtocolError: a field is missing, the wrong shape, or not a finite
            ``float.hex`` string (``bad-request``), named by its path.
    """
    pipeline = _pipeline(request)
    layout_name = required_field(request, "layout")
    layouts = [layout.value for layout in ReplayLayout]
    if layout_name not in layouts:
        raise bad_request(
            f"field 'layout' must be one of {layouts}, got {encode_value(layout_name)}"
        )
    layout = ReplayLayout(layout_name)
    dims = _dims(required_field(request, "dims"))
    weight = _weight(request, dims)
    checkpoint = _state(required_field(request, "checkpoint"), "checkpoint", dims)
    rounds = required_field(request, "rounds")
    if not isinstance(rounds, list) or not rounds:
        raise bad_request(f"field 'rounds' must be a non-empty list, got {encode_value(rounds)}")
    gates = "a_log" in request or "dt_bias" in request
    decoded = ReplayRequest(
        pipeline=pipeline,
        layout=layout,
        dims=dims,
        conv_weight=weight,
        checkpoint=checkpoint,
        rounds=[
            _round(item, f"rounds[{i}]", layout, dims, gates=gates) for i, item in enumerate(rounds)
        ],
    )
    parameters = _gate_parameters(request, dims)
    if parameters is not None:
        decoded["a_log"], decoded["dt_bias"] = parameters
    return decoded


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
        window = _round(value, where, ReplayLayout.PRE_CONV, dims, gates=gates)
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
        entry["checkpoint"] = _state(value["checkpoint"], f"{where}.checkpoint", dims)
    if "prefill" in value:
        entry["prefill"] = _rows(
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
    pipeline = _pipeline(request)
    dims = _dims(required_field(request, "dims"))
    weight = _weight(request, dims)
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
    parameters = _gate_parameters(request, dims)
    if parameters is not None:
        decoded["a_log"], decoded["dt_bias"] = parameters
    return decoded


def encode_replay_states(states: list[ReplayState], /) -> dict[str, object]:
    """A ``replay`` reply's value: the state after each round, its floats as ``float.hex``."""
    return {
        "states": [
            {
                "conv": [[value.hex() for value in row] for row in state["conv"]],
                "h": [[[value.hex() for value in row] for row in head] for head in state["h"]],
            }
            for state in states
        ]
    }
