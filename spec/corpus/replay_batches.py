# SPDX-License-Identifier: MIT OR Apache-2.0
"""The replay corpus's batches: ``batch.json`` and ``batch_alone.json``.

A batch's steps run sequences on a pool of slots; each case's expected states
are each sequence's replay as the batch oracle gives it, or, for an alone
case, what the implementation gives the sequence alone (the replay profile).
The decodes of a single sequence are :mod:`.replay_decodes`'.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Final

from ..harness.replay_wire import rerouted_entries
from ..replay.batch import BatchEntry, batch_oracle
from ..replay.cases import make_case, make_layer
from ..replay.layer import Pipeline, as_module_holds
from .replay_draws import ENGINE_SHAPE, K_CEILING, MODEL_PIPELINES, SHAPES, drawer
from .replay_format import (
    AloneCase,
    BatchCase,
    BatchStepJson,
    CaseDims,
    batch_entry_json,
    gate_parameters,
    hex_values,
    state_json,
)

if TYPE_CHECKING:
    import random
    from collections.abc import Mapping, Sequence

    from .. import replay_rows as rows
    from ..replay.cases import Draw
    from ..replay.layer import GdnLayer
    from ..replay.paths import SeedRow

__all__ = [
    "BATCH_SHAPE",
    "LATER_BATCH_PLANS",
    "PREFIX_HIT_PLANS",
    "PROMPT_BATCH_PLANS",
    "WIDE_BATCH_PLANS",
    "alone_cases",
    "batch_cases",
    "prefix_hit_cases",
]


#: A planned entry: (sequence, slot, window, accepted, prefill rows, joins, finishes).
#: A window of 0 (accepted 0) is a prompt chunk alone: its prefill rows this step,
#: its first verify in a later one.
_Planned = tuple[str, int, int, int, int, bool, bool]

#: The batch shapes rollback bugs shipped in, step by step (docs/replay-designs.md,
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
#: Shapes added for the second real bug (docs/engines.md, "Real bugs"), drawn
#: after every batch case above so that those keep their bytes
#: (``replay_cases.py``): a slot taken, right after its holder accepted several,
#: by a sequence whose first step is a verify, every window with drafts (vLLM
#: #48132: Model Runner V2 before 0.26.0 leaves the last holder's accepted count
#: in the batch row outside mode "align"; with no decode without drafts, the
#: releases before 0.32.0 run it without their prefill kernels).
LATER_BATCH_PLANS: Final[Mapping[str, tuple[int, tuple[tuple[_Planned, ...], ...]]]] = {
    "slot-taken-by-a-verify-after-drafts-accepted": (
        2,
        (
            (("s0", 0, 4, 3, 0, True, False), ("s1", 1, 3, 2, 0, True, False)),
            (("s0", 0, 3, 3, 0, False, True), ("s1", 1, 2, 2, 0, False, False)),
            (("s2", 0, 3, 2, 0, True, False), ("s1", 1, 4, 2, 0, False, True)),
            (("s2", 0, 2, 1, 0, False, False), ("s3", 1, 3, 3, 0, True, False)),
            (("s3", 1, 2, 2, 0, False, True), ("s2", 0, 3, 1, 0, False, True)),
        ),
    ),
}
#: Prompts beside verifies (vLLM's mixed batches, docs/engines-vllm.md, "Prompts beside
#: verifies"): prompts of every length from 1 to K + 2 rows, K and K + 1 among
#: them (vLLM #53051: a prompt of 1 + K tokens taken for a verify), each joining in
#: a step where its neighbours verify; a prompt split into chunks over steps, as
#: chunked prefill runs it; a prompt in a slot freed the step before; a prompt
#: and its first verify in one entry. Drawn after every batch case above, from
#: the stream of the later plans, so those keep their bytes.
PROMPT_BATCH_PLANS: Final[Mapping[str, tuple[int, tuple[tuple[_Planned, ...], ...]]]] = {
    "prompts-of-every-length-beside-verifies": (
        2,
        tuple(
            step
            for length in range(1, K_CEILING + 3)
            for step in (
                (
                    (f"p{length}", 1, 0, 0, length, True, False),
                    ("s0", 0, 1 + length % K_CEILING, 1, 0, length == 1, False),
                ),
                (
                    ("s0", 0, 2, 2, 0, False, length == K_CEILING + 2),
                    (f"p{length}", 1, 1 + (length + 1) % K_CEILING, 1, 0, False, True),
                ),
            )
        ),
    ),
    "prompt-chunks-over-steps-and-a-slot-reused": (
        3,
        (
            (("s0", 0, 4, 2, 0, True, False), ("s1", 1, 0, 0, 1, True, False)),
            (
                ("s1", 1, 0, 0, K_CEILING, False, False),
                ("s0", 0, 3, 3, 0, False, False),
                ("s2", 2, 0, 0, K_CEILING + 1, True, False),
            ),
            (
                ("s2", 2, 1, 1, 0, False, False),
                ("s1", 1, 4, 1, 2, False, False),
                ("s0", 0, 2, 1, 0, False, True),
            ),
            (
                ("s3", 0, 0, 0, 3, True, False),
                ("s1", 1, 3, 2, 0, False, False),
                ("s2", 2, 4, 4, 0, False, False),
            ),
            (
                ("s2", 2, 1, 1, 0, False, True),
                ("s3", 0, 4, 3, 0, False, False),
                ("s1", 1, 2, 2, 0, False, True),
            ),
            (("s4", 2, 2, 1, 2, True, False), ("s3", 0, 1, 1, 0, False, True)),
            (("s4", 2, 3, 2, 0, False, True),),
        ),
    ),
}


def _named(label: str, /) -> str:
    """A sequence name of 64 characters, the longest a name may be (docs/protocol.md)."""
    return f"{label}-".ljust(64, "x")


_A, _B, _C, _D = (_named(label) for label in ("seq-a", "seq-b", "seq-c", "seq-d"))
#: A pool at the protocol's size (docs/replay-designs.md, "Batches"): 4,096 slots,
#: sequences of 64-character names in slots 0 and 256, 255 and 4,095 (the last), the same slot
#: to a runtime that keeps slot indices in 8 bits; each of the four accepts 1, 2, 3
#: and 4 of a window of 4, sits the next step out and comes back; a slot freed and
#: taken the next step, the finisher listed first and the joiner last, then the
#: reverse. Few rows: a pool this large costs one index per entry. Drawn after every
#: batch case above, from a stream of its own, so those keep their bytes.
WIDE_BATCH_PLANS: Final[Mapping[str, tuple[int, tuple[tuple[_Planned, ...], ...]]]] = {
    "a-pool-of-4096-slots-with-long-names": (
        4096,
        (
            (
                (_A, 0, 4, 1, 0, True, False),
                (_D, 4095, 4, 2, 2, True, False),
                (_B, 256, 4, 3, 0, True, False),
                (_C, 255, 4, 4, 1, True, False),
            ),
            (("e", 300, 2, 1, 0, True, False),),
            (
                (_D, 4095, 1, 1, 0, False, False),
                (_A, 0, 3, 2, 0, False, False),
                ("e", 300, 3, 3, 0, False, False),
                (_C, 255, 2, 1, 0, False, False),
                (_B, 256, 1, 1, 0, False, False),
            ),
            (
                (_D, 4095, 2, 2, 0, False, True),
                (_B, 256, 4, 2, 0, False, False),
                (_A, 0, 1, 1, 0, False, False),
                ("e", 300, 1, 1, 0, False, False),
            ),
            (
                (_C, 255, 3, 1, 0, False, False),
                (_A, 0, 2, 1, 0, False, False),
                (_B, 256, 3, 3, 0, False, False),
                (_named("seq-f"), 4095, 2, 1, 1, True, False),
            ),
            (
                (_named("seq-f"), 4095, 4, 4, 0, False, False),
                (_C, 255, 1, 1, 0, False, True),
                (_A, 0, 2, 2, 0, False, False),
                ("e", 300, 2, 2, 0, False, True),
                (_B, 256, 2, 1, 0, False, True),
            ),
            (
                (_named("seq-g"), 256, 3, 2, 0, True, False),
                (_named("seq-f"), 4095, 1, 1, 0, False, True),
                (_A, 0, 1, 1, 0, False, True),
            ),
            ((_named("seq-g"), 256, 2, 1, 0, False, True),),
        ),
    ),
}
BATCH_SHAPE: Final = SHAPES[1]
_BATCH_DRAWN_STEPS: Final = 10
_BATCH_DRAWN_SLOTS: Final = 3


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
            window = rng.randint(1, K_CEILING)
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


def _planned_steps(
    layer: GdnLayer,
    pipeline: Pipeline,
    plan: tuple[tuple[_Planned, ...], ...],
    draw: Draw,
    /,
    *,
    prompts: bool,
) -> list[list[BatchEntry]]:
    """``plan``'s steps in ``pipeline``: checkpoints, windows, and prefills with ``prompts``."""
    steps: list[list[BatchEntry]] = []
    for planned in plan:
        batch = []
        for sequence, slot, window, accepted, planned_prefill, joins, finish in planned:
            prefill = planned_prefill if prompts else 0
            start = make_case(layer, pipeline, max(prefill, 1), 1, draw)
            batch.append(
                BatchEntry(
                    sequence=sequence,
                    slot=slot,
                    rows=make_case(layer, pipeline, window, 1, draw).rows if window else (),
                    accepted=accepted,
                    checkpoint=start.checkpoint if joins else None,
                    prefill=start.rows if prefill else (),
                    finish=finish,
                )
            )
        steps.append(batch)
    return steps


