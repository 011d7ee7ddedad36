# SPDX-License-Identifier: MIT OR Apache-2.0
"""The replay vectors, ``vectors/replay/``: generated, and read back (draft; informative).

:func:`generate_replay_vectors` builds every file's exact text from seeded
:class:`random.Random` draws (no clock, no numpy random stream), so a fresh
generation equals the committed files byte for byte; ``python -m
ssm_rollback_spec.corpus.replay_cases [DIR]`` writes them. Floats are written with
:meth:`float.hex`, exactly. :func:`rebuild_from_case` is how a runtime (or
this model) uses a case: restore the checkpoint, run the first ``accepted``
ring rows, compare with ``expected`` (see ``docs/replay.md``).

The expected states come from the snapshot path, whose arithmetic
(:mod:`ssm_rollback_spec.replay.portable`: correctly rounded ``exp`` and ``log1p``, basic
operations, sums left to right) gives the same bits on every machine.
"""

from __future__ import annotations

import random
import sys
from math import prod
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, NotRequired, TypedDict, cast

import numpy as np

from .. import SPEC_VERSION
from ..replay import rows
from ..replay.batch import BatchEntry, batch_oracle
from ..replay.cases import Draw, ReplayCase, make_case, make_layer
from ..replay.layer import GdnLayer, LayerState, Pipeline, as_module_holds
from ..replay.paths import (
    MinimalRow,
    SeedRow,
    capture_conv_window,
    capture_minimal_ring,
    capture_post_conv_ring,
    replay_rows,
    restore_from_snapshots,
)
from ..replay.rounds import SglangGdnReplaySsm, decode_round, plain_decode
from .files import SCHEMA_FILE, render_corpus_files, schema_text

if TYPE_CHECKING:
    from collections.abc import Mapping

    from numpy.typing import NDArray

    from ..replay.batch import BatchRuntimeFactory
    from ..replay.layer import Array
    from ..replay.rounds import DecoderFactory
    from ..replay.rows import GdnShape, ReplayRowSizes

__all__ = [
    "BATCH_FILE",
    "ENGINE_DESIGNS",
    "POST_CONV_FILE",
    "REBUILD_FILE",
    "ROUNDS_FILE",
    "ROW_BYTES_FILE",
    "SNAPSHOT",
    "TOLERANCES",
    "BatchCase",
    "CaseDims",
    "RebuildCase",
    "RoundsCase",
    "RowBytesCase",
    "Tolerance",
    "batch_case_states",
    "decode_case",
    "generate_replay_vectors",
    "main",
    "rebuild_from_case",
]

REBUILD_FILE: Final = "rebuild.json"
ROUNDS_FILE: Final = "rounds.json"
POST_CONV_FILE: Final = "post_conv.json"
ROW_BYTES_FILE: Final = "row_bytes.json"
BATCH_FILE: Final = "batch.json"
_SEED: Final = 20261130
_STATUS: Final = "draft: informative; changes nothing in the 1.0.0 contract"


class Tolerance(TypedDict):
    """How far a replayed state may be from a case's expected one, per pipeline.

    ``port`` is 0: a port of the model's arithmetic (docs/replay.md, "What the
    last bits depend on") rebuilds every bit. ``kernel`` bounds the relative
    error ``max |actual - expected| / max |expected|`` of each of conv and h
    for a kernel that sums in another order (docs/replay.md, "Judging a
    runtime's replay"). ``self``, where stated, bounds an implementation
    against itself over other windowings of the same tokens (``check``'s
    replay properties); ``kernel`` does otherwise.
    """

    port: int
    kernel: float
    self: NotRequired[float]


#: Grounded in the measured drift (BENCHMARKS.md, "Replay drift across
#: verify rounds"): FP32 state evaluated in another order (the closed-form
#: fold) stayed within 4.9e-07 over 512 rounds, so 1e-06; float64 is that
#: bound scaled by the ratio of the unit roundoffs (2**-29, 1.9e-15), with
#: room for libm's last-bit exp: 1e-12. The engine pipelines' are measured
#: against the engines' released kernels through their adapters
#: (BENCHMARKS.md, "The engine pipelines' tolerances, measured against the
#: kernels"): vLLM's cases bit for bit, and h stored in BF16, so one BF16
#: step of max |h| (2**-8, 3.9e-3): 4e-3; but a round of A rows against A
#: one-row rounds (check's properties) rounds h once against A times: 8.6e-3
#: over 150 draws, so its self bound 2e-2; SGLang's cases within 3.6e-6, its
#: ReplaySSM over other windowings 7.1e-4, so 2e-3; FLA's fused recurrent
#: rule 2.5e-7, so 1e-6.
TOLERANCES: Final[Mapping[Pipeline, Tolerance]] = {
    Pipeline.FLOAT64: Tolerance(port=0, kernel=1e-12),
    Pipeline.TRANSFORMERS_BF16: Tolerance(port=0, kernel=1e-6),
    Pipeline.VLLM_BF16: Tolerance(port=0, kernel=4e-3, self=2e-2),
    Pipeline.SGLANG_BF16: Tolerance(port=0, kernel=2e-3),
    Pipeline.FLA_BF16: Tolerance(port=0, kernel=1e-6),
}

