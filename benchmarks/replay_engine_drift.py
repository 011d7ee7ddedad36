# SPDX-License-Identifier: MIT OR Apache-2.0
"""How far SGLang's GDN ReplaySSM (design (e)) keeps h from plain decoding, on the model.

Run from the repository root, with the ``replay`` extra (numpy)::

    python benchmarks/replay_engine_drift.py [--decodes 200] [--seed 20261201]

Two tables. The first decodes one sequence per row in verify rounds (a draft
count drawn per round, 0 to 3, so K = 4; an accepted count drawn in 1..K)
with :class:`~ssm_rollback_spec.replay.designs.sglang.SglangGdnReplaySsm` in the
``sglang-bf16`` pipeline, beside plain decoding of the same accepted
tokens, and prints the largest relative error of h, ``max |h - h_plain| /
max |h_plain|``, over every round, and the folds: L = 16 (SGLang's default:
history builds between folds) and L = 8 (= 2 K: a fold after every commit,
so the verify reads no history), one key head and two value heads of three
head sizes. The second draws ``--decodes`` decodes as the stateful property
of ``tests/replay/test_sglang_replayssm.py`` draws them (1 or 2 key heads,
heads of 2 or 3 by 2, kernels 2 to 4, K ceilings 2 to 4, L the least power
of two of at least 4 K, 16 rounds) and prints the largest error any reached:
the measurement behind that property's bound. The arithmetic is the
model's portable one, so the figures are the same on every machine; they
are not GPU figures (docs/replay-model.md, docs/engines.md).
"""

from __future__ import annotations

import argparse
import random
import sys
from math import prod
from typing import TYPE_CHECKING, Final

import numpy as np

from ssm_rollback_spec.replay.cases import make_case, make_layer
from ssm_rollback_spec.replay.designs.sglang import SglangGdnReplaySsm, sglang_ring_length
from ssm_rollback_spec.replay.layer import Pipeline
from ssm_rollback_spec.replay.rounds import plain_decode
from ssm_rollback_spec.replay_rows import GdnShape

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from ssm_rollback_spec.replay.cases import Draw
    from ssm_rollback_spec.replay.layer import Array

_PIPELINE: Final = Pipeline.SGLANG_BF16
#: (head size, rounds, L) of the long decodes, K = 4.
_LONG: Final = ((2, 512, 16), (2, 512, 8), (32, 128, 16), (128, 64, 16), (128, 64, 8))
_STEPS: Final = 16


def _numbers(rng: random.Random, /) -> Draw:
    def drawn(shape: tuple[int, ...], low: float, high: float, /) -> NDArray[np.float64]:
        values = [rng.uniform(low, high) for _ in range(prod(shape))]
        return np.array(values, dtype=np.float64).reshape(shape)

    return drawn


def _relative_error(h: Array, plain: Array, /) -> float:
    return float(np.max(np.abs(h - plain)) / np.max(np.abs(plain)))


def _decode(
    rng: random.Random, shape: GdnShape, k_ceiling: int, length: int, rounds: int, /
) -> tuple[float, int]:
    """The largest relative error of h over a decode, and its folds."""
    draw = _numbers(rng)
    start = make_case(make_layer(shape, draw), _PIPELINE, 1, 1, draw)
    decoder = SglangGdnReplaySsm(
        start.layer, _PIPELINE, start.checkpoint, k_ceiling, ring_length=length
    )
    plain, worst, folds = start.checkpoint, 0.0, 0
    for _ in range(rounds):
        window = rng.randint(1, k_ceiling)
        accepted = rng.randint(1, window)
        rows = make_case(start.layer, _PIPELINE, window, 1, draw).rows
        decoder.verify_round(rows, accepted)
        folds += decoder.slot.cursor == 0
        plain = plain_decode(start.layer, plain, rows[:accepted])
        state = decoder.state()
        if not np.array_equal(state.conv, plain.conv):
            raise AssertionError("the conv state is not plain decoding's")
        worst = max(worst, _relative_error(state.h, plain.h))
    return worst, folds


def main(argv: list[str] | None = None) -> int:
    """Print both tables as Markdown."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decodes", type=int, default=200)
    parser.add_argument("--seed", type=int, default=20261201)
    arguments = parser.parse_args(argv)
    rng = random.Random(arguments.seed)  # noqa: S311 (reproducible draws, not secrets)
    print("| head size | rounds | L | folds | largest relative error of h |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for size, rounds, length in _LONG:
        shape = GdnShape(
            num_key_heads=1,
            key_head_dim=size,
            num_value_heads=2,
            value_head_dim=size,
            conv_kernel=4,
        )
        worst, folds = _decode(rng, shape, 4, length, rounds)
        print(f"| {size} | {rounds} | {length} | {folds} | {worst:.1e} |")
    worst_any, folds_total = 0.0, 0
    for _ in range(arguments.decodes):
        key_heads = rng.randint(1, 2)
        shape = GdnShape(
            num_key_heads=key_heads,
            key_head_dim=rng.randint(2, 3),
            num_value_heads=key_heads * rng.randint(1, 2),
            value_head_dim=2,
            conv_kernel=rng.randint(2, 4),
        )
        k_ceiling = rng.randint(2, 4)
        length = sglang_ring_length(k_ceiling, 4 * k_ceiling)
        worst, folds = _decode(rng, shape, k_ceiling, length, _STEPS)
        worst_any, folds_total = max(worst_any, worst), folds_total + folds
    print()
    print("| decodes as the property draws them | rounds each | folds in all | largest error |")
    print("| ---: | ---: | ---: | ---: |")
    print(f"| {arguments.decodes} | {_STEPS} | {folds_total} | {worst_any:.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
