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
#: last full run (docs/mutation.md, "The judges"; 2026-12-07, 629 of 3,664):
#: a debt, not a verdict, which the gate lets only go down.
JUDGE_UNKILLED: Final[dict[str, int]] = {
    "ssm_rollback_spec.corpus.model_run.x__check": 7,
    "ssm_rollback_spec.corpus.model_run.x__model_case": 18,
    "ssm_rollback_spec.corpus.model_run.x__needs": 14,
    "ssm_rollback_spec.corpus.model_run.x__pair_problem": 4,
    "ssm_rollback_spec.corpus.model_run.x__row": 4,
    "ssm_rollback_spec.corpus.model_run.x__sequence": 3,
    "ssm_rollback_spec.corpus.model_run.x__short_of": 4,
    "ssm_rollback_spec.corpus.model_run.x__shown": 4,
    "ssm_rollback_spec.corpus.model_run.x_judge_model": 21,
    "ssm_rollback_spec.corpus.model_run.x_load_model_cases": 6,
    "ssm_rollback_spec.corpus.model_run.x_model_as_cases": 8,
    "ssm_rollback_spec.corpus.model_run.x_model_judges": 10,
    "ssm_rollback_spec.corpus.replay_offer.x__not_in_version": 34,
    "ssm_rollback_spec.corpus.replay_offer.x__stated": 11,
    "ssm_rollback_spec.corpus.replay_offer.x_not_offered": 12,
    "ssm_rollback_spec.corpus.replay_offer.x_replay_offer": 35,
    "ssm_rollback_spec.corpus.replay_offer.x_split_offered": 4,
    "ssm_rollback_spec.corpus.replay_offer.x_spoken": 1,
    "ssm_rollback_spec.corpus.replay_run.x__batch_entry": 14,
    "ssm_rollback_spec.corpus.replay_run.x__batch_request": 7,
    "ssm_rollback_spec.corpus.replay_run.x__batch_steps": 3,
    "ssm_rollback_spec.corpus.replay_run.x__check_request": 14,
    "ssm_rollback_spec.corpus.replay_run.x__entries": 3,
    "ssm_rollback_spec.corpus.replay_run.x__field_problem": 14,
    "ssm_rollback_spec.corpus.replay_run.x__judge_alone": 1,
    "ssm_rollback_spec.corpus.replay_run.x__refusal": 36,
    "ssm_rollback_spec.corpus.replay_run.x__replay_case": 105,
    "ssm_rollback_spec.corpus.replay_run.x__request": 5,
    "ssm_rollback_spec.corpus.replay_run.x__states_problem": 4,
    "ssm_rollback_spec.corpus.replay_run.x_judge_replay": 32,
    "ssm_rollback_spec.corpus.replay_run.x_load_replay_cases": 6,
    "ssm_rollback_spec.harness.model_wire.x__count": 1,
    "ssm_rollback_spec.harness.model_wire.x__decode_step": 2,
    "ssm_rollback_spec.harness.model_wire.x__live": 1,
    "ssm_rollback_spec.harness.model_wire.x__logits": 1,
    "ssm_rollback_spec.harness.model_wire.x__result": 8,
    "ssm_rollback_spec.harness.model_wire.x__ways": 1,
    "ssm_rollback_spec.harness.model_wire.x_decode_model_offer": 2,
    "ssm_rollback_spec.harness.model_wire.x_decode_model_results": 4,
    "ssm_rollback_spec.harness.replay_batch_wire.x__batch_entry": 7,
    "ssm_rollback_spec.harness.replay_batch_wire.x_batch_forms": 10,
    "ssm_rollback_spec.harness.replay_batch_wire.x_decode_replay_batch": 18,
    "ssm_rollback_spec.harness.replay_fields.x__floats": 2,
    "ssm_rollback_spec.harness.replay_fields.x__matrix": 3,
    "ssm_rollback_spec.harness.replay_fields.x_decode_dims": 5,
    "ssm_rollback_spec.harness.replay_fields.x_decode_gate_parameters": 12,
    "ssm_rollback_spec.harness.replay_fields.x_decode_round": 8,
    "ssm_rollback_spec.harness.replay_fields.x_decode_rows": 11,
    "ssm_rollback_spec.harness.replay_fields.x_decode_state": 10,
    "ssm_rollback_spec.harness.replay_fields.x_decode_weight": 3,
    "ssm_rollback_spec.harness.replay_fields.x_finite_hex": 1,
    "ssm_rollback_spec.harness.replay_wire.x_decode_replay": 25,
    "ssm_rollback_spec.serving.verdict.x__calibration_may_help": 7,
    "ssm_rollback_spec.serving.verdict.x__counted": 4,
    "ssm_rollback_spec.serving.verdict.x_curl_line": 2,
    "ssm_rollback_spec.serving.verdict.x_lines": 14,
    "ssm_rollback_spec.serving.verdict.x_report_document": 23,
}