#: The pipelines the model's own cases use, generated first and unchanged by the engines'.
_MODEL_PIPELINES: Final = (Pipeline.FLOAT64, Pipeline.TRANSFORMERS_BF16)
#: The engine pipelines' cases draw from their own stream, after the model's.
_ENGINE_SEED: Final = 20261201
#: The layer of the engine cases: SGLang's verify kernel needs a key head of
#: at least 32 (``gdn_replayssm_spec_decode.py`` lines 925-931: ``BKT = BK / nk
#: >= 16`` with ``nk`` 2).
_ENGINE_SHAPE: Final = rows.GdnShape(
    num_key_heads=1, key_head_dim=32, num_value_heads=2, value_head_dim=4, conv_kernel=4
)
#: The design each engine's decodes follow: vLLM restores per-token
#: snapshots, SGLang runs its GDN ReplaySSM, FLA's adapter replays minimal rows.
SNAPSHOT: Final = "snapshot"
ENGINE_DESIGNS: Final[Mapping[Pipeline, str]] = {
    Pipeline.VLLM_BF16: SNAPSHOT,
    Pipeline.SGLANG_BF16: rows.ReplayDesign.SGLANG_GDN_REPLAYSSM.value,
    Pipeline.FLA_BF16: rows.ReplayDesign.MINIMAL_PRE_CONV.value,
}

# The small layers the cases use: one key head; two value heads sharing it;
# two key heads and four value heads.
_SHAPES: Final = (
    rows.GdnShape(
        num_key_heads=1, key_head_dim=2, num_value_heads=1, value_head_dim=2, conv_kernel=2
    ),
    rows.GdnShape(
        num_key_heads=1, key_head_dim=3, num_value_heads=2, value_head_dim=2, conv_kernel=3
    ),
    rows.GdnShape(
        num_key_heads=2, key_head_dim=2, num_value_heads=4, value_head_dim=2, conv_kernel=4
    ),
)

PipelineName = Literal["float64", "transformers-bf16", "vllm-bf16", "sglang-bf16", "fla-bf16"]
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
    """One sequence's part of a batch step (docs/protocol.md, "replay_batch")."""

    sequence: str
    slot: int
    checkpoint: NotRequired[StateJson]
    prefill: NotRequired[list[RingRowJson]]
    rows: list[RingRowJson]
    accepted: int
    finish: NotRequired[bool]


class BatchStepJson(TypedDict):
    """One verify of a batch."""

    batch: list[BatchEntryJson]


class BatchCase(TypedDict):
    """One case of ``batch.json``: steps of batches on a pool of ``slots`` slots.

    ``expected`` is each entry's state after its step, step by step in the
    order the entries are listed: each sequence's own replay, as if alone.
    """

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
    expected: list[StateJson]


class RowBytesCase(TypedDict):
    """One case of ``row_bytes.json``."""

    id: str
    clauses: list[str]
    dims: GdnShape
    num_ssm_layers: int
    k_ceiling: int
    mtp_state_slots: int
    expected: RowBytesExpected


def _hex(values: Array, /) -> list[object]:
    listed: list[object] = [
        _hex(item) if item.ndim else float(item).hex() for item in np.asarray(values)
    ]
    return listed


def _state(state: LayerState, /) -> StateJson:
    return StateJson(conv=_hex(state.conv), h=_hex(state.h))  # type: ignore[typeddict-item]


def _drawer(rng: random.Random, /) -> Draw:
    def drawn(shape: tuple[int, ...], low: float, high: float, /) -> NDArray[np.float64]:
        values = [rng.uniform(low, high) for _ in range(prod(shape))]
        return np.array(values, dtype=np.float64).reshape(shape)

    return drawn


def _dims(case: ReplayCase, /) -> CaseDims:
    layer = case.layer
    return CaseDims(
        num_key_heads=layer.num_key_heads,
        key_head_dim=layer.key_head_dim,
        num_value_heads=layer.num_value_heads,
        value_head_dim=layer.value_head_dim,
        conv_kernel=layer.conv_kernel,
        window=case.window,
    )


