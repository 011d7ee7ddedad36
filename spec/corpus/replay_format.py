# SPDX-License-Identifier: MIT OR Apache-2.0
"""The replay corpus's format, ``vectors/replay/``: its files' JSON, written and read back.

The case files' JSON types (:class:`RebuildCase`, :class:`RoundsCase`,
:class:`BatchCase`, :class:`RowBytesCase` and their parts), the model's
values as that JSON holds them (every float a :meth:`float.hex` string,
exactly), and the cases read back into the model: :func:`rebuild_from_case`
is how a runtime (or this model) uses a case: restore the checkpoint, run
the first ``accepted`` ring rows, compare with ``expected`` (see
``docs/replay-corpus.md``); :func:`decode_case` and :func:`batch_case_states` run a
decode or a batch case on a design or a batch runtime. The generators that
write the files are :mod:`.replay_cases`'s (the replay profile).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Literal, NotRequired, TypedDict, cast

import numpy as np

from ..replay.batch import BatchEntry
from ..replay.layer import GdnLayer, LayerState, Pipeline, as_module_holds
from ..replay.paths import MinimalRow, SeedRow, replay_rows

if TYPE_CHECKING:
    from ..replay.batch import BatchRuntimeFactory
    from ..replay.cases import DrawnCase
    from ..replay.layer import Array
    from ..replay.rounds import DecoderFactory
    from ..replay_rows import GdnShape, ReplayRowSizes

__all__ = [
    "BATCH_ALONE_FILE",
    "BATCH_FILE",
    "POST_CONV_FILE",
    "REBUILD_FILE",
    "ROUNDS_FILE",
    "ROW_BYTES_FILE",
    "AloneCase",
    "BatchCase",
    "BatchEntryJson",
    "BatchStepJson",
    "CaseDims",
    "PostConvRowJson",
    "RebuildCase",
    "RingRowJson",
    "RoundJson",
    "RoundsCase",
    "RowBytesCase",
    "RowBytesExpected",
    "StateJson",
    "Tolerance",
    "batch_case_states",
    "batch_entry_json",
    "batch_states",
    "case_dims",
    "decode_case",
    "gate_parameters",
    "hex_values",
    "ordered",
    "rebuild_entry",
    "rebuild_from_case",
    "row_json",
    "state_json",
]

REBUILD_FILE: Final = "rebuild.json"
ROUNDS_FILE: Final = "rounds.json"
POST_CONV_FILE: Final = "post_conv.json"
ROW_BYTES_FILE: Final = "row_bytes.json"
BATCH_FILE: Final = "batch.json"
#: The batches judged against the runtime itself (RB-REPLAY-13).
BATCH_ALONE_FILE: Final = "batch_alone.json"


class Tolerance(TypedDict):
    """How far a replayed state may be from a case's expected one, per pipeline.

    ``port`` is 0: a port of the model's arithmetic (docs/replay-model.md, "What
    the last bits depend on") rebuilds every bit. ``kernel`` bounds the relative
    error ``max |actual - expected| / max |expected|`` of each of conv and h
    for a kernel that sums in another order (docs/replay-corpus.md, "Judging a
    runtime's replay"). ``self``, where stated, bounds an implementation
    against itself over other windowings of the same tokens (``check``'s
    replay properties); ``kernel`` does otherwise.
    """

    port: int
    kernel: float
    self: NotRequired[float]


PipelineName = Literal[
    "float64", "transformers-bf16", "vllm-bf16", "sglang-bf16", "fla-bf16", "ggml-f32"
]
Hex = str
Vector = list[Hex]
Matrix = list[list[Hex]]
Cube = list[list[list[Hex]]]


class CaseDims(TypedDict):
    """A case's layer shape and its verify window K."""

    num_key_heads: int
    key_head_dim: int
    num_value_heads: int
    value_head_dim: int
    conv_kernel: int
    window: int


class StateJson(TypedDict):
    """A (conv, h) state: ``conv`` is conv_dim x (conv_kernel - 1), ``h`` nv x dk x dv."""

    conv: Matrix
    h: Cube


class RingRowJson(TypedDict):
    """A minimal ring row: pre-conv q, k, v, and g and beta per value head.

    An engine pipeline's row also has the gate's raw inputs ``a`` and ``b``.
    """

    qkv: Vector
    g: Vector
    beta: Vector
    a: NotRequired[Vector]
    b: NotRequired[Vector]


class PostConvRowJson(TypedDict):
    """A post-conv ring row: post-SiLU k then v, and g and beta per value head."""

    k_and_v: Vector
    g: Vector
    beta: Vector


class RebuildCase(TypedDict, total=False):
    """One case of ``rebuild.json`` (``ring``) or ``post_conv.json`` (``post_conv_ring``)."""

    id: str
    clauses: list[str]
    pipeline: PipelineName
    dims: CaseDims
    conv_weight: Matrix
    a_log: Vector
    dt_bias: Vector
    checkpoint: StateJson
    ring: list[RingRowJson]
    post_conv_ring: list[PostConvRowJson]
    conv_window: Matrix
    accepted: int
    expected: StateJson


class RowBytesExpected(TypedDict):
    """The byte figures of a row-size case.

    ``design_row_bytes`` and ``design_ring_bytes`` are by design
    (:class:`.rows.ReplayDesign` values; ReplaySSM with BF16 low parts and its
    default L of 16; ``design_record_bytes`` gives its record in each storage).
    """

    conv_dim: int
    sizes: ReplayRowSizes
    minimal_replay_ring_bytes: int
    post_conv_ring_bytes: int
    design_row_bytes: dict[str, int]
    design_ring_bytes: dict[str, int]
    design_record_bytes: dict[str, int]


class RoundJson(TypedDict):
    """One verify round of a ``rounds.json`` decode: its window's rows and what it accepts."""

    rows: list[RingRowJson]
    accepted: int
    reuse_slot_after: bool
    expected: StateJson


class RoundsCase(TypedDict):
    """One case of ``rounds.json``: a decode of many verify rounds from an initial state."""

    id: str
    clauses: list[str]
    pipeline: PipelineName
    design: NotRequired[str]
    dims: CaseDims
    conv_weight: Matrix
    a_log: NotRequired[Vector]
    dt_bias: NotRequired[Vector]
    k_ceiling: int
    ring_length: int
    initial: StateJson
    rounds: list[RoundJson]
    expected: StateJson


class BatchEntryJson(TypedDict):
    """One sequence's part of a batch step (docs/protocol-replay-batch.md)."""

    sequence: str
    slot: int
    checkpoint: NotRequired[StateJson]
    prefill: NotRequired[list[RingRowJson]]
    #: Left out of a prompt chunk alone (docs/protocol-replay-batch.md).
    rows: NotRequired[list[RingRowJson]]
    accepted: NotRequired[int]
    finish: NotRequired[bool]


class BatchStepJson(TypedDict):
    """One verify of a batch."""

    batch: list[BatchEntryJson]


class _BatchSteps(TypedDict):
    """What every batch case holds: its layer, its pool of ``slots`` slots and its steps."""

    id: str
    clauses: list[str]
    pipeline: PipelineName
    dims: CaseDims
    conv_weight: Matrix
    a_log: NotRequired[Vector]
    dt_bias: NotRequired[Vector]
    k_ceiling: int
    slots: int
    steps: list[BatchStepJson]


class BatchCase(_BatchSteps):
    """One case of ``batch.json``: steps of batches on a pool of ``slots`` slots.

    ``expected`` is each entry's state after its step, step by step in the
    order the entries are listed: each sequence's own replay, as if alone.
    """

    expected: list[StateJson]


class AloneCase(_BatchSteps):
    """One case of ``batch_alone.json``: a batch, then each of its sequences alone, in one request.

    ``alone`` pairs the reply's states that must be the same: ``[i, j]``,
    state ``i`` an entry of the batch, state ``j`` the same entry of its
    sequence run alone, a batch of one with the same steps, after the batch
    (RB-REPLAY-13). ``rerouted``, where a case has any, lists the states ``i``
    that :func:`rerouted_entries` names: those pairs within the file's bound
    for the pipeline, every other pair bit for bit.
    """

    alone: list[list[int]]
    rerouted: NotRequired[list[int]]


class RowBytesCase(TypedDict):
    """One case of ``row_bytes.json``."""

    id: str
    clauses: list[str]
    dims: GdnShape
    num_ssm_layers: int
    k_ceiling: int
    mtp_state_slots: int
    expected: RowBytesExpected


def hex_values(values: Array, /) -> list[object]:
    """``values`` as the case files hold them: nested lists of :meth:`float.hex` strings."""
    listed: list[object] = [
        hex_values(item) if item.ndim else float(item).hex() for item in np.asarray(values)
    ]
    return listed


def state_json(state: LayerState, /) -> StateJson:
    """A (conv, h) state as the case files hold it."""
    return StateJson(conv=hex_values(state.conv), h=hex_values(state.h))  # type: ignore[typeddict-item]


def case_dims(case: DrawnCase, /) -> CaseDims:
    """A case's layer shape and its window K."""
    layer = case.layer
    return CaseDims(
        num_key_heads=layer.num_key_heads,
        key_head_dim=layer.key_head_dim,
        num_value_heads=layer.num_value_heads,
        value_head_dim=layer.value_head_dim,
        conv_kernel=layer.conv_kernel,
        window=case.window,
    )


def rebuild_entry(case: DrawnCase, name: str, clauses: list[str], /) -> RebuildCase:
    """The fields a ``rebuild.json`` and a ``post_conv.json`` case share, from ``case``."""
    # The weight as the module holds it: BF16 values in the BF16 pipeline.
    weight = as_module_holds(case.layer.conv_weight, case.pipeline.dtype)
    entry = RebuildCase(
        id=name,
        clauses=clauses,
        pipeline=case.pipeline.value,
        dims=case_dims(case),
        conv_weight=hex_values(weight),  # type: ignore[typeddict-item]
        checkpoint=state_json(case.checkpoint),
        accepted=case.accepted,
    )
    if case.pipeline.engine:
        entry["a_log"], entry["dt_bias"] = gate_parameters(case.layer)
    return entry


def gate_parameters(layer: GdnLayer, /) -> tuple[Vector, Vector]:
    """``A_log`` and ``dt_bias`` as an engine holds them: BF16 values."""
    a_log = hex_values(as_module_holds(layer.a_log, np.float32))
    dt_bias = hex_values(as_module_holds(layer.dt_bias, np.float32))
    return a_log, dt_bias  # type: ignore[return-value]


def row_json(row: SeedRow | MinimalRow, /) -> RingRowJson:
    """A pre-conv ring row as the case files hold it (an engine pipeline's with a and b)."""
    entry = RingRowJson(qkv=hex_values(row.qkv), g=hex_values(row.g), beta=hex_values(row.beta))  # type: ignore[typeddict-item]
    if row.a is not None and row.b is not None:
        entry["a"], entry["b"] = hex_values(row.a), hex_values(row.b)  # type: ignore[typeddict-item]
    return entry


_KEY_ORDER: Final = (
    "id",
    "clauses",
    "pipeline",
    "dims",
    "conv_weight",
    "a_log",
    "dt_bias",
    "checkpoint",
    "ring",
    "post_conv_ring",
    "conv_window",
    "accepted",
    "expected",
)


def ordered(entry: RebuildCase, /) -> RebuildCase:
    """``entry``'s fields in the order a reader meets them."""
    ordered = {key: entry[key] for key in _KEY_ORDER if key in entry}
    return cast("RebuildCase", ordered)


def batch_entry_json(entry: BatchEntry, /) -> BatchEntryJson:
    """One entry of a batch step as ``batch.json`` holds it."""
    out = BatchEntryJson(sequence=entry.sequence, slot=entry.slot)
    if entry.rows:
        out["rows"] = [row_json(row) for row in entry.rows]
        out["accepted"] = entry.accepted
    if entry.checkpoint is not None:
        out["checkpoint"] = state_json(entry.checkpoint)
    if entry.prefill:
        out["prefill"] = [row_json(row) for row in entry.prefill]
    if entry.finish:
        out["finish"] = True
    # The order a reader meets them: who, where, from what, then the window.
    order = ("sequence", "slot", "checkpoint", "prefill", "rows", "accepted", "finish")
    return cast("BatchEntryJson", {key: out[key] for key in order if key in out})  # type: ignore[literal-required]


def _array(values: object, dtype: type[np.floating], /) -> Array:
    def parse(item: object) -> object:
        return [parse(x) for x in item] if isinstance(item, list) else float.fromhex(str(item))

    return np.array(parse(values), dtype=dtype)


def rebuild_from_case(case: RebuildCase, /) -> tuple[LayerState, LayerState]:
    """Rebuild a ``rebuild.json`` case by replay; returns (rebuilt, expected).

    Raises:
        KeyError: the case has no ``ring`` (it is not a ``rebuild.json`` case).

    RB-REPLAY-1.
    """
    dtype = Pipeline(case["pipeline"]).dtype
    layer = _layer_of(case, dtype)
    ring = [
        MinimalRow(_array(r["qkv"], dtype), _array(r["g"], dtype), _array(r["beta"], dtype))
        for r in case["ring"]
    ]
    rebuilt = replay_rows(layer, _state_of(case["checkpoint"], dtype), ring, case["accepted"])
    return rebuilt, _state_of(case["expected"], dtype)


def _layer_of(
    case: RebuildCase | RoundsCase | BatchCase | AloneCase, dtype: type[np.floating], /
) -> GdnLayer:
    dims = case["dims"]
    if "a_log" in case and "dt_bias" in case:
        a_log, dt_bias = _array(case["a_log"], np.float32), _array(case["dt_bias"], np.float32)
    else:
        # g and beta are in the rows, and the output is not rebuilt.
        a_log, dt_bias = np.zeros(dims["num_value_heads"]), np.zeros(dims["num_value_heads"])
    return GdnLayer(
        num_key_heads=dims["num_key_heads"],
        key_head_dim=dims["key_head_dim"],
        num_value_heads=dims["num_value_heads"],
        value_head_dim=dims["value_head_dim"],
        conv_kernel=dims["conv_kernel"],
        conv_weight=_array(case["conv_weight"], dtype),
        a_log=a_log,
        dt_bias=dt_bias,
        norm_weight=np.ones(dims["value_head_dim"]),
        pipeline=Pipeline(case["pipeline"]),
    )


def decode_case(case: RoundsCase, make: DecoderFactory, /) -> list[tuple[LayerState, LayerState]]:
    """Decode a ``rounds.json`` case with the decoder ``make`` builds.

    Returns, per round, the state the design yields and the case's expected
    state. z is not in the case (no state reads it), so the rows carry zeros.

    Raises:
        KeyError: the case is not a ``rounds.json`` case.

    RB-REPLAY-6 to RB-REPLAY-8.
    """
    pipeline = Pipeline(case["pipeline"])
    dtype = pipeline.dtype
    layer = _layer_of(case, dtype)
    initial = _state_of(case["initial"], dtype)
    decoder = make(layer, pipeline, initial, case["k_ceiling"], case["ring_length"])
    out = []
    for decoded in case["rounds"]:
        decoder.verify_round(_seed_rows(layer, decoded["rows"], dtype), decoded["accepted"])
        if decoded["reuse_slot_after"]:
            decoder.reuse_slot()
        out.append((decoder.state(), _state_of(decoded["expected"], dtype)))
    return out


def batch_states(case: BatchCase | AloneCase, make: BatchRuntimeFactory, /) -> list[LayerState]:
    """Run a ``batch.json`` or ``batch_alone.json`` case's steps on the runtime ``make`` builds.

    Returns the state the runtime reports for each entry of each step, in
    order. z is not in the case, so rows carry zeros.

    RB-REPLAY-12, RB-REPLAY-13.
    """
    pipeline = Pipeline(case["pipeline"])
    dtype = pipeline.dtype
    layer = _layer_of(case, dtype)

    def rows(found: list[RingRowJson]) -> tuple[SeedRow, ...]:
        return _seed_rows(layer, found, dtype)

    runtime = make(layer, pipeline, case["slots"], case["k_ceiling"])
    reported: list[LayerState] = []
    for step in case["steps"]:
        batch = [
            BatchEntry(
                sequence=entry["sequence"],
                slot=entry["slot"],
                rows=rows(entry.get("rows", [])),
                accepted=entry.get("accepted", 0),
                checkpoint=_state_of(entry["checkpoint"], dtype) if "checkpoint" in entry else None,
                prefill=rows(entry.get("prefill", [])),
                finish=entry.get("finish", False),
            )
            for entry in step["batch"]
        ]
        reported += runtime.step(batch)
    return reported


def batch_case_states(
    case: BatchCase, make: BatchRuntimeFactory, /
) -> list[tuple[LayerState, LayerState]]:
    """Run a ``batch.json`` case on the batch runtime ``make`` builds.

    Returns, per entry of each step in order, the state the runtime reports
    and the case's expected state.

    Raises:
        KeyError: the case is not a ``batch.json`` case.

    RB-REPLAY-12.
    """
    dtype = Pipeline(case["pipeline"]).dtype
    expected = (_state_of(state, dtype) for state in case["expected"])
    return list(zip(batch_states(case, make), expected, strict=True))


def _state_of(found: StateJson, dtype: type[np.floating], /) -> LayerState:
    return LayerState(conv=_array(found["conv"], dtype), h=_array(found["h"], dtype))


def _seed_rows(
    layer: GdnLayer, found: list[RingRowJson], dtype: type[np.floating], /
) -> tuple[SeedRow, ...]:
    # z is not in a case (no state reads it): the rows carry zeros.
    zeros = np.zeros(layer.value_dim, dtype=dtype)
    return tuple(
        SeedRow(_array(r["qkv"], dtype), zeros, _array(r["g"], dtype), _array(r["beta"], dtype))
        for r in found
    )
