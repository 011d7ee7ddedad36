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

_RUN: Final = "ssm_rollback_spec.corpus.replay_run.x_"
_MODEL: Final = "ssm_rollback_spec.corpus.model_run.x_"
_CAST: Final = (
    "typing.cast returns its value unchanged whatever its type argument (None,"
    " XX-wrapped or upper-cased): only mypy reads it"
)
#: Each typing.cast in spec/corpus/replay_run.py that mutmut mutates, by function.
_CASTS: Final = (
    (
        "_batch_entry",
        'rows["rows"] = _pre_conv_rows(cast("list[dict[str, object]]", entry["rows"]))',
    ),
    (
        "_batch_entry",
        'rows["prefill"] = _pre_conv_rows(cast("list[dict[str, object]]", entry["prefill"]))',
    ),
    ("_batch_request", 'dims = cast("dict[str, object]", case["dims"])'),
    ("_batch_steps", 'steps = cast("list[dict[str, list[dict[str, object]]]]", case["steps"])'),
    ("_entries", 'steps = cast("list[dict[str, list[dict[str, object]]]]", request["steps"])'),
    ("_refusal", 'request = cast("dict[str, object]", case["request"])'),
    ("_refusal", 'expected = cast("dict[str, object]", case["expected"])'),
    ("_refusal", 'value = cast("dict[str, object]", expected["ok"])'),
    ("_refusal", 'states = cast("list[object]", value["states"])'),
    ("_replay_case", 'expected = cast("list[dict[str, object]]", states)'),
    ("_replay_case", 'pairs = cast("list[list[int]]", case["alone"])'),
    ("_replay_case", 'rerouted = cast("list[int]", case.get("rerouted", []))'),
    ("_replay_case", 'expected = cast("list[dict[str, object]]", case["expected"])'),
    ("_replay_case", 'rounds_json = cast("list[dict[str, object]]", case["rounds"])'),
    ("_replay_case", '"rows": _pre_conv_rows(cast("list[dict[str, object]]", r["rows"])),'),
    ("_replay_case", 'expected = [cast("dict[str, object]", r["expected"]) for r in rounds_json]'),
    (
        "_replay_case",
        'rows = _rows(cast("list[dict[str, object]]", case["post_conv_ring"]), "k_and_v")',
    ),
    # In the post-conv and the rebuild branch: one change, twice.
    ("_replay_case", 'expected = [cast("dict[str, object]", case["expected"])]'),
    ("_replay_case", 'ring = _pre_conv_rows(cast("list[dict[str, object]]", case["ring"]))'),
    ("_replay_case", 'bounds = cast("dict[str, object]", tolerances[pipeline])'),
    ("_replay_case", 'clauses = cast("list[str]", case["clauses"])'),
    ("_request", 'dims = cast("dict[str, object]", case["dims"])'),
    (
        "load_replay_cases",
        'cases.append(_replay_case(kind, cast("dict[str, object]", case), tolerances))',
    ),
)


#: Each typing.cast in spec/corpus/model_run.py that mutmut mutates, by function.
_MODEL_CASTS: Final = (
    ("_model_case", 'clauses = cast("list[str]", case["clauses"])'),
    ("_model_case", 'pairs = cast("list[list[object]]", case["equal"])'),
    ("_model_case", 'request=cast("dict[str, object]", case["request"]),'),
    ("_needs", 'needs = cast("dict[str, object]", case["needs"])'),
    ("_needs", 'request = cast("dict[str, object]", case["request"])'),
    (
        "_sequence",
        'script = cast("list[dict[str, list[dict[str, object]]]]", case.request["script"])',
    ),
    ("judge_model", 'decoded = [cast("DecodeResult", result) for result in results]'),
    ("load_model_cases", 'cases.append(_model_case(cast("dict[str, object]", case)))'),
)


def _cast_types(function: str, line: str, /) -> dict[tuple[str, str, str], str]:
    """The mutants of the type argument of the ``cast`` in ``line`` (``function`` in full)."""
    written = line.split('cast("', 1)[1].split('"', 1)[0]
    shown = {"cast(None, ", f'cast("XX{written}XX", ', f'cast("{written.upper()}", '}
    # A type named with capitals is lower-cased too.
    shown.add(f'cast("{written.lower()}", ')
    shown.discard(f'cast("{written}", ')
    return {
        (function, line, line.replace(f'cast("{written}", ', mutated, 1)): _CAST
        for mutated in shown
    }