def _common(case: ReplayCase, name: str, clauses: list[str], /) -> RebuildCase:
    # The weight as the module holds it: BF16 values in the BF16 pipeline.
    weight = as_module_holds(case.layer.conv_weight, case.pipeline.dtype)
    entry = RebuildCase(
        id=name,
        clauses=clauses,
        pipeline=case.pipeline.value,
        dims=_dims(case),
        conv_weight=_hex(weight),  # type: ignore[typeddict-item]
        checkpoint=_state(case.checkpoint),
        accepted=case.accepted,
    )
    if case.pipeline.engine:
        entry["a_log"], entry["dt_bias"] = _gate_parameters(case.layer)
    return entry


def _gate_parameters(layer: GdnLayer, /) -> tuple[Vector, Vector]:
    """``A_log`` and ``dt_bias`` as an engine holds them: BF16 values."""
    a_log = _hex(as_module_holds(layer.a_log, np.float32))
    dt_bias = _hex(as_module_holds(layer.dt_bias, np.float32))
    return a_log, dt_bias  # type: ignore[return-value]


def _row(row: SeedRow | MinimalRow, /) -> RingRowJson:
    entry = RingRowJson(qkv=_hex(row.qkv), g=_hex(row.g), beta=_hex(row.beta))  # type: ignore[typeddict-item]
    if row.a is not None and row.b is not None:
        entry["a"], entry["b"] = _hex(row.a), _hex(row.b)  # type: ignore[typeddict-item]
    return entry


def _cases(
    rng: random.Random, windows: tuple[int, ...], shapes: tuple[GdnShape, ...], /
) -> list[ReplayCase]:
    draw = _drawer(rng)
    built = []
    for shape in shapes:
        layer = make_layer(shape, draw)
        for pipeline in _MODEL_PIPELINES:
            for window in windows:
                base = make_case(layer, pipeline, window, 1, draw)
                built += [
                    ReplayCase(layer, pipeline, base.checkpoint, base.rows, accepted)
                    for accepted in range(1, window)
                ]
    return built


def _rebuild_cases(rng: random.Random, /) -> list[RebuildCase]:
    out: list[RebuildCase] = []
    for case in _cases(rng, (2, 4), _SHAPES):
        verified = case.verified()
        clauses = ["RB-REPLAY-1", "RB-REPLAY-3"]
        if case.accepted == case.window - 1:
            clauses.insert(1, "RB-REPLAY-2")
        if case.pipeline is Pipeline.TRANSFORMERS_BF16:
            clauses.append("RB-REPLAY-10")
        name = f"{len(out):03d}-{case.pipeline.value}-k{case.window}-a{case.accepted}"
        entry = _common(case, name, clauses)
        entry["ring"] = [_row(r) for r in capture_minimal_ring(verified)]
        entry["expected"] = _state(restore_from_snapshots(verified, case.accepted))
        out.append(_ordered(entry))
    return out


def _engine_rebuild_cases(rng: random.Random, first: int, /) -> list[RebuildCase]:
    """Each engine pipeline's single windows: K = 2 and 4, every partial accept."""
    draw = _drawer(rng)
    out: list[RebuildCase] = []
    layer = make_layer(_ENGINE_SHAPE, draw)
    for pipeline in ENGINE_DESIGNS:
        for window in (2, 4):
            base = make_case(layer, pipeline, window, 1, draw)
            for accepted in range(1, window):
                case = ReplayCase(base.layer, pipeline, base.checkpoint, base.rows, accepted)
                verified = case.verified()
                clauses = ["RB-REPLAY-1", "RB-REPLAY-10"]
                name = f"{first + len(out):03d}-{pipeline.value}-k{window}-a{accepted}"
                entry = _common(case, name, clauses)
                entry["ring"] = [_row(r) for r in capture_minimal_ring(verified)]
                entry["expected"] = _state(restore_from_snapshots(verified, accepted))
                out.append(_ordered(entry))
    return out


def _post_conv_cases(rng: random.Random, /) -> list[RebuildCase]:
    out: list[RebuildCase] = []
    for case in _cases(rng, (3,), _SHAPES[1:2]):
        verified = case.verified()
        name = f"{len(out):03d}-{case.pipeline.value}-k{case.window}-a{case.accepted}"
        entry = _common(case, name, ["RB-REPLAY-4"])
        entry["post_conv_ring"] = [
            PostConvRowJson(k_and_v=_hex(r.k_and_v), g=_hex(r.g), beta=_hex(r.beta))  # type: ignore[typeddict-item]
            for r in capture_post_conv_ring(case.layer, verified)
        ]
        entry["conv_window"] = _hex(capture_conv_window(verified))  # type: ignore[typeddict-item]
        entry["expected"] = _state(restore_from_snapshots(verified, case.accepted))
        out.append(_ordered(entry))
    return out


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


