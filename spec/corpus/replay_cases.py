# SPDX-License-Identifier: MIT OR Apache-2.0
"""The replay vectors, ``vectors/replay/``: generated (the replay profile).

:func:`generate_replay_vectors` builds every file's exact text from seeded
:class:`random.Random` draws (no clock, no numpy random stream), so a fresh
generation equals the committed files byte for byte; ``ssm-rollback-spec
vectors generate`` writes them. Floats are written with :meth:`float.hex`,
exactly (:mod:`.replay_format`, which also reads a case back). The
single-window cases are :mod:`.replay_windows`', the decodes
:mod:`.replay_decodes`' and the batches :mod:`.replay_batches`', all drawn as
:mod:`.replay_draws` says.

The expected states come from the snapshot path, whose arithmetic
(:mod:`ssm_rollback_spec.replay.portable`: correctly rounded ``exp`` and ``log1p``, basic
operations, sums left to right) gives the same bits on every machine.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Final

from .. import SPEC_VERSION
from ..replay.layer import Pipeline
from .files import SCHEMA_FILE, render_corpus_files, schema_text
from .model_cases import MODEL_FILE, ModelRoundsCase, model_cases
from .replay_batches import (
    BATCH_SHAPE,
    LATER_BATCH_PLANS,
    PROMPT_BATCH_PLANS,
    WIDE_BATCH_PLANS,
    alone_cases,
    batch_cases,
    prefix_hit_cases,
)
from .replay_decodes import engine_rounds_cases, ggml_cases, rounds_cases
from .replay_draws import ENGINE_SHAPE, MODEL_PIPELINES
from .replay_format import (
    BATCH_ALONE_FILE,
    BATCH_FILE,
    POST_CONV_FILE,
    REBUILD_FILE,
    ROUNDS_FILE,
    ROW_BYTES_FILE,
    AloneCase,
    BatchCase,
    RebuildCase,
    RoundsCase,
    RowBytesCase,
    Tolerance,
)
from .replay_refusals import REFUSALS_FILE, RefusalCase, refusal_cases
from .replay_windows import engine_rebuild_cases, post_conv_cases, rebuild_cases, row_bytes_cases

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["ALONE_TOLERANCES", "TOLERANCES", "generate_replay_vectors"]

_SEED: Final = 20261130
_STATUS: Final = "normative: SPEC.md's replay profile"


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
#: ReplaySSM over other windowings 7.1e-4, so 2e-3, but check's drawn batches
#: against its own replay of each sequence reached 2.03e-3 once the draws took
#: pools of 4,096 slots (BENCHMARKS.md, "A batch against its sequences alone"),
#: so its self bound 4e-3; FLA's fused recurrent rule 2.5e-7, so 1e-6.
TOLERANCES: Final[Mapping[Pipeline, Tolerance]] = {
    Pipeline.FLOAT64: Tolerance(port=0, kernel=1e-12),
    Pipeline.TRANSFORMERS_BF16: Tolerance(port=0, kernel=1e-6),
    Pipeline.VLLM_BF16: Tolerance(port=0, kernel=4e-3, self=2e-2),
    Pipeline.SGLANG_BF16: Tolerance(port=0, kernel=2e-3, self=4e-3),
    Pipeline.FLA_BF16: Tolerance(port=0, kernel=1e-6),
    Pipeline.GGML_F32: Tolerance(port=0, kernel=1e-6),
}

#: The bounds of a batch against the same runtime's sequences alone (``batch_alone.json``,
#: RB-REPLAY-13), for a case's ``rerouted`` entries alone: every other entry bit for bit.
#: Those are where a runtime's own kernels may take another path for the same rows in a
#: batch than alone. vLLM does (measured in BENCHMARKS.md, "A batch against its sequences
#: alone"): a prompt of one token beside verifies runs its chunked prefill rule
#: (``gdn_attn.py``, 0.33.0 lines 422-430), alone its recurrent decode, one BF16 rounding
#: of h apart (6.1e-3 at most, propagated); its self bound, 2e-2.
ALONE_TOLERANCES: Final[Mapping[Pipeline, Tolerance]] = {
    pipeline: Tolerance(port=0, kernel=2e-2 if pipeline is Pipeline.VLLM_BF16 else 0)
    for pipeline in Pipeline
}

#: The engine pipelines' cases draw from their own stream, after the model's.
_ENGINE_SEED: Final = 20261201
_BATCH_SEED: Final = 20261202
#: ggml's cases draw from their own stream, so the other cases stay as they were.
_GGML_SEED: Final = 20261203
#: The engine pipelines whose adapters offer replay_batch (docs/engines-vllm.md and
#: docs/engines-sglang.md), each with the seed of its own stream, so that adding
#: one keeps the others' draws: their batches are the same plans, in the engine
#: cases' layer.
_ENGINE_BATCHES: Final = ((Pipeline.VLLM_BF16, 20261203), (Pipeline.SGLANG_BF16, 20261204))
#: The stream of the batch plans added since (``LATER_BATCH_PLANS``), every pipeline's.
_LATER_BATCH_SEED: Final = 20261205
#: The stream of the prompt plans (``PROMPT_BATCH_PLANS``) the model judges.
_PROMPT_BATCH_SEED: Final = 20261206
#: The stream of the batches judged against the runtime itself (``batch_alone.json``).
_ALONE_SEED: Final = 20261207
#: The stream of the batches at the protocol's size (``WIDE_BATCH_PLANS``), the model's
#: pipelines; and of the refusals' layers (``refusals.json``).
_WIDE_BATCH_SEED: Final = 20261208
#: The stream of the prefix-cache hits (``PREFIX_HIT_PLANS``), vLLM's pipeline's.
_PREFIX_HIT_SEED: Final = 20261211
_REFUSAL_SEED: Final = 20261209


def _document(
    description: str,
    cases: list[RebuildCase]
    | list[RowBytesCase]
    | list[RoundsCase]
    | list[BatchCase]
    | list[AloneCase]
    | list[RefusalCase]
    | list[ModelRoundsCase],
    /,
    *,
    states: bool = True,
    tolerances: Mapping[Pipeline, Tolerance] = TOLERANCES,
) -> dict[str, object]:
    document: dict[str, object] = {"description": description, "status": _STATUS}
    if states:
        document["tolerance"] = {
            pipeline.value: dict(tolerances[pipeline]) for pipeline in Pipeline
        }
    document["cases"] = cases
    return document


def generate_replay_vectors() -> dict[str, str]:
    """Every file of ``vectors/replay/``, by name, as its exact text.

    RB-REPLAY-1 to RB-REPLAY-14.
    """
    # Reproducible draws, not secrets: Random's stream is fixed for a seed.
    rng = random.Random(_SEED)  # noqa: S311
    engines = random.Random(_ENGINE_SEED)  # noqa: S311
    rebuilds = rebuild_cases(rng)
    rebuilds += engine_rebuild_cases(engines, len(rebuilds))
    post_conv = post_conv_cases(rng)
    rounds = rounds_cases(rng)
    rounds += engine_rounds_cases(engines, len(rounds))
    ggml_rebuilds, ggml_rounds = ggml_cases(random.Random(_GGML_SEED), len(rebuilds), len(rounds))  # noqa: S311
    rebuilds += ggml_rebuilds
    rounds += ggml_rounds
    batches = batch_cases(random.Random(_BATCH_SEED))  # noqa: S311
    # The engine pipelines' batches draw from their own streams, after the model's.
    for pipeline, seed in _ENGINE_BATCHES:
        batches += batch_cases(random.Random(seed), (pipeline,), ENGINE_SHAPE, len(batches))  # noqa: S311
    # Shapes added since, from a stream of their own, after every case above.
    later = random.Random(_LATER_BATCH_SEED)  # noqa: S311
    batches += batch_cases(
        later, MODEL_PIPELINES, BATCH_SHAPE, len(batches), plans=LATER_BATCH_PLANS
    )
    for pipeline, _ in _ENGINE_BATCHES:
        batches += batch_cases(
            later, (pipeline,), ENGINE_SHAPE, len(batches), plans=LATER_BATCH_PLANS
        )
    # Prompts beside verifies, judged by the model in its own pipelines; an engine's
    # prompt runs its chunked rule, judged against the engine itself (batch_alone.json).
    prompts = random.Random(_PROMPT_BATCH_SEED)  # noqa: S311
    batches += batch_cases(
        prompts, MODEL_PIPELINES, BATCH_SHAPE, len(batches), plans=PROMPT_BATCH_PLANS
    )
    # A pool at the protocol's size, after every batch case above, so those keep their bytes.
    wide = random.Random(_WIDE_BATCH_SEED)  # noqa: S311
    batches += batch_cases(wide, MODEL_PIPELINES, BATCH_SHAPE, len(batches), plans=WIDE_BATCH_PLANS)
    # A join the prefix cache serves, in vLLM's pipeline, after every batch case above.
    batches += prefix_hit_cases(random.Random(_PREFIX_HIT_SEED), len(batches))  # noqa: S311
    alone = random.Random(_ALONE_SEED)  # noqa: S311
    alones = alone_cases(alone, MODEL_PIPELINES, BATCH_SHAPE)
    for pipeline, _ in _ENGINE_BATCHES:
        alones += alone_cases(alone, (pipeline,), ENGINE_SHAPE, len(alones))
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
            row_bytes_cases(),
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
        BATCH_ALONE_FILE: _document(
            "Batches judged against the runtime itself: each case's `steps` run a batch "
            "(prompt chunks alone, with `prefill` rows and no window, beside verifies), each "
            "sequence's last entry finishing it, then each sequence again alone, as "
            "`NAME-alone`, one entry a step in its own slot. Each pair `[i, j]` of `alone` "
            "names two states of the reply, an entry in the batch and the same entry alone, "
            "which must be the same: bit for bit, but for the entries `rerouted` lists, "
            "those of a sequence from its one-token prompt chunk beside other rows on "
            "(alone a decode, which an engine's kernels may run on another path than in a "
            "batch), within `tolerance`'s kernel bound.",
            alones,
            tolerances=ALONE_TOLERANCES,
        ),
        REFUSALS_FILE: _document(
            "Refusals: for each rule that makes a `replay` or `replay_batch` request "
            "`bad-request` (docs/protocol.md), `-at`, the request nearest the rule that it "
            "allows, whose `expected` reply holds the model's states, and `-past`, one step "
            "past the rule, whose only allowed reply is `bad-request` (any message). A rule "
            "whose nearest allowed request is the base one has no `-at` of its own. Each "
            "`request` is sent as it is; `pipeline` and `layout` are what a describe must list "
            "for the case to be sent, and a case with `without_form` is sent only to an "
            "adapter whose describe does not list that batch form.",
            refusal_cases(random.Random(_REFUSAL_SEED)),  # noqa: S311
        ),
        MODEL_FILE: _document(
            "Round scripts of the model operation (RB-REPLAY-14), judged against the runtime "
            "itself: each `request` decodes windows on named sequences and rolls each back by "
            "some of its window, its way; decodes one more token on each sequence still live; "
            "finishes them; then decodes each sequence's kept tokens again as `plain-NAME`, one "
            "token a step, alone. Every rollback must be accepted. Each pair `[[step, entry, "
            "token], [step, entry, token]]` of `equal` names two rows of the reply's logits, "
            "a kept token and the same token decoded plainly, which must be the same within the "
            "bound the adapter's describe declares for its model (0 unless it says). `needs` is "
            "what a model must offer for the case to be sent: a vocabulary, sequences at once, "
            "and for a snapshot case a snapshot depth. No logit is shipped.",
            model_cases(),
            states=False,
        ),
    }
    header = {"spec_version": SPEC_VERSION, "status": _STATUS}
    texts = render_corpus_files(header, files)
    return {**texts, SCHEMA_FILE: schema_text("replay")}