def batch_cases(
    rng: random.Random,
    pipelines: tuple[Pipeline, ...] = MODEL_PIPELINES,
    shape: rows.GdnShape = BATCH_SHAPE,
    first: int = 0,
    /,
    *,
    plans: Mapping[str, tuple[int, tuple[tuple[_Planned, ...], ...]]] | None = None,
) -> list[BatchCase]:
    """The batch cases: each plan, then a drawn one, in each of ``pipelines``.

    ``plans`` (:data:`LATER_BATCH_PLANS`, :data:`PROMPT_BATCH_PLANS`) replaces
    the first plans and the drawn one.
    """
    draw = drawer(rng)
    layer = make_layer(shape, draw)
    if plans is None:
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
            # (vLLM's is further than its pipeline's bound from the model: docs/engines-vllm.md),
            # so an engine's sequences join from their checkpoint, without prefill rows.
            dropped = pipeline.engine and any(entry[4] for step in plan for entry in step)
            name = f"{planned_name}-without-prefill" if dropped else planned_name
            steps = _planned_steps(layer, pipeline, plan, draw, prompts=not pipeline.engine)
            case_id = f"{first + len(out):03d}-{pipeline.value}-{name}"
            out.append(_batch_case(case_id, layer, pipeline, shape, slots, steps))
    return out