def _ordered(entry: RebuildCase, /) -> RebuildCase:
    ordered = {key: entry[key] for key in _KEY_ORDER if key in entry}
    return cast("RebuildCase", ordered)


def _row_bytes_cases() -> list[RowBytesCase]:
    figures = ((36, 4, 2), (36, 1, 2), (1, 2, 1), (48, 6, 4))
    out: list[RowBytesCase] = []
    for shape in (*_SHAPES, rows.QWEN3_NEXT_80B_A3B):
        for layers, k_ceiling, slots in figures:
            channels = rows.conv_dim(shape)
            expected = RowBytesExpected(
                conv_dim=channels,
                sizes=rows.replay_row_sizes(shape),
                minimal_replay_ring_bytes=rows.minimal_replay_ring_bytes(
                    layers, channels, shape["num_value_heads"], k_ceiling, slots
                ),
                post_conv_ring_bytes=rows.post_conv_ring_bytes(layers, shape, k_ceiling, slots),
                design_row_bytes={
                    d.value: rows.design_row_bytes(d, shape) for d in rows.ReplayDesign
                },
                design_ring_bytes={
                    d.value: rows.design_ring_bytes(d, layers, shape, k_ceiling, slots)
                    for d in rows.ReplayDesign
                },
                design_record_bytes={
                    storage.value: rows.replayssm_record_bytes(shape, storage)
                    for storage in rows.RecordStorage
                },
            )
            out.append(
                RowBytesCase(
                    id=f"{len(out):03d}",
                    clauses=["RB-REPLAY-5", "RB-REPLAY-9"],
                    dims=shape,
                    num_ssm_layers=layers,
                    k_ceiling=k_ceiling,
                    mtp_state_slots=slots,
                    expected=expected,
                )
            )
    return out


# The decodes' rounds: (drafts, accepted, reuse the slot after it). Drafts
# vary (adaptive drafting), short rounds follow long ones so that a ring's
# earlier rows are still there, and ring length 5 with K ceiling 4 makes
# ReplaySSM fold.
_ROUNDS: Final = (
    (3, 2, False),
    (1, 1, False),
    (3, 4, True),
    (0, 1, False),
    (2, 3, False),
    (3, 1, False),
    (2, 2, True),
    (1, 2, False),
)
_K_CEILING: Final = 4
_RING_LENGTH: Final = 5
#: SGLang's default L (``--linear-replayssm-cache-len``): a power of two of at least 2 K.
_ENGINE_RING_LENGTH: Final = 16


def _rounds_cases(rng: random.Random, /) -> list[RoundsCase]:
    draw = _drawer(rng)
    out: list[RoundsCase] = []
    for shape in _SHAPES:
        layer = make_layer(shape, draw)
        for pipeline in _MODEL_PIPELINES:
            start = make_case(layer, pipeline, 1, 1, draw)
            state, decoded = start.checkpoint, []
            for drafts, accepted, reuse in _ROUNDS:
                window = make_case(layer, pipeline, drafts + 1, 1, draw).rows
                state = plain_decode(layer, state, window[:accepted])
                decoded.append(
                    RoundJson(
                        rows=[_row(r) for r in window],
                        accepted=accepted,
                        reuse_slot_after=reuse,
                        expected=_state(state),
                    )
                )
            dims = _dims(start)
            dims["window"] = _K_CEILING
            weight = as_module_holds(layer.conv_weight, pipeline.dtype)
            out.append(
                RoundsCase(
                    id=f"{len(out):03d}-{pipeline.value}",
                    clauses=["RB-REPLAY-6", "RB-REPLAY-7", "RB-REPLAY-8"],
                    pipeline=pipeline.value,
                    dims=dims,
                    conv_weight=_hex(weight),  # type: ignore[typeddict-item]
                    k_ceiling=_K_CEILING,
                    ring_length=_RING_LENGTH,
                    initial=_state(start.checkpoint),
                    rounds=decoded,
                    expected=_state(state),
                )
            )
    return out


