# SPDX-License-Identifier: MIT OR Apache-2.0
"""Speculative against plain decoding, one request at a time, within a measured noise bound.

The rule judged is RB-REPLAY-14's, seen through a server: a request served
with speculative decoding generates what the same engine generates without
it. Greedy tokens are compared, and the top logprobs at each position whose
context the two runs share.

Where the engine's arithmetic is not bit-stable (a verify of K rows may round
otherwise than a decode of one), equality alone would fail correct engines,
so each comparison is judged within a bound measured on the engine itself
(:func:`noise`, :mod:`.run`):

- the logprobs of any token both runs list, at a position both reached with
  the same context, may differ by at most the bound; past it, the target has
  drifted (``FAIL``), whether or not a token has changed yet;
- at the first position where the tokens differ, the reference's margin
  between its token and the target's must be beyond the bound (``FAIL``);
  within it, the position is a near tie the noise could flip, and the
  request is inconclusive.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from .client import Generation

__all__ = ["Comparison", "Outcome", "compare", "noise"]

#: The token a run that ended first has at the position the other reached.
ENDED: Final = "(end)"


class Outcome(enum.Enum):
    """What one comparison says of one request, worst last."""

    PASSED = "passed"
    INCONCLUSIVE = "inconclusive"
    FAILED = "failed"


@dataclass(frozen=True)
class Comparison:
    """One request's reference and target runs compared within ``bound``."""

    outcome: Outcome
    #: The first position whose tokens differ, or None where they all agree.
    position: int | None
    reference_token: str
    target_token: str
    #: The reference's margin at ``position``: its token's logprob less the target's token's.
    #: ``margin_at_least`` says the target's token was not among the reference's top
    #: logprobs, so the margin is at least this.
    margin: float | None
    margin_at_least: bool
    #: The largest logprob difference on the shared context, and where.
    drift: float
    drift_position: int | None
    bound: float
    #: Positions compared (sharing their context).
    compared: int

    def sentence(self) -> str:
        """The comparison in one line, as the report prints it."""
        if self.outcome is Outcome.FAILED and self.drift > self.bound:
            return (
                f"logprobs drift past the bound at position {self.drift_position}: "
                f"|difference| {self.drift:.6g} > {self.bound:.6g}"
                + ("" if self.position is None else f"; {self._difference()}")
            )
        if self.position is None:
            return f"{self.compared} positions agree (largest logprob difference {self.drift:.3g})"
        return self._difference()

    def _difference(self) -> str:
        at_least = "at least " if self.margin_at_least else ""
        margin = "unknown" if self.margin is None else f"{at_least}{self.margin:.6g}"
        return (
            f"first differs at position {self.position}: reference {self.reference_token} "
            f"(margin {margin}), target {self.target_token}"
        )


def _context(reference: Generation, target: Generation, /) -> int:
    """The first position whose tokens differ, or the shorter length: 0 to it share context."""
    shorter = min(len(reference.tokens), len(target.tokens))
    return next(
        (i for i in range(shorter) if reference.tokens[i] != target.tokens[i]),
        shorter,
    )


def _largest_difference(
    first: Generation, second: Generation, last: int, /
) -> tuple[float, int | None]:
    largest, where = 0.0, None
    for position in range(min(last + 1, len(first.logprobs), len(second.logprobs))):
        a, b = first.logprobs[position], second.logprobs[position]
        for token in a.keys() & b.keys():
            difference = abs(a[token] - b[token])
            if difference > largest or where is None:
                largest, where = max(largest, difference), position
    return largest, where


def noise(first: Generation, second: Generation, /, *, positions: int | None = None) -> float:
    """The largest logprob difference between two runs on the context they share.

    With ``positions``, only the first that many positions are read.
    """
    last = _context(first, second)
    if positions is not None:
        last = min(last, positions - 1)
    return _largest_difference(first, second, last)[0]


def compare(reference: Generation, target: Generation, /, *, bound: float) -> Comparison:
    """``target`` judged against ``reference`` within ``bound``."""
    position = _context(reference, target)
    drift, drift_position = _largest_difference(reference, target, position)
    same_length = len(reference.tokens) == len(target.tokens)
    differs = position < max(len(reference.tokens), len(target.tokens)) and not (
        same_length and position == len(reference.tokens)
    )
    reference_token = reference.tokens[position] if position < len(reference.tokens) else ENDED
    target_token = target.tokens[position] if position < len(target.tokens) else ENDED
    margin: float | None = None
    at_least = False
    if differs and position < len(reference.logprobs) and reference_token != ENDED:
        listed = reference.logprobs[position]
        chosen = listed.get(reference_token)
        if chosen is not None and target_token in listed:
            margin = chosen - listed[target_token]
        elif chosen is not None:
            margin, at_least = chosen - min(listed.values()), True
    if drift > bound:
        outcome = Outcome.FAILED
    elif not differs:
        outcome = Outcome.PASSED
    elif margin is not None and margin > bound:
        outcome = Outcome.FAILED
    else:
        outcome = Outcome.INCONCLUSIVE
    return Comparison(
        outcome=outcome,
        position=position if differs else None,
        reference_token=reference_token,
        target_token=target_token,
        margin=margin,
        margin_at_least=at_least,
        drift=drift,
        drift_position=drift_position,
        bound=bound,
        compared=min(position + 1, len(reference.logprobs), len(target.logprobs)),
    )