def _batch_case(  # noqa: PLR0913, PLR0917 (the case's parts, each its own)
    case_id: str,
    layer: GdnLayer,
    pipeline: Pipeline,
    shape: rows.GdnShape,
    slots: int,
    steps: list[list[BatchEntry]],
    /,
) -> BatchCase:
    """A ``batch.json`` case of ``steps``, its expected states each sequence's replay alone."""
    expected = [state for after in batch_oracle(layer, pipeline, steps) for state in after]
    case = BatchCase(
        id=case_id,
        clauses=["RB-REPLAY-12"],
        pipeline=pipeline.value,
        dims=CaseDims(**shape, window=K_CEILING),
        conv_weight=hex_values(as_module_holds(layer.conv_weight, pipeline.dtype)),  # type: ignore[typeddict-item]
        k_ceiling=K_CEILING,
        slots=slots,
        steps=[BatchStepJson(batch=[batch_entry_json(e) for e in b]) for b in steps],
        expected=[state_json(state) for state in expected],
    )
    if pipeline.engine:
        case["a_log"], case["dt_bias"] = gate_parameters(layer)
    return case


#: A join that a prefix cache serves (vLLM #53912, #43559: prefix caching with
#: speculative decoding; docs/engines-vllm.md, "Prefix-cache hits"): ``s0`` joins
#: from its checkpoint and verifies three windows, the third starting at its
#: eighth token, so that a block of 4 or 8 tokens ends with that window's
#: first row; ``s1`` then joins with ``s0``'s checkpoint and a prompt of
#: ``s0``'s first seven kept rows and one of its own, while ``s0`` sits the step
#: out, and both go on verifying. An engine with a prefix cache in blocks of 4
#: or 8 serves ``s1``'s first eight tokens from the state ``s0`` saved at that
#: boundary, and runs only its last prompt row.
PREFIX_HIT_PLANS: Final[Mapping[str, tuple[int, tuple[tuple[_Planned, ...], ...]]]] = {
    "prefix-hit-at-a-verifys-first-token": (
        2,
        (
            (("s0", 0, 4, 4, 0, True, False),),
            (("s0", 0, 3, 2, 0, False, False),),
            (("s0", 0, 3, 2, 0, False, False),),
            (("s1", 1, 2, 1, 8, True, False),),
            (("s0", 0, 2, 1, 0, False, True), ("s1", 1, 3, 2, 0, False, True)),
        ),
    ),
}
#: Of a prefix-hit plan: the sequence that joins from another's prefix, and that other.
_PREFIX_JOINS: Final = (("s1", "s0"),)


def _kept_rows(steps: Sequence[Sequence[BatchEntry]], sequence: str, /) -> list[SeedRow]:
    """``sequence``'s kept rows in order: its prefill rows, then each window's accepted ones."""
    kept: list[SeedRow] = []
    for batch in steps:
        for entry in batch:
            if entry.sequence == sequence:
                kept += [*entry.prefill, *entry.rows[: entry.accepted]]
    return kept