def _engine_rounds_cases(rng: random.Random, first: int, /) -> list[RoundsCase]:
    """Each engine pipeline's decode of 16 rounds, as its engine's design keeps the state.

    vLLM's (``snapshot``): each round's accepted rows in one call, h stored
    in BF16 once (:func:`.rounds.decode_round`); SGLang's: its GDN ReplaySSM
    with L = 16 (several folds); FLA's: plain decoding.
    """
    draw = _drawer(rng)
    out: list[RoundsCase] = []
    layer = make_layer(_ENGINE_SHAPE, draw)
    for pipeline, design in ENGINE_DESIGNS.items():
        start = make_case(layer, pipeline, 1, 1, draw)
        state, decoded = start.checkpoint, []
        sglang = SglangGdnReplaySsm(
            start.layer, pipeline, state, _K_CEILING, ring_length=_ENGINE_RING_LENGTH
        )
        for drafts, accepted, flagged in _ROUNDS * 2:
            window = make_case(layer, pipeline, drafts + 1, 1, draw).rows
            # A replay request does not send reuse_slot_after (docs/protocol.md), and a
            # fresh request row changes SGLang's lifecycle: its decode reuses no slot.
            reuse = flagged and pipeline is not Pipeline.SGLANG_BF16
            if pipeline is Pipeline.SGLANG_BF16:
                sglang.verify_round(window, accepted)
                state = sglang.state()
            else:
                state = decode_round(start.layer, state, window[:accepted])
            decoded.append(
                RoundJson(
                    rows=[_row(r) for r in window],
                    accepted=accepted,
                    reuse_slot_after=reuse,
                    expected=_state(state),
                )
            )
        dims = _dims(start)
        dims["window"] = _K_CEILING
        a_log, dt_bias = _gate_parameters(start.layer)
        clauses = ["RB-REPLAY-6", "RB-REPLAY-10"]
        if pipeline is Pipeline.SGLANG_BF16:
            clauses.append("RB-REPLAY-11")
        out.append(
            RoundsCase(
                id=f"{first + len(out):03d}-{pipeline.value}",
                clauses=clauses,
                pipeline=pipeline.value,
                design=design,
                dims=dims,
                conv_weight=_hex(as_module_holds(layer.conv_weight, np.float32)),  # type: ignore[typeddict-item]
                a_log=a_log,
                dt_bias=dt_bias,
                k_ceiling=_K_CEILING,
                ring_length=_ENGINE_RING_LENGTH,
                initial=_state(start.checkpoint),
                rounds=decoded,
                expected=_state(state),
            )
        )
    return out


#: A planned entry: (sequence, slot, window, accepted, prefill rows, joins, finishes).
_Planned = tuple[str, int, int, int, int, bool, bool]

#: The batch shapes rollback bugs shipped in, step by step (docs/replay.md,
#: "Batches"): a decode with no drafts in a slot other than 0 beside windows
#: with drafts and other accepted counts (vLLM #39273); a slot reused right
#: after a full accept; a first verify right after a prefill, beside a
#: running sequence (vLLM #43559).
_BATCH_PLANS: Final[Mapping[str, tuple[int, tuple[tuple[_Planned, ...], ...]]]] = {
    "no-drafts-beside-drafts": (
        3,
        (
            (
                ("s0", 0, 3, 2, 0, True, False),
                ("s1", 1, 1, 1, 0, True, False),
                ("s2", 2, 4, 3, 0, True, False),
            ),
            (
                ("s1", 1, 1, 1, 0, False, False),
                ("s0", 0, 2, 2, 0, False, False),
                ("s2", 2, 1, 1, 0, False, False),
            ),
            (
                ("s2", 2, 3, 1, 0, False, False),
                ("s1", 1, 1, 1, 0, False, False),
                ("s0", 0, 4, 4, 0, False, False),
            ),
            (
                ("s0", 0, 1, 1, 0, False, False),
                ("s1", 1, 2, 1, 0, False, True),
                ("s2", 2, 1, 1, 0, False, False),
            ),
        ),
    ),
    "slot-reused-after-full-accept": (
        2,
        (
            (("s0", 1, 3, 3, 0, True, False), ("s1", 0, 2, 1, 0, True, False)),
            (("s0", 1, 3, 3, 0, False, True), ("s1", 0, 1, 1, 0, False, False)),
            (("s2", 1, 3, 2, 0, True, False), ("s1", 0, 4, 4, 0, False, False)),
            (("s2", 1, 1, 1, 0, False, False), ("s1", 0, 2, 2, 0, False, True)),
            (("s3", 0, 2, 2, 0, True, False), ("s2", 1, 4, 1, 0, False, True)),
        ),
    ),
    "first-verify-after-prefill": (
        2,
        (
            (("s0", 0, 2, 1, 0, True, False),),
            (("s0", 0, 3, 2, 0, False, False), ("s1", 1, 3, 1, 3, True, False)),
            (("s1", 1, 2, 2, 0, False, False), ("s0", 0, 1, 1, 0, False, True)),
            (("s2", 0, 1, 1, 2, True, False), ("s1", 1, 4, 3, 0, False, False)),
        ),
    ),
}
#: Shapes added with the engines' batches (docs/engines.md, "Real bugs"): a step
#: in which every sequence decodes with no drafts, right after each accepted
#: several (vLLM #39273 and #52942: its runner before 0.32.0 sends such a step
#: down the plain decode path, which reads the state a verify left in the
#: request's first block, not its last accepted one's).
_BATCH_PLANS_SINCE_ENGINES: Final[Mapping[str, tuple[int, tuple[tuple[_Planned, ...], ...]]]] = {
    "plain-decodes-after-accepting-drafts": (
        2,
        (
            (("s0", 0, 3, 3, 0, True, False), ("s1", 1, 4, 2, 0, True, False)),
            (("s1", 1, 1, 1, 0, False, False), ("s0", 0, 1, 1, 0, False, False)),
            (("s0", 0, 4, 2, 0, False, False), ("s1", 1, 2, 2, 0, False, False)),
            (("s0", 0, 1, 1, 0, False, True), ("s1", 1, 1, 1, 0, False, True)),
        ),
    ),
}
_BATCH_SEED: Final = 20261202
_BATCH_SHAPE: Final = _SHAPES[1]
_BATCH_DRAWN_STEPS: Final = 10
_BATCH_DRAWN_SLOTS: Final = 3
_ENGINE_BATCH_SEED: Final = 20261203
#: The engine pipelines whose adapters offer replay_batch (docs/engines.md): their
#: batches are the same plans, in the engine cases' layer.
_ENGINE_BATCH_PIPELINES: Final = (Pipeline.VLLM_BF16,)


