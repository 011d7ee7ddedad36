# SPDX-License-Identifier: MIT OR Apache-2.0
"""The replay judges' exact verdicts: batch against alone, refusals, and a reply cut for show.

Each result is compared whole (case, clauses, outcome, detail, distance and
bound), so a judge that drops a field, words its detail otherwise or moves a
bound by one is caught here, in process, where the mutation gate's judges set
reaches it (docs/mutation.md, "The judges").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import pytest

from ssm_rollback_spec.corpus.protocol_run import CaseResult
from ssm_rollback_spec.corpus.replay_run import ReplayCase, as_cases, judge_replay, spoken_cases
from ssm_rollback_spec.harness.protocol import encode
from ssm_rollback_spec.harness.replay_wire import ReplayState, encode_replay_states

if TYPE_CHECKING:
    from ssm_rollback_spec.corpus.protocol_cases import Case

_ONE: Final = {"conv": [["0x1.0000000000000p+0"]], "h": [[["0x1.0000000000000p+0"]]]}
_OTHER: Final = {"conv": [["0x1.0000000000000p+0"]], "h": [[["0x1.4000000000000p+0"]]]}
_CLAUSES: Final = ["RB-REPLAY-13"]


def _alone(*, tolerance: float = 0.0, bounded: frozenset[int] | None = None) -> ReplayCase:
    """Three entries, s and t in one step, then s's twin u alone: state 0 must be state 2's."""
    steps = [{"batch": [{"sequence": "s"}, {"sequence": "t"}]}, {"batch": [{"sequence": "u"}]}]
    return ReplayCase(
        case_id="replay-alone-x",
        clauses=_CLAUSES,
        pipeline="float64",
        request={"op": "replay_batch", "steps": steps},
        expected=[],
        tolerance=tolerance,
        alone=((0, 2),),
        bounded=bounded,
    )


def _refusal() -> ReplayCase:
    return ReplayCase(
        case_id="replay-refusal-x",
        clauses=["RB-REPLAY-1"],
        pipeline="float64",
        request={"op": "replay"},
        expected=[],
        tolerance=0.0,
        refused=True,
    )


def _padded(length: int, /) -> dict[str, object]:
    """A reply that breaks every judge's shape, its encoding exactly ``length`` characters."""
    reply: dict[str, object] = {"ok": {"pad": ""}}
    reply["ok"] = {"pad": "x" * (length - len(encode(reply)))}
    assert len(encode(reply)) == length
    return reply


def test_an_entry_the_same_alone_as_in_the_batch_passes_bit_for_bit() -> None:
    result = judge_replay(_alone(), {"ok": {"states": [_ONE, _OTHER, _ONE]}})
    assert result == CaseResult(
        "replay-alone-x",
        _CLAUSES,
        "passed",
        "each of 1 entries the same in the batch as alone, bit for bit",
        0.0,
        0.0,
    )


def test_a_rerouted_entry_passes_within_the_bound_and_says_how_far() -> None:
    case = _alone(tolerance=0.5, bounded=frozenset({0}))
    result = judge_replay(case, {"ok": {"states": [_OTHER, _ONE, _ONE]}})
    assert result == CaseResult(
        "replay-alone-x",
        _CLAUSES,
        "passed",
        "each of 1 entries the same in the batch as alone, within 0.5: 0.25 at most",
        0.25,
        0.5,
    )


def test_an_entry_not_rerouted_must_be_bit_for_bit_whatever_the_pipelines_bound() -> None:
    case = _alone(tolerance=0.5, bounded=frozenset())
    reply: dict[str, object] = {"ok": {"states": [_OTHER, _ONE, _ONE]}}
    result = judge_replay(case, reply)
    assert result == CaseResult(
        "replay-alone-x",
        _CLAUSES,
        "failed",
        "states[0], s in the batch, is not states[2], the same entry alone: "
        "states[0].h[0][0][0]: expected 0x1.0000000000000p+0, got 0x1.4000000000000p+0: "
        "relative error 0.25 (of max |expected| over states[0].h) exceeds 0, float64's "
        "bound where no one-token prompt chunk of the sequence ran beside other rows before "
        f"(RB-REPLAY-13)\nreplied {encode(reply)}",
    )


@pytest.mark.parametrize(
    ("states", "problem"),
    [
        ([_ONE, _ONE], 'the reply must be {"ok": {"states": [...]}} with 3 states'),
        (
            [_ONE, _ONE, {"conv": _ONE["conv"]}],
            "states[0] and states[2] must be objects with exactly conv and h",
        ),
        ([_ONE, _ONE, 7], "states[0] and states[2] must be objects with exactly conv and h"),
    ],
)
def test_an_alone_reply_of_the_wrong_shape_fails_with_no_distance(
    states: list[object], problem: str
) -> None:
    reply: dict[str, object] = {"ok": {"states": states}}
    result = judge_replay(_alone(), reply)
    assert result == CaseResult(
        "replay-alone-x", _CLAUSES, "failed", f"{problem}\nreplied {encode(reply)}"
    )


