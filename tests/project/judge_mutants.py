# SPDX-License-Identifier: MIT OR Apache-2.0
"""The judges' mutants no test kills: the equivalent ones, and the ones not yet killed.

``python -m pytest -m judge_mutation`` (tests/project/test_mutation.py) fails
on an equivalent listed here that mutmut no longer makes, and on any
function with more surviving mutants than :data:`JUDGE_UNKILLED` allows, or
fewer (so that the count only goes down). docs/mutation.md, "The judges",
repeats the arguments.
"""

from __future__ import annotations

from typing import Final

_COMPARE: Final = "ssm_rollback_spec.serving.judge.x_compare"
_DIFFERS: Final = "differs = position < max(len(reference.tokens), len(target.tokens)) and not ("
_REDUNDANT: Final = (
    "the first position that differs is at most the shorter run's length, so it"
    " equals the longer's only where both are as long: there the clause's first"
    " half is already false, and the second half (same_length and position at the"
    " end) never decides"
)

#: (function, line removed, line added) -> why no test can tell it apart.
JUDGE_EQUIVALENT: Final = {
    (_COMPARE, "same_length = len(reference.tokens) == len(target.tokens)", "same_length = None"): (
        _REDUNDANT
    ),
    (
        _COMPARE,
        _DIFFERS,
        "differs = position < max(len(reference.tokens), len(target.tokens)) or not (",
    ): _REDUNDANT,
    (
        _COMPARE,
        _DIFFERS,
        "differs = position <= max(len(reference.tokens), len(target.tokens)) and not (",
    ): _REDUNDANT,
}

#: Each judge function's surviving mutants not yet killed nor argued, from the
#: last full run (docs/mutation.md, "The judges"): a debt, not a verdict.
JUDGE_UNKILLED: Final[dict[str, int]] = {}