def _drawn_plan(rng: random.Random, /) -> tuple[tuple[_Planned, ...], ...]:
    """Steps drawn from ``rng``: sequences join free slots and finish, windows 1 to K."""
    holders: dict[int, str] = {}
    joined, steps = 0, []
    for _ in range(_BATCH_DRAWN_STEPS):
        batch: list[_Planned] = []
        for slot in range(_BATCH_DRAWN_SLOTS):
            if slot not in holders and rng.random() < 0.7:
                holders[slot], joined = f"s{joined}", joined + 1
                joins = True
            elif slot in holders and rng.random() < 0.85:
                joins = False
            else:
                continue
            window = rng.randint(1, _K_CEILING)
            finish = rng.random() < 0.25
            prefill = rng.randint(1, 3) if joins and rng.random() < 0.5 else 0
            batch.append(
                (holders[slot], slot, window, rng.randint(1, window), prefill, joins, finish)
            )
            if finish:
                del holders[slot]
        if batch:
            rng.shuffle(batch)
            steps.append(tuple(batch))
    return tuple(steps)


def _batch_cases(
    rng: random.Random,
    pipelines: tuple[Pipeline, ...] = _MODEL_PIPELINES,
    shape: rows.GdnShape = _BATCH_SHAPE,
    first: int = 0,
    /,
) -> list[BatchCase]:
    """The batch cases: each plan, then a drawn one, in each of ``pipelines``."""
    draw = _drawer(rng)
    layer = make_layer(shape, draw)
    plans = {
        **_BATCH_PLANS,
        "drawn": (_BATCH_DRAWN_SLOTS, _drawn_plan(rng)),
        # After the drawn plan, so the cases before it keep their draws.
        **_BATCH_PLANS_SINCE_ENGINES,
    }
    out: list[BatchCase] = []
    for planned_name, (slots, plan) in plans.items():
        for pipeline in pipelines:
            # An engine runs a prompt with its chunked rule, not its verify kernel
            # (vLLM's is further than its pipeline's bound from the model: docs/engines.md),
            # so an engine's sequences join from their checkpoint, without prefill rows.
            dropped = pipeline.engine and any(entry[4] for step in plan for entry in step)
            name = f"{planned_name}-without-prefill" if dropped else planned_name
            steps: list[list[BatchEntry]] = []
            for planned in plan:
                batch = []
                for sequence, slot, window, accepted, planned_prefill, joins, finish in planned:
                    prefill = 0 if pipeline.engine else planned_prefill
                    start = make_case(layer, pipeline, max(prefill, 1), 1, draw)
                    batch.append(
                        BatchEntry(
                            sequence=sequence,
                            slot=slot,
                            rows=make_case(layer, pipeline, window, 1, draw).rows,
                            accepted=accepted,
                            checkpoint=start.checkpoint if joins else None,
                            prefill=start.rows if prefill else (),
                            finish=finish,
                        )
                    )
                steps.append(batch)
            expected = [state for after in batch_oracle(layer, pipeline, steps) for state in after]
            dims = CaseDims(**shape, window=_K_CEILING)
            out.append(
                BatchCase(
                    id=f"{first + len(out):03d}-{pipeline.value}-{name}",
                    clauses=["RB-REPLAY-12"],
                    pipeline=pipeline.value,
                    dims=dims,
                    conv_weight=_hex(as_module_holds(layer.conv_weight, pipeline.dtype)),  # type: ignore[typeddict-item]
                    k_ceiling=_K_CEILING,
                    slots=slots,
                    steps=[BatchStepJson(batch=[_batch_entry(e) for e in b]) for b in steps],
                    expected=[_state(state) for state in expected],
                )
            )
            if pipeline.engine:
                out[-1]["a_log"], out[-1]["dt_bias"] = _gate_parameters(layer)
    return out