def test_a_refusal_passes_as_bad_request_with_any_message() -> None:
    reply: dict[str, object] = {"error": {"kind": "bad-request", "message": "anything"}}
    assert judge_replay(_refusal(), reply) == CaseResult(
        "replay-refusal-x", ["RB-REPLAY-1"], "passed", "refused as bad-request"
    )


def test_a_refusal_answered_otherwise_fails_naming_the_only_allowed_reply() -> None:
    reply: dict[str, object] = {"ok": {"states": []}}
    assert judge_replay(_refusal(), reply) == CaseResult(
        "replay-refusal-x",
        ["RB-REPLAY-1"],
        "failed",
        "the request breaks a rule of docs/protocol.md, so the only allowed reply is "
        '{"error":{"kind":"bad-request"}} (any message)\nreplied {"ok":{"states":[]}}',
    )


@pytest.mark.parametrize("case", [_alone(), _refusal()], ids=["alone", "refusal"])
@pytest.mark.parametrize("length", [299, 300])
def test_a_reply_of_up_to_300_characters_is_shown_whole(case: ReplayCase, length: int) -> None:
    reply = _padded(length)
    assert judge_replay(case, reply).detail.endswith(f"\nreplied {encode(reply)}")


@pytest.mark.parametrize("case", [_alone(), _refusal()], ids=["alone", "refusal"])
@pytest.mark.parametrize("length", [301, 302])
def test_a_longer_reply_is_cut_to_297_characters_and_an_ellipsis(
    case: ReplayCase, length: int
) -> None:
    reply = _padded(length)
    assert judge_replay(case, reply).detail.endswith(f"\nreplied {encode(reply)[:297]}...")


def test_as_cases_sends_each_request_expecting_the_models_states_or_a_refusal() -> None:
    rounds = ReplayCase(
        case_id="replay-rounds-x",
        clauses=["RB-REPLAY-1"],
        pipeline="float64",
        request={"op": "replay", "pipeline": "float64"},
        expected=[_ONE],
        tolerance=0.0,
    )
    corpus, judges = as_cases([rounds, _refusal()])
    assert corpus == [
        {
            "id": "replay-rounds-x",
            "clauses": ["RB-REPLAY-1"],
            "request": {"op": "replay", "pipeline": "float64"},
            "expected": [{"ok": {"states": [_ONE]}}],
        },
        {
            "id": "replay-refusal-x",
            "clauses": ["RB-REPLAY-1"],
            "request": {"op": "replay"},
            "expected": [{"error": {"kind": "bad-request"}}],
        },
    ]
    assert list(judges) == ["replay-rounds-x", "replay-refusal-x"]
    assert judges["replay-rounds-x"]({"ok": {"states": [_ONE]}}).outcome == "passed"
    assert judges["replay-refusal-x"]({"ok": {"states": [_ONE]}}).outcome == "failed"


def test_spoken_cases_replace_only_the_requests_sent_under_another_name() -> None:
    sent = ReplayCase(
        case_id="replay-rounds-x",
        clauses=["RB-REPLAY-1"],
        pipeline="transformers-bf16",
        request={"op": "replay", "pipeline": "bf16-rows-fp32-state"},
        expected=[],
        tolerance=0.0,
    )
    cases: list[Case] = [
        {"id": "replay-rounds-x", "clauses": [], "request": {"op": "replay"}, "expected": []},
        {"id": "other", "clauses": [], "request": {"op": "describe"}, "expected": []},
    ]
    wanted: list[Case] = [
        {"id": "replay-rounds-x", "clauses": [], "request": sent.request, "expected": []},
        {"id": "other", "clauses": [], "request": {"op": "describe"}, "expected": []},
    ]
    assert spoken_cases(cases, [sent]) == wanted


def test_replied_states_travel_as_float_hex_conv_then_h() -> None:
    state: ReplayState = {"conv": [[1.0, -0.5]], "h": [[[0.25], [3.0]]]}
    assert encode_replay_states([state, state]) == {
        "states": [
            {
                "conv": [["0x1.0000000000000p+0", "-0x1.0000000000000p-1"]],
                "h": [[["0x1.0000000000000p-2"], ["0x1.8000000000000p+1"]]],
            }
        ]
        * 2
    }
