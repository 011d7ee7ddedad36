# SPDX-License-Identifier: MIT OR Apache-2.0
"""The float64 replay of a ``replay`` request, in the standard library: the model's step.

What the random replay properties judge a runtime's states by, so that wrong
arithmetic (a gate applied after the delta, the wrong head mapping, stale rows)
fails them and not only the shipped cases. It follows the replay model
(``ssm_rollback_spec.replay.layer``: ``conv_step``, ``delta_rule_update``) for
the ``float64`` pipeline, the one whose every value is a Python float:

- the conv state holds the last ``conv_kernel - 1`` pre-conv columns; a token
  appends its column, takes each channel's dot product with the weight, left
  to right, and its SiLU ``x / (1 + exp(-x))``;
- k is the post-conv channels ``key_dim`` to ``2 * key_dim``, one row of
  ``key_head_dim`` per key head, L2-normed as ``x / sqrt(sum(x * x) + 1e-6)``
  (the sum left to right, eps a float64); value head ``j`` reads key head
  ``j // (num_value_heads // num_key_heads)``, as ``repeat_interleave`` gives;
- per value head, ``S <- exp(g) S`` first, then ``u = beta (v - S^T k)`` and
  ``S <- S + k u^T``;
- each round replays its first ``accepted`` rows, from the state the round
  before it left.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["L2NORM_EPS", "SMALL_DIMS", "SMALL_REPLAY", "replay_float64"]

#: The L2 norm's eps, added to the sum of squares (a float64 here).
L2NORM_EPS: Final = 1e-6

_Matrix = list[list[float]]


#: The smallest layer: one key head and one value head, each of size 1, and a conv of 2.
SMALL_DIMS: Final = {
    "num_key_heads": 1,
    "key_head_dim": 1,
    "num_value_heads": 1,
    "value_head_dim": 1,
    "conv_kernel": 2,
}
#: A float64 replay of one token on :data:`SMALL_DIMS`, which every adapter that
#: offers the operation answers.
SMALL_REPLAY: Final[dict[str, Any]] = {
    "op": "replay",
    "pipeline": "float64",
    "layout": "pre-conv",
    "dims": SMALL_DIMS,
    "conv_weight": [["0x1p-1", "0x1p+0"]] * 3,
    "checkpoint": {"conv": [["0x0p+0"]] * 3, "h": [[["0x0p+0"]]]},
    "rounds": [
        {
            "rows": [{"qkv": ["0x1p-2", "0x1p-1", "0x1p+0"], "g": ["-0x1p-3"], "beta": ["0x1p-1"]}],
            "accepted": 1,
        }
    ],
}


def _floats(values: object, /) -> list[float]:
    assert isinstance(values, list)
    return [float.fromhex(str(value)) for value in values]


def _matrix(values: object, /) -> _Matrix:
    assert isinstance(values, list)
    return [_floats(row) for row in values]


def _ordered_sum(values: Sequence[float], /) -> float:
    total = values[0]
    for value in values[1:]:
        total += value
    return total


def _l2norm(values: Sequence[float], /) -> list[float]:
    norm = math.sqrt(_ordered_sum([value * value for value in values]) + L2NORM_EPS)
    return [value / norm for value in values]


def _number(dims: dict[str, object], name: str, /) -> int:
    value = dims[name]
    assert isinstance(value, int)
    return value


def replay_float64(request: dict[str, object], /) -> list[dict[str, object]]:
    """The state after each round of a float64 ``replay`` request, floats as ``float.hex``."""
    dims = request["dims"]
    assert isinstance(dims, dict)
    nk, dk = _number(dims, "num_key_heads"), _number(dims, "key_head_dim")
    nv, dv = _number(dims, "num_value_heads"), _number(dims, "value_head_dim")
    key_dim, per_key_head = nk * dk, nv // nk
    weight = _matrix(request["conv_weight"])
    checkpoint = request["checkpoint"]
    assert isinstance(checkpoint, dict)
    conv = _matrix(checkpoint["conv"])
    h = [_matrix(head) for head in checkpoint["h"]]
    rounds = request["rounds"]
    assert isinstance(rounds, list)
    states: list[dict[str, object]] = []
    for replay_round in rounds:
        rows, accepted = replay_round["rows"], replay_round["accepted"]
        for row in rows[:accepted]:
            qkv, g, beta = _floats(row["qkv"]), _floats(row["g"]), _floats(row["beta"])
            windows = [[*columns, value] for columns, value in zip(conv, qkv, strict=True)]
            mixed = [
                _ordered_sum([x * w for x, w in zip(window, taps, strict=True)])
                for window, taps in zip(windows, weight, strict=True)
            ]
            post = [x / (1 + math.exp(-x)) for x in mixed]
            conv = [window[1:] for window in windows]
            keys = [_l2norm(post[key_dim + i * dk : key_dim + (i + 1) * dk]) for i in range(nk)]
            values = post[2 * key_dim :]
            for j in range(nv):
                k, v = keys[j // per_key_head], values[j * dv : (j + 1) * dv]
                decay = math.exp(g[j])
                decayed = [[entry * decay for entry in line] for line in h[j]]
                remembered = [
                    _ordered_sum([decayed[a][b] * k[a] for a in range(dk)]) for b in range(dv)
                ]
                u = [(v[b] - remembered[b]) * beta[j] for b in range(dv)]
                h[j] = [[decayed[a][b] + k[a] * u[b] for b in range(dv)] for a in range(dk)]
        states.append(
            {
                "conv": [[value.hex() for value in line] for line in conv],
                "h": [[[value.hex() for value in line] for line in head] for head in h],
            }
        )
    return states