def _batch_entry(entry: BatchEntry, /) -> BatchEntryJson:
    out = BatchEntryJson(
        sequence=entry.sequence,
        slot=entry.slot,
        rows=[_row(row) for row in entry.rows],
        accepted=entry.accepted,
    )
    if entry.checkpoint is not None:
        out["checkpoint"] = _state(entry.checkpoint)
    if entry.prefill:
        out["prefill"] = [_row(row) for row in entry.prefill]
    if entry.finish:
        out["finish"] = True
    # The order a reader meets them: who, where, from what, then the window.
    order = ("sequence", "slot", "checkpoint", "prefill", "rows", "accepted", "finish")
    return cast("BatchEntryJson", {key: out[key] for key in order if key in out})  # type: ignore[literal-required]


def _document(
    description: str,
    cases: list[RebuildCase] | list[RowBytesCase] | list[RoundsCase] | list[BatchCase],
    /,
    *,
    states: bool = True,
) -> dict[str, object]:
    document: dict[str, object] = {"description": description, "status": _STATUS}
    if states:
        document["tolerance"] = {
            pipeline.value: dict(TOLERANCES[pipeline]) for pipeline in Pipeline
        }
    document["cases"] = cases
    return document


def generate_replay_vectors() -> dict[str, str]:
    """Every file of ``vectors/replay/``, by name, as its exact text.

    RB-REPLAY-1 to RB-REPLAY-12.
    """
    # Reproducible draws, not secrets: Random's stream is fixed for a seed.
    rng = random.Random(_SEED)  # noqa: S311
    engines = random.Random(_ENGINE_SEED)  # noqa: S311
    rebuilds = _rebuild_cases(rng)
    rebuilds += _engine_rebuild_cases(engines, len(rebuilds))
    post_conv = _post_conv_cases(rng)
    rounds = _rounds_cases(rng)
    rounds += _engine_rounds_cases(engines, len(rounds))
    batches = _batch_cases(random.Random(_BATCH_SEED))  # noqa: S311
    # The engine pipelines' batches draw from their own stream, after the model's.
    batches += _batch_cases(
        random.Random(_ENGINE_BATCH_SEED),  # noqa: S311
        _ENGINE_BATCH_PIPELINES,
        _ENGINE_SHAPE,
        len(batches),
    )
    files: dict[str, Mapping[str, object]] = {
        REBUILD_FILE: _document(
            "Replay rebuilds: restore the checkpoint, run the first `accepted` ring rows "
            "(pre-conv q, k, v; g; beta; an engine pipeline's rows also a and b, its case "
            "a_log and dt_bias) through the conv and the gated delta rule; the result must "
            "be `expected`, the snapshot after `accepted` tokens.",
            rebuilds,
        ),
        POST_CONV_FILE: _document(
            "Post-conv rebuilds: h from the post-SiLU k and v rows with g and beta; the "
            "conv state from the checkpoint's columns followed by `conv_window`.",
            post_conv,
        ),
        ROW_BYTES_FILE: _document(
            "Row and ring bytes of the seed's row, the minimal row and the post-conv layout, "
            "and of every design's row and ring (ReplaySSM's record in each storage).",
            _row_bytes_cases(),
            states=False,
        ),
        ROUNDS_FILE: _document(
            "Decodes of many verify rounds: from `initial`, each round's window of rows "
            "(pre-conv q, k, v; g; beta) of which `accepted` are kept; after each round, "
            "whatever the design, the state must be the round's `expected`, plain "
            "decoding's over the accepted rows. `reuse_slot_after` copies the state into "
            "a reused slot; `k_ceiling` bounds the windows, `ring_length` is ReplaySSM's L. "
            "A case with a `design` is that engine's design's decode: its `expected` states "
            "are what that design keeps (docs/replay.md).",
            rounds,
        ),
        BATCH_FILE: _document(
            "Batches: each step one verify of a batch of sequences on a pool of `slots` slots, "
            "each entry its sequence's slot, window rows (pre-conv q, k, v; g; beta) and "
            "accepted count, a joining sequence's `checkpoint` and optional `prefill` rows, "
            "and `finish` freeing its slot after the step. `expected` is each entry's state "
            "after its step, in order: its sequence's own replay, as if it ran alone.",
            batches,
        ),
    }
    header = {"spec_version": SPEC_VERSION, "status": _STATUS}
    texts = render_corpus_files(header, files)
    return {**texts, SCHEMA_FILE: schema_text("replay")}


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

    def state(found: StateJson) -> LayerState:
        return LayerState(conv=_array(found["conv"], dtype), h=_array(found["h"], dtype))

    ring = [
        MinimalRow(_array(r["qkv"], dtype), _array(r["g"], dtype), _array(r["beta"], dtype))
        for r in case["ring"]
    ]
    rebuilt = replay_rows(layer, state(case["checkpoint"]), ring, case["accepted"])
    return rebuilt, state(case["expected"])


