# SPDX-License-Identifier: MIT OR Apache-2.0
"""The replay corpus's decodes of many rounds: ``rounds.json``.

Each case's expected states are plain decoding's over the accepted rows, or
an engine design's own (the replay profile). The batches are
:mod:`.replay_batches`'.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, cast

import numpy as np

from .. import replay_rows as rows
from ..replay.cases import DrawnCase, make_case, make_layer
from ..replay.designs.sglang import SglangGdnReplaySsm
from ..replay.layer import Pipeline, as_module_holds
from ..replay.paths import capture_minimal_ring, restore_from_snapshots
from ..replay.rounds import decode_round, plain_decode
from .replay_draws import (
    ENGINE_DESIGNS,
    ENGINE_SHAPE,
    K_CEILING,
    MODEL_PIPELINES,
    SHAPES,
    SNAPSHOT,
    drawer,
)
from .replay_format import (
    RebuildCase,
    RoundJson,
    RoundsCase,
    case_dims,
    gate_parameters,
    hex_values,
    ordered,
    rebuild_entry,
    row_json,
    state_json,
)

if TYPE_CHECKING:
    import random
    from collections.abc import Sequence

    from ..replay.layer import Array, LayerState
    from ..replay.paths import SeedRow

__all__ = [
    "engine_rounds_cases",
    "ggml_cases",
    "rounds_cases",
]

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
_RING_LENGTH: Final = 5
#: SGLang's default L (``--linear-replayssm-cache-len``): a power of two of at least 2 K.
_ENGINE_RING_LENGTH: Final = 16


def _round(
    window: Sequence[SeedRow], accepted: int, state: LayerState, /, *, reuse: bool
) -> RoundJson:
    """One round of a decode: its window's rows, what it accepts, the state after it."""
    return RoundJson(
        rows=[row_json(r) for r in window],
        accepted=accepted,
        reuse_slot_after=reuse,
        expected=state_json(state),
    )


#: A ``rounds.json`` case's fields in the order a reader meets them.
_ROUNDS_KEYS: Final = (
    "id",
    "clauses",
    "pipeline",
    "design",
    "dims",
    "conv_weight",
    "a_log",
    "dt_bias",
    "k_ceiling",
    "ring_length",
    "initial",
    "rounds",
    "expected",
)


def _rounds_case(  # noqa: PLR0913 (the case's parts, each its own)
    start: DrawnCase,
    name: str,
    clauses: list[str],
    decoded: list[RoundJson],
    /,
    *,
    weight: Array,
    ring_length: int,
) -> RoundsCase:
    """A decode from ``start``'s checkpoint through the ``decoded`` rounds, with K ceiling 4."""
    dims = case_dims(start)
    dims["window"] = K_CEILING
    return RoundsCase(
        id=name,
        clauses=clauses,
        pipeline=start.pipeline.value,
        dims=dims,
        conv_weight=hex_values(weight),  # type: ignore[typeddict-item]
        k_ceiling=K_CEILING,
        ring_length=ring_length,
        initial=state_json(start.checkpoint),
        rounds=decoded,
        expected=decoded[-1]["expected"],
    )


def rounds_cases(rng: random.Random, /) -> list[RoundsCase]:
    """The model pipelines' ``rounds.json`` decodes: each shape, plain decoding's states."""
    draw = drawer(rng)
    out: list[RoundsCase] = []
    for shape in SHAPES:
        layer = make_layer(shape, draw)
        for pipeline in MODEL_PIPELINES:
            start = make_case(layer, pipeline, 1, 1, draw)
            state, decoded = start.checkpoint, []
            for drafts, accepted, reuse in _ROUNDS:
                window = make_case(layer, pipeline, drafts + 1, 1, draw).rows
                state = plain_decode(layer, state, window[:accepted])
                decoded.append(_round(window, accepted, state, reuse=reuse))
            weight = as_module_holds(layer.conv_weight, pipeline.dtype)
            name = f"{len(out):03d}-{pipeline.value}"
            clauses = ["RB-REPLAY-6", "RB-REPLAY-7", "RB-REPLAY-8"]
            out.append(
                _rounds_case(start, name, clauses, decoded, weight=weight, ring_length=_RING_LENGTH)
            )
    return out