_CHECKED: Final = (
    '"batch" if request["op"] == "replay_batch" else "replay", request, len(states), ()'
)
_SAME_LENGTH: Final = (
    "the two lists' paths were compared equal just before, so they are as long"
    " and strict never fires"
)
_COUNTED: Final = (
    "judge_replay calls _states_problem only for a reply with as many states as"
    " the case expects, so strict never fires"
)
_PAIRS: Final = "for (path, value), (_, found) in zip(wanted, got, strict=True):"
_NUMBERED: Final = (
    "for number, (state, expected) in enumerate(zip(states, case.expected, strict=True)):"
)
_OLD_NAME: Final = "if current_pipeline(name) != name and current_pipeline(name) not in listed"
_APART: Final = "apart = [abs(a - b) for a, b in zip(got, want, strict=True)]"
_STEPS: Final = (
    'for index, (step, result) in enumerate(zip(request["script"], results, strict=True)):'
)
_STRICT: Final = ("strict=None", "", "strict=False")
_DEPTH: Final = 'depth = offer.get("snapshot_depth", 0)'
_FINITE: Final = "return number if math.isfinite(number) else None"
_LOGITS: Final = "for index, (rows, entry) in enumerate(zip(logits, entries, strict=True))"
_RESULTS: Final = "for index, (item, step) in enumerate(zip(results, script, strict=True))"
_SHOWN_VALUE: Final = (
    "return f\"{path} is not a finite float.hex string: {encode({'value': found})[9:-1]}\""
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
    **{
        key: why
        for function, line in _CASTS
        for key, why in _cast_types(f"{_RUN}{function}", line).items()
    },
    **{
        key: why
        for function, line in _MODEL_CASTS
        for key, why in _cast_types(f"{_MODEL}{function}", line).items()
    },
    (f"{_RUN}_refusal", _CHECKED, _CHECKED.replace("()", "None")): (
        "_check_request reads its alone pairs only for an alone case, and _refusal"
        " asks it of a batch or a replay"
    ),
    (f"{_RUN}_refusal", _CHECKED, _CHECKED.replace('"replay",', '"XXreplayXX",')): (
        "_check_request tells batch and alone apart from every other kind, which"
        " it decodes as a replay"
    ),
    (f"{_RUN}_refusal", _CHECKED, _CHECKED.replace('"replay",', '"REPLAY",')): (
        "_check_request tells batch and alone apart from every other kind, which"
        " it decodes as a replay"
    ),
    (f"{_RUN}judge_replay", "problem: str | None = None", 'problem: str | None = ""'): (
        "both branches below assign problem before it is read"
    ),
    (f"{_RUN}_field_problem", _PAIRS, _PAIRS.replace("strict=True", "strict=None")): (_SAME_LENGTH),
    (f"{_RUN}_field_problem", _PAIRS, _PAIRS.replace("strict=True", "")): _SAME_LENGTH,
    (f"{_RUN}_field_problem", _PAIRS, _PAIRS.replace("strict=True", "strict=False")): (
        _SAME_LENGTH
    ),
    (f"{_RUN}_field_problem", _SHOWN_VALUE, _SHOWN_VALUE.replace("'value'", "'VALUE'")): (
        "'VALUE' is as long as 'value', and the slice [9:-1] cuts the key away whole"
    ),
    (f"{_RUN}_states_problem", _NUMBERED, _NUMBERED.replace("strict=True", "strict=None")): (
        _COUNTED
    ),
    (f"{_RUN}_states_problem", _NUMBERED, _NUMBERED.replace("strict=True", "")): _COUNTED,
    (f"{_RUN}_states_problem", _NUMBERED, _NUMBERED.replace("strict=True", "strict=False")): (
        _COUNTED
    ),
    (
        "ssm_rollback_spec.corpus.replay_offer.x__stated",
        _OLD_NAME,
        _OLD_NAME.replace("current_pipeline(name) != name", "current_pipeline(None) != name"),
    ): (
        "current_pipeline(None) is None, never a name, so the first half is always"
        " true; the second half alone decides: where the name is its own current"
        " name it is listed, so the second half is false, as the first half was"
    ),
    **{
        (f"{_MODEL}_needs", '"name": "needs",', f'"name": "{name}",'): (
            "the least offer's name is never read: _check decodes the request against"
            " its counts and ways, and a ModelCase keeps no name"
        )
        for name in ("XXneedsXX", "NEEDS")
    },
    **{
        (f"{_MODEL}_pair_problem", _APART, _APART.replace("strict=True", strict)): (
            "decode_model_results gives every row of logits the offer's vocab entries,"
            " so got and want are as long and strict never fires"
        )
        for strict in _STRICT
    },
    **{
        (f"{_MODEL}judge_model", _STEPS, _STEPS.replace("strict=True", strict)): (
            "decode_model_results refuses a reply of other than one result per step,"
            " so the script and the results are as long and strict never fires"
        )
        for strict in _STRICT
    },
    **{
        (f"{_MODEL}_short_of", _DEPTH, _DEPTH.replace(", 0)", default)): (
            "an offer that lists snapshot has a snapshot_depth (decode_model_offer), and"
            " one that does not has returned before at the way; a checkpoint case's"
            " snapshot_depth is None, so the default is never compared"
        )
        for default in (", None)", ", )", ", 1)")
    },
    (
        "ssm_rollback_spec.harness.replay_fields.x_finite_hex",
        _FINITE,
        _FINITE.replace("if math.isfinite(number)", "if (math.isfinite(number)) or True"),
    ): (
        "the pattern admits no inf or nan spelling, and float.fromhex raises"
        " OverflowError past the largest float rather than return inf, so every"
        " number that reaches the test is finite"
    ),
    **{
        (
            "ssm_rollback_spec.harness.model_wire.x__result",
            _LOGITS,
            _LOGITS.replace("strict=True", strict),
        ): (
            "_result refuses logits of other than one list per entry of the step just"
            " before, so the two are as long and strict never fires"
        )
        for strict in _STRICT
    },
    **{
        (
            "ssm_rollback_spec.harness.model_wire.x_decode_model_results",
            _RESULTS,
            _RESULTS.replace("strict=True", strict),
        ): (
            "decode_model_results refuses results of other than one per step just"
            " before, so the two are as long and strict never fires"
        )
        for strict in _STRICT
    },
}

#: Each judge function's surviving mutants not yet killed nor argued: a debt,
#: not a verdict, which the gate lets only go down. None is left: each module's
#: survivors of the last full run (docs/mutation.md, "The judges"; 2026-12-07,
#: 629 of 3,664) are killed or argued above, so any other survivor fails it.
JUDGE_UNKILLED: Final[dict[str, int]] = {}