def _layer_of(case: RebuildCase | RoundsCase | BatchCase, dtype: type[np.floating], /) -> GdnLayer:
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

    def state(found: StateJson) -> LayerState:
        return LayerState(conv=_array(found["conv"], dtype), h=_array(found["h"], dtype))

    initial = state(case["initial"])
    decoder = make(layer, pipeline, initial, case["k_ceiling"], case["ring_length"])
    zeros = np.zeros(layer.value_dim, dtype=dtype)
    out = []
    for decoded in case["rounds"]:
        window = [
            SeedRow(_array(r["qkv"], dtype), zeros, _array(r["g"], dtype), _array(r["beta"], dtype))
            for r in decoded["rows"]
        ]
        decoder.verify_round(window, decoded["accepted"])
        if decoded["reuse_slot_after"]:
            decoder.reuse_slot()
        out.append((decoder.state(), state(decoded["expected"])))
    return out


def batch_case_states(
    case: BatchCase, make: BatchRuntimeFactory, /
) -> list[tuple[LayerState, LayerState]]:
    """Run a ``batch.json`` case on the batch runtime ``make`` builds.

    Returns, per entry of each step in order, the state the runtime reports
    and the case's expected state. z is not in the case, so rows carry zeros.

    Raises:
        KeyError: the case is not a ``batch.json`` case.

    RB-REPLAY-12.
    """
    pipeline = Pipeline(case["pipeline"])
    dtype = pipeline.dtype
    layer = _layer_of(case, dtype)
    zeros = np.zeros(layer.value_dim, dtype=dtype)

    def rows(found: list[RingRowJson]) -> tuple[SeedRow, ...]:
        return tuple(
            SeedRow(_array(r["qkv"], dtype), zeros, _array(r["g"], dtype), _array(r["beta"], dtype))
            for r in found
        )

    runtime = make(layer, pipeline, case["slots"], case["k_ceiling"])
    reported: list[LayerState] = []
    for step in case["steps"]:
        batch = [
            BatchEntry(
                sequence=entry["sequence"],
                slot=entry["slot"],
                rows=rows(entry["rows"]),
                accepted=entry["accepted"],
                checkpoint=_state_of(entry["checkpoint"], dtype) if "checkpoint" in entry else None,
                prefill=rows(entry.get("prefill", [])),
                finish=entry.get("finish", False),
            )
            for entry in step["batch"]
        ]
        reported += runtime.step(batch)
    return list(zip(reported, (_state_of(s, dtype) for s in case["expected"]), strict=True))


def _state_of(found: StateJson, dtype: type[np.floating], /) -> LayerState:
    return LayerState(conv=_array(found["conv"], dtype), h=_array(found["h"], dtype))


def main(argv: list[str] | None = None) -> int:
    """Write the replay vectors into ``DIR`` (default ``vectors/replay`` under the cwd)."""
    arguments = sys.argv[1:] if argv is None else argv
    target = Path(arguments[0] if arguments else "vectors/replay")
    target.mkdir(parents=True, exist_ok=True)
    for name, text in generate_replay_vectors().items():
        (target / name).write_text(text, encoding="ascii", newline="\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
