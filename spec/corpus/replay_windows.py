# SPDX-License-Identifier: MIT OR Apache-2.0
"""The replay corpus's single-window cases: rebuilds, post-conv rebuilds, row bytes.

``rebuild.json`` (the model's pipelines, then each engine pipeline's),
``post_conv.json`` and ``row_bytes.json``; the expected states come from the
snapshot path, whose arithmetic (:mod:`ssm_rollback_spec.replay.portable`)
gives the same bits on every machine. Informative.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import replay_rows as rows
from ..replay.cases import DrawnCase, make_case, make_layer
from ..replay.layer import Pipeline
from ..replay.paths import (
    capture_conv_window,
    capture_minimal_ring,
    capture_post_conv_ring,
    restore_from_snapshots,
)
from .replay_draws import ENGINE_DESIGNS, ENGINE_SHAPE, SHAPES, drawer, model_cases
from .replay_format import (
    PostConvRowJson,
    RebuildCase,
    RowBytesCase,
    RowBytesExpected,
    hex_values,
    ordered,
    rebuild_entry,
    row_json,
    state_json,
)

if TYPE_CHECKING:
    import random

__all__ = ["engine_rebuild_cases", "post_conv_cases", "rebuild_cases", "row_bytes_cases"]


def rebuild_cases(rng: random.Random, /) -> list[RebuildCase]:
    """The model pipelines' ``rebuild.json`` cases: K = 2 and 4, every partial accept."""
    out: list[RebuildCase] = []
    for case in model_cases(rng, (2, 4), SHAPES):
        verified = case.verified()
        clauses = ["RB-REPLAY-1", "RB-REPLAY-3"]
        if case.accepted == case.window - 1:
            clauses.insert(1, "RB-REPLAY-2")
        if case.pipeline is Pipeline.TRANSFORMERS_BF16:
            clauses.append("RB-REPLAY-10")
        name = f"{len(out):03d}-{case.pipeline.value}-k{case.window}-a{case.accepted}"
        entry = rebuild_entry(case, name, clauses)
        entry["ring"] = [row_json(r) for r in capture_minimal_ring(verified)]
        entry["expected"] = state_json(restore_from_snapshots(verified, case.accepted))
        out.append(ordered(entry))
    return out


def engine_rebuild_cases(rng: random.Random, first: int, /) -> list[RebuildCase]:
    """Each engine pipeline's single windows: K = 2 and 4, every partial accept."""
    draw = drawer(rng)
    out: list[RebuildCase] = []
    layer = make_layer(ENGINE_SHAPE, draw)
    for pipeline in ENGINE_DESIGNS:
        for window in (2, 4):
            base = make_case(layer, pipeline, window, 1, draw)
            for accepted in range(1, window):
                case = DrawnCase(base.layer, pipeline, base.checkpoint, base.rows, accepted)
                verified = case.verified()
                clauses = ["RB-REPLAY-1", "RB-REPLAY-10"]
                name = f"{first + len(out):03d}-{pipeline.value}-k{window}-a{accepted}"
                entry = rebuild_entry(case, name, clauses)
                entry["ring"] = [row_json(r) for r in capture_minimal_ring(verified)]
                entry["expected"] = state_json(restore_from_snapshots(verified, accepted))
                out.append(ordered(entry))
    return out


def post_conv_cases(rng: random.Random, /) -> list[RebuildCase]:
    """The ``post_conv.json`` cases: post-conv rows and the conv window, K = 3."""
    out: list[RebuildCase] = []
    for case in model_cases(rng, (3,), SHAPES[1:2]):
        verified = case.verified()
        name = f"{len(out):03d}-{case.pipeline.value}-k{case.window}-a{case.accepted}"
        entry = rebuild_entry(case, name, ["RB-REPLAY-4"])
        entry["post_conv_ring"] = [
            PostConvRowJson(
                k_and_v=hex_values(r.k_and_v),  # type: ignore[typeddict-item]
                g=hex_values(r.g),  # type: ignore[typeddict-item]
                beta=hex_values(r.beta),  # type: ignore[typeddict-item]
            )
            for r in capture_post_conv_ring(case.layer, verified)
        ]
        entry["conv_window"] = hex_values(capture_conv_window(verified))  # type: ignore[typeddict-item]
        entry["expected"] = state_json(restore_from_snapshots(verified, case.accepted))
        out.append(ordered(entry))
    return out


def row_bytes_cases() -> list[RowBytesCase]:
    """The ``row_bytes.json`` cases: every shape's rows and rings, by design."""
    figures = ((36, 4, 2), (36, 1, 2), (1, 2, 1), (48, 6, 4))
    out: list[RowBytesCase] = []
    for shape in (*SHAPES, rows.QWEN3_NEXT_80B_A3B):
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