def prefix_hit_cases(rng: random.Random, first: int, /) -> list[BatchCase]:
    """The ``batch.json`` cases of :data:`PREFIX_HIT_PLANS`, in vLLM's pipeline.

    Each joining sequence's checkpoint is its source's, and its prompt's rows
    but the last are its source's first kept rows; a runtime that lists batch
    form ``prefix-hits`` is sent them (docs/protocol.md).
    """
    draw = drawer(rng)
    layer = make_layer(ENGINE_SHAPE, draw)
    pipeline = Pipeline.VLLM_BF16
    out: list[BatchCase] = []
    for name, (slots, plan) in PREFIX_HIT_PLANS.items():
        steps = _planned_steps(layer, pipeline, plan, draw, prompts=True)
        for joiner, source in _PREFIX_JOINS:
            start = next(e for b in steps for e in b if e.sequence == source)
            step, index = next(
                (n, i) for n, b in enumerate(steps) for i, e in enumerate(b) if e.sequence == joiner
            )
            entry = steps[step][index]
            shared = _kept_rows(steps[:step], source)[: len(entry.prefill) - 1]
            steps[step][index] = replace(
                entry, checkpoint=start.checkpoint, prefill=(*shared, entry.prefill[-1])
            )
        case_id = f"{first + len(out):03d}-{pipeline.value}-{name}"
        out.append(_batch_case(case_id, layer, pipeline, ENGINE_SHAPE, slots, steps))
    return out


def _alone_steps(
    steps: Sequence[Sequence[BatchEntry]], /
) -> tuple[list[list[BatchEntry]], list[list[int]]]:
    """The batch's steps, then each of its sequences alone; the pairs of states that must match.

    In the batch part, each sequence's last entry finishes it, so that its slot
    is free again; then each sequence, in the order it joined, runs its own
    entries again under the name ``NAME-alone``, in its own slot, one entry a
    step (a batch of one with the same steps). Each pair is ``[i, j]``: the
    reply's state ``i``, an entry of the batch, and ``j``, the same entry alone.
    """
    last = {
        entry.sequence: (number, index)
        for number, batch in enumerate(steps)
        for index, entry in enumerate(batch)
    }
    batched = [
        [
            replace(entry, finish=True) if last[entry.sequence] == (number, index) else entry
            for index, entry in enumerate(batch)
        ]
        for number, batch in enumerate(steps)
    ]
    flat = [entry for batch in batched for entry in batch]
    out = [list(batch) for batch in batched]
    pairs: list[list[int]] = []
    position = len(flat)
    for sequence in dict.fromkeys(entry.sequence for entry in flat):
        for index, entry in enumerate(flat):
            if entry.sequence == sequence:
                out.append([replace(entry, sequence=f"{sequence}-alone")])
                pairs.append([index, position])
                position += 1
    return out, pairs


def alone_cases(
    rng: random.Random,
    pipelines: Sequence[Pipeline],
    shape: rows.GdnShape,
    first: int = 0,
    /,
) -> list[AloneCase]:
    """The cases that judge a runtime's batch against itself, in each of ``pipelines``.

    The plans are the prompt plans, and the prefill plan the engines' batch
    cases leave their prefill out of. Each case's request runs the batch, then
    each sequence alone; its ``alone`` pairs name the states that must be the
    same (RB-REPLAY-13), bit for bit but the ``rerouted`` ones
    (:func:`..harness.replay_wire.rerouted_entries`), within the pipeline's bound.
    """
    draw = drawer(rng)
    layer = make_layer(shape, draw)
    plans = {name: _BATCH_PLANS[name] for name in ("first-verify-after-prefill",)} | dict(
        PROMPT_BATCH_PLANS
    )
    out: list[AloneCase] = []
    for planned_name, (slots, plan) in plans.items():
        for pipeline in pipelines:
            steps = _planned_steps(layer, pipeline, plan, draw, prompts=True)
            requested, pairs = _alone_steps(steps)
            # The request must be one the model runs: every pairing is then exact there.
            batch_oracle(layer, pipeline, requested)
            case = AloneCase(
                id=f"{first + len(out):03d}-{pipeline.value}-{planned_name}",
                clauses=["RB-REPLAY-13"],
                pipeline=pipeline.value,
                dims=CaseDims(**shape, window=K_CEILING),
                conv_weight=hex_values(as_module_holds(layer.conv_weight, pipeline.dtype)),  # type: ignore[typeddict-item]
                k_ceiling=K_CEILING,
                slots=slots,
                steps=[BatchStepJson(batch=[batch_entry_json(e) for e in b]) for b in requested],
                alone=pairs,
            )
            # The pairs the pipeline's bound holds for; every other one bit for bit.
            rerouted = rerouted_entries([step["batch"] for step in case["steps"]])
            if rerouted:
                case["rerouted"] = rerouted
            if pipeline.engine:
                case["a_log"], case["dt_bias"] = gate_parameters(layer)
            out.append(case)
    return out
