# SPDX-License-Identifier: MIT OR Apache-2.0
"""How far a ReplaySSM decode drifts from plain decoding, by how its records store k and u.

Run from the repository root, with the ``replay`` extra (numpy)::

    python benchmarks/replay_drift.py [--rounds 128] [--seed 20261201]

It decodes one sequence in verify rounds (a draft count drawn per round, 0
to 3, so K ceiling 4; an accepted count drawn in 1..K; L = 16, so a fold
every few rounds) with ReplaySSM (``spec/replay/rounds.py``) five ways: k and
u stored in FP32, folded record by record; u in BF16 but the raw inputs kept
and replayed by the closed-loop exact fold (SGLang PR #28695); k and u as
BF16 high and low parts; in BF16; and in FP32 with the closed-form fold. Beside them it decodes
the same accepted tokens plainly, one token at a time. After each checkpoint
round it prints the largest relative error of S, ``max |S - S_plain| / max
|S_plain|``, and whether S is bit for bit plain decoding's, then the largest
error over every round, as a Markdown table. The pipeline is
``transformers-bf16`` (FP32 state, as a BF16 module), on one key head
and two value heads of Qwen3-Next's head size (128 x 128). The arithmetic
is the model's portable one, so the figures are the same on every machine;
they are not GPU figures (docs/replay-model.md, "What they do not prove").
"""

from __future__ import annotations

import argparse
import random
import sys
from math import prod
from typing import TYPE_CHECKING, Final

import numpy as np

from ssm_rollback_spec.replay.cases import make_case, make_layer
from ssm_rollback_spec.replay.designs.replayssm import Fold, ReplaySsm
from ssm_rollback_spec.replay.layer import Pipeline
from ssm_rollback_spec.replay.rounds import plain_decode
from ssm_rollback_spec.replay_rows import REPLAYSSM_RING_LENGTH, GdnShape, RecordStorage

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from ssm_rollback_spec.replay.layer import Array

_K_CEILING: Final = 4
_SHAPE: Final = GdnShape(
    num_key_heads=1, key_head_dim=128, num_value_heads=2, value_head_dim=128, conv_kernel=4
)
#: The ways the decode stores and folds its records, as the table names them.
_WAYS: Final = (
    ("FP32, recurrent fold", RecordStorage.FP32, Fold.RECURRENT),
    ("raw inputs, exact fold (u in BF16)", RecordStorage.BF16, Fold.RAW_INPUTS),
    ("BF16 hi + lo, recurrent fold", RecordStorage.BF16_HI_LO, Fold.RECURRENT),
    ("BF16, recurrent fold", RecordStorage.BF16, Fold.RECURRENT),
    ("FP32, closed-form fold", RecordStorage.FP32, Fold.CLOSED_FORM),
)


def _relative_error(h: Array, plain: Array, /) -> float:
    # Normwise, so an entry near zero does not blow the ratio up.
    return float(np.max(np.abs(h.astype(np.float64) - plain)) / np.max(np.abs(plain)))


def main(argv: list[str] | None = None) -> int:
    """Decode, then print the drift table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=128)
    parser.add_argument("--seed", type=int, default=20261201)
    arguments = parser.parse_args(argv)
    rng = random.Random(arguments.seed)  # noqa: S311 (reproducible numbers, not secrets)

    def numbers(shape: tuple[int, ...], low: float, high: float, /) -> NDArray[np.float64]:
        values = [rng.uniform(low, high) for _ in range(prod(shape))]
        return np.array(values, dtype=np.float64).reshape(shape)

    pipeline = Pipeline.TRANSFORMERS_BF16
    layer = make_layer(_SHAPE, numbers)
    start = make_case(layer, pipeline, 1, 1, numbers)
    decoders = [
        ReplaySsm(
            layer,
            pipeline,
            start.checkpoint,
            _K_CEILING,
            ring_length=REPLAYSSM_RING_LENGTH,
            storage=storage,
            fold=fold,
        )
        for _, storage, fold in _WAYS
    ]
    plain, tokens = start.checkpoint, 0
    worst = [0.0 for _ in _WAYS]
    marks = {r for r in (1, 8, 32, 128, arguments.rounds) if r <= arguments.rounds}
    table = [
        "| rounds | tokens | " + " | ".join(name for name, _, _ in _WAYS) + " |",
        "| ---: | ---: | " + " | ".join("---:" for _ in _WAYS) + " |",
    ]
    for number in range(1, arguments.rounds + 1):
        # The window: the previous round's bonus token and the drafts, drawn
        # fresh and rounded as the pipeline stores them.
        rows = make_case(layer, pipeline, rng.randrange(_K_CEILING) + 1, 1, numbers).rows
        accepted = rng.randint(1, len(rows))
        for decoder in decoders:
            decoder.verify_round(rows, accepted)
        plain = plain_decode(layer, plain, rows[:accepted])
        tokens += accepted
        errors = [_relative_error(d.state().h, plain.h.astype(np.float64)) for d in decoders]
        worst = [max(w, e) for w, e in zip(worst, errors, strict=True)]
        if number in marks:
            cells = []
            for decoder, error in zip(decoders, errors, strict=True):
                same = "bitwise" if np.array_equal(decoder.state().h, plain.h) else "differs"
                cells.append(f"{error:.1e} ({same})")
            table.append(f"| {number} | {tokens} | " + " | ".join(cells) + " |")
    table.append("| largest, any round | | " + " | ".join(f"{w:.1e}" for w in worst) + " |")
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