def engine_rounds_cases(rng: random.Random, first: int, /) -> list[RoundsCase]:
    """Each engine pipeline's decode of 16 rounds, as its engine's design keeps the state.

    vLLM's (``snapshot``): each round's accepted rows in one call, h stored
    in BF16 once (:func:`ssm_rollback_spec.replay.rounds.decode_round`);
    SGLang's: its GDN ReplaySSM with L = 16 (several folds); FLA's: plain
    decoding.
    """
    draw = drawer(rng)
    out: list[RoundsCase] = []
    layer = make_layer(ENGINE_SHAPE, draw)
    for pipeline, design in ENGINE_DESIGNS.items():
        start = make_case(layer, pipeline, 1, 1, draw)
        state, decoded = start.checkpoint, []
        sglang = SglangGdnReplaySsm(
            start.layer, pipeline, state, K_CEILING, ring_length=_ENGINE_RING_LENGTH
        )
        for drafts, accepted, flagged in _ROUNDS * 2:
            window = make_case(layer, pipeline, drafts + 1, 1, draw).rows
            # A replay request does not send reuse_slot_after (docs/protocol-replay.md), and a
            # fresh request row changes SGLang's lifecycle: its decode reuses no slot.
            reuse = flagged and pipeline is not Pipeline.SGLANG_BF16
            if pipeline is Pipeline.SGLANG_BF16:
                sglang.verify_round(window, accepted)
                state = sglang.state()
            else:
                state = decode_round(start.layer, state, window[:accepted])
            decoded.append(_round(window, accepted, state, reuse=reuse))
        clauses = ["RB-REPLAY-6", "RB-REPLAY-10"]
        if pipeline is Pipeline.SGLANG_BF16:
            clauses.append("RB-REPLAY-11")
        weight = as_module_holds(layer.conv_weight, np.float32)
        name = f"{first + len(out):03d}-{pipeline.value}"
        case = _rounds_case(
            start, name, clauses, decoded, weight=weight, ring_length=_ENGINE_RING_LENGTH
        )
        case["design"] = design
        case["a_log"], case["dt_bias"] = gate_parameters(start.layer)
        out.append(cast("RoundsCase", {key: case[key] for key in _ROUNDS_KEYS if key in case}))
    return out


#: ggml_gated_delta_net needs key_head_dim == value_head_dim (ggml.h line 2641);
#: three value heads per key head tell an interleaved repeat from ggml's tiled
#: broadcast; 30 conv channels send 28 through ggml's SSE2 SiLU and 2 through libm.
_GGML_SHAPE: Final = rows.GdnShape(
    num_key_heads=2, key_head_dim=3, num_value_heads=6, value_head_dim=3, conv_kernel=4
)


def ggml_cases(
    rng: random.Random, first_rebuild: int, first_round: int, /
) -> tuple[list[RebuildCase], list[RoundsCase]]:
    """The ggml pipeline's cases: windows of 2 and 4 (every partial accept), a 16-round decode.

    llama.cpp keeps a snapshot per token and rolls back to the last accepted
    one, so its decode is plain decoding's (design ``snapshot``).
    """
    draw = drawer(rng)
    pipeline = Pipeline.GGML_F32
    layer = make_layer(_GGML_SHAPE, draw)
    rebuilds: list[RebuildCase] = []
    for window in (2, 4):
        base = make_case(layer, pipeline, window, 1, draw)
        for accepted in range(1, window):
            case = DrawnCase(base.layer, pipeline, base.checkpoint, base.rows, accepted)
            verified = case.verified()
            name = f"{first_rebuild + len(rebuilds):03d}-{pipeline.value}-k{window}-a{accepted}"
            entry = rebuild_entry(case, name, ["RB-REPLAY-1", "RB-REPLAY-10"])
            entry["ring"] = [row_json(r) for r in capture_minimal_ring(verified)]
            entry["expected"] = state_json(restore_from_snapshots(verified, accepted))
            rebuilds.append(ordered(entry))
    start = make_case(layer, pipeline, 1, 1, draw)
    state, decoded = start.checkpoint, []
    for drafts, accepted, reuse in _ROUNDS * 2:
        window_rows = make_case(layer, pipeline, drafts + 1, 1, draw).rows
        state = decode_round(start.layer, state, window_rows[:accepted])
        decoded.append(_round(window_rows, accepted, state, reuse=reuse))
    weight = as_module_holds(layer.conv_weight, np.float32)
    name = f"{first_round:03d}-{pipeline.value}"
    clauses = ["RB-REPLAY-6", "RB-REPLAY-10"]
    rounds = _rounds_case(
        start, name, clauses, decoded, weight=weight, ring_length=_ENGINE_RING_LENGTH
    )
    rounds["design"] = SNAPSHOT
    rounds["a_log"], rounds["dt_bias"] = gate_parameters(start.layer)
    return rebuilds, [
        cast("RoundsCase", {key: rounds[key] for key in _ROUNDS_KEYS if key in rounds})
    ]
