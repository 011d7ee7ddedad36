# SPDX-License-Identifier: MIT OR Apache-2.0
"""The replay judges' exact verdicts: batch against alone, refusals, and a reply cut for show.

Each result is compared whole (case, clauses, outcome, detail, distance and
bound), so a judge that drops a field, words its detail otherwise or moves a
bound by one is caught here, in process, where the mutation gate's judges set
reaches it (docs/mutation.md, "The judges").
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Final

import pytest

from ssm_rollback_spec.corpus.files import VectorError
from ssm_rollback_spec.corpus.protocol_run import CaseResult
from ssm_rollback_spec.corpus.replay_run import (
    BATCH_NOT_OFFERED,
    NOT_OFFERED,
    ReplayCase,
    as_cases,
    judge_replay,
    load_replay_cases,
    spoken_cases,
)
from ssm_rollback_spec.harness.protocol import encode
from ssm_rollback_spec.harness.replay_wire import ReplayState, encode_replay_states

if TYPE_CHECKING:
    from pathlib import Path

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


# The loader, on a corpus of one small file written afresh: the shipped corpus
# is read once a process (tests/replay/shipped.py), before a mutant is switched on.
_DIMS: Final = {
    "num_key_heads": 1,
    "key_head_dim": 1,
    "num_value_heads": 1,
    "value_head_dim": 1,
    "conv_kernel": 2,
}
_WEIGHT: Final = [["0x1.0p-3", "0x1.8p-2"], ["0x1.4p-1", "0x0.0p+0"], ["0x1.0p-2", "-0x1.0p+0"]]
_START: Final = {"conv": [["0x0.0p+0"], ["0x1.0p-1"], ["0x1.4p-1"]], "h": [[["0x0.0p+0"]]]}
_ROW: Final = {
    "qkv": ["-0x1.0p-3", "-0x1.0p-1", "-0x1.0p-1"],
    "g": ["-0x1.4p-1"],
    "beta": ["0x1.0p-1"],
}
#: A case's row may carry more than a request sends.
_NOTED: Final = {**_ROW, "note": "not sent"}
_BOUNDS: Final = {"float64": {"port": 0, "kernel": 1e-12}}


def _load(
    directory: Path,
    name: str,
    cases: list[object],
    bounds: object = _BOUNDS,
    /,
    *,
    before: tuple[str, ...] = (),
) -> list[ReplayCase]:
    """The cases of a corpus of ``name`` alone, after the files ``before`` (with no cases)."""
    entries = []
    for path, held in [*((other, []) for other in before), (name, cases)]:
        text = json.dumps({"tolerance": bounds, "cases": held})
        (directory / path).write_text(text, encoding="utf-8")
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        entries.append({"path": path, "cases": len(held), "sha256": digest})
    (directory / "manifest.json").write_text(json.dumps({"files": entries}), encoding="utf-8")
    return load_replay_cases(directory)


def _refused(directory: Path, name: str, cases: list[object], bounds: object = _BOUNDS) -> str:
    with pytest.raises(VectorError) as raised:
        _load(directory, name, cases, bounds)
    return str(raised.value)


def _rebuild(**changed: object) -> dict[str, object]:
    case: dict[str, object] = {
        "id": "r",
        "clauses": ["RB-REPLAY-1"],
        "pipeline": "float64",
        "dims": {**_DIMS, "window": 2},
        "conv_weight": _WEIGHT,
        "checkpoint": _START,
        "ring": [_NOTED],
        "accepted": 1,
        "expected": _OTHER,
    }
    return case | changed


def _entry(sequence: str, **more: object) -> dict[str, object]:
    return {"sequence": sequence, "slot": 0, "rows": [_NOTED], "accepted": 1} | more


def _sent(entry: dict[str, object], /) -> dict[str, object]:
    # What the request carries of a case's entry: its rows without what a case notes.
    rows = {name: [_ROW] for name in ("rows", "prefill") if name in entry}
    return entry | rows


def _batch(*steps: list[dict[str, object]], **changed: object) -> dict[str, object]:
    case: dict[str, object] = {
        "id": "b",
        "clauses": ["RB-REPLAY-12"],
        "pipeline": "float64",
        "dims": {**_DIMS, "window": 2},
        "conv_weight": _WEIGHT,
        "slots": 1,
        "steps": [{"batch": step} for step in steps],
    }
    return case | changed


def _batch_request(*steps: list[dict[str, object]]) -> dict[str, object]:
    return {
        "op": "replay_batch",
        "pipeline": "float64",
        "dims": _DIMS,
        "conv_weight": _WEIGHT,
        "slots": 1,
        "steps": [{"batch": [_sent(entry) for entry in step]} for step in steps],
    }


_ONE_STEP: Final = [_entry("a", checkpoint=_START, prefill=[_NOTED])]
_TWO_STEPS: Final = (
    [_entry("a", checkpoint=_START, finish=True)],
    [_entry("b", checkpoint=_START)],
)


def test_a_rebuild_case_becomes_one_replay_of_its_ring_with_every_field_its_own(
    tmp_path: Path,
) -> None:
    bounds = {"float64": {"port": 0, "kernel": 1e-12, "self": 0.5}}
    [loaded] = _load(tmp_path, "rebuild.json", [_rebuild()], bounds)
    assert loaded == ReplayCase(
        case_id="replay-rebuild-r",
        clauses=["RB-REPLAY-1"],
        pipeline="float64",
        request={
            "op": "replay",
            "pipeline": "float64",
            "layout": "pre-conv",
            "dims": _DIMS,
            "conv_weight": _WEIGHT,
            "checkpoint": _START,
            "rounds": [{"rows": [_ROW], "accepted": 1}],
        },
        expected=[_OTHER],
        tolerance=1e-12,
        layout="pre-conv",
        design=None,
        self_tolerance=0.5,
        alone=(),
        bounded=None,
        refused=None,
        without_form=None,
    )


def test_a_rounds_case_sends_each_round_and_expects_each_rounds_state(tmp_path: Path) -> None:
    rounds = [
        {"rows": [_NOTED], "accepted": 1, "reuse_slot_after": False, "expected": _ONE},
        {"rows": [_NOTED, _NOTED], "accepted": 2, "expected": _OTHER},
    ]
    case = _rebuild(id="d", design="sglang", initial=_START, rounds=rounds)
    del case["checkpoint"], case["ring"], case["accepted"], case["expected"]
    [loaded] = _load(tmp_path, "rounds.json", [case])
    assert loaded.case_id == "replay-rounds-d"
    assert loaded.design == "sglang"
    assert loaded.request["checkpoint"] == _START
    assert loaded.request["rounds"] == [
        {"rows": [_ROW], "accepted": 1},
        {"rows": [_ROW, _ROW], "accepted": 2},
    ]
    assert loaded.expected == [_ONE, _OTHER]


def test_a_post_conv_case_is_sent_and_judged_as_post_conv(tmp_path: Path) -> None:
    window = [["0x1.0p-1"], ["0x1.0p-2"], ["0x1.0p-3"]]
    ring = [{"k_and_v": ["0x1.0p-1", "0x1.0p-2"], "g": ["-0x1.0p-1"], "beta": ["0x1.0p-1"]}]
    case = _rebuild(id="p", post_conv_ring=ring, conv_window=window)
    del case["ring"]
    [loaded] = _load(tmp_path, "post_conv.json", [case])
    assert loaded.case_id == "replay-post-conv-p"
    assert loaded.layout == "post-conv"
    assert loaded.request["layout"] == "post-conv"
    assert loaded.request["rounds"] == [{"rows": ring, "accepted": 1, "conv_window": window}]
    assert loaded.expected == [_OTHER]


def test_a_batch_case_sends_its_steps_with_their_rows_and_prefills(tmp_path: Path) -> None:
    [loaded] = _load(tmp_path, "batch.json", [_batch(_ONE_STEP, expected=[_ONE])])
    assert loaded == ReplayCase(
        case_id="replay-batch-b",
        clauses=["RB-REPLAY-12"],
        pipeline="float64",
        request=_batch_request(_ONE_STEP),
        expected=[_ONE],
        tolerance=1e-12,
        layout="pre-conv",
        self_tolerance=1e-12,
    )


def test_a_batch_case_must_expect_one_state_for_each_entry(tmp_path: Path) -> None:
    case = _batch(*_TWO_STEPS, expected=[_ONE])
    assert _refused(tmp_path, "batch.json", [case]) == (
        "batch.json: case 'b': not a replay case "
        "(it must expect one state for each entry of each step)"
    )


def test_an_alone_case_pairs_states_and_bounds_its_rerouted_firsts(tmp_path: Path) -> None:
    bounds = {"float64": {"port": 0, "kernel": 0.25}}
    case = _batch(*_TWO_STEPS, id="x", alone=[[0, 1]], rerouted=[0])
    [loaded] = _load(tmp_path, "batch_alone.json", [case], bounds)
    assert loaded == ReplayCase(
        case_id="replay-alone-x",
        clauses=["RB-REPLAY-12"],
        pipeline="float64",
        request=_batch_request(*_TWO_STEPS),
        expected=[],
        tolerance=0.25,
        layout="pre-conv",
        self_tolerance=0.25,
        alone=((0, 1),),
        bounded=frozenset({0}),
    )


@pytest.mark.parametrize(
    ("pairs", "rerouted", "message"),
    [
        ([[0, 1]], [1], "its rerouted entries must each be the first state of a pair, once"),
        ([[0, 1]], [0, 0], "its rerouted entries must each be the first state of a pair, once"),
        ([], [], "its alone pairs must name two states of the reply, the first first"),
        ([[1, 0]], [], "its alone pairs must name two states of the reply, the first first"),
        ([[0, 0]], [], "its alone pairs must name two states of the reply, the first first"),
        ([[0, 2]], [], "its alone pairs must name two states of the reply, the first first"),
    ],
)
def test_an_alone_case_must_pair_states_of_the_reply_first_first(
    tmp_path: Path, pairs: list[list[int]], rerouted: list[int], message: str
) -> None:
    case = _batch(*_TWO_STEPS, id="x", alone=pairs, rerouted=rerouted)
    refused = _refused(tmp_path, "batch_alone.json", [case])
    assert refused == f"batch_alone.json: case 'x': not a replay case ({message})"


def _refusal_case(
    request: dict[str, object], expected: object, **more: object
) -> dict[str, object]:
    case = {"id": "f", "clauses": ["RB-PROTO-4"], "pipeline": "float64", "layout": "pre-conv"}
    return case | {"request": request, "expected": expected} | more


_REPLAY: Final[dict[str, object]] = {
    "op": "replay",
    "pipeline": "float64",
    "layout": "pre-conv",
    "dims": _DIMS,
    "conv_weight": _WEIGHT,
    "checkpoint": _START,
    "rounds": [{"rows": [_ROW], "accepted": 1}],
}
_BAD: Final = {"error": {"kind": "bad-request"}}


def test_a_refusal_past_a_rule_expects_bad_request_and_keeps_its_files_layout(
    tmp_path: Path,
) -> None:
    request = {**_REPLAY, "rounds": []}
    case = _refusal_case(_batch_request(_TWO_STEPS[0]) | {"slots": 0}, _BAD, layout="post-conv")
    loaded = _load(tmp_path, "refusals.json", [_refusal_case(request, _BAD), case])
    assert [(c.case_id, c.request, c.expected, c.refused, c.layout) for c in loaded] == [
        ("replay-refusal-f", request, [], True, "pre-conv"),
        ("replay-refusal-f", case["request"], [], True, "post-conv"),
    ]


def test_a_refusal_at_a_rule_expects_the_models_states(tmp_path: Path) -> None:
    expected = {"ok": {"states": [_ONE]}}
    [loaded] = _load(tmp_path, "refusals.json", [_refusal_case(_REPLAY, expected)])
    assert (loaded.expected, loaded.refused, loaded.without_form) == ([_ONE], False, None)


def test_a_refusal_without_a_form_is_refused_only_when_the_request_uses_it(
    tmp_path: Path,
) -> None:
    chunk = _batch_request([_entry("a", checkpoint=_START, prefill=[_ROW])], [_entry("a")])
    del chunk["steps"][0]["batch"][0]["rows"]  # type: ignore[index]
    del chunk["steps"][0]["batch"][0]["accepted"]  # type: ignore[index]
    case = _refusal_case(chunk, _BAD, without_form="prompt-chunks")
    [loaded] = _load(tmp_path, "refusals.json", [case])
    assert (loaded.refused, loaded.without_form) == (True, "prompt-chunks")
    plain = _refusal_case(_batch_request(_TWO_STEPS[0]), _BAD, without_form="prompt-chunks")
    assert _refused(tmp_path, "refusals.json", [plain]) == (
        "refusals.json: case 'f': not a replay case "
        "(the protocol's decoder does not refuse its request)"
    )


@pytest.mark.parametrize(
    ("case", "message"),
    [
        (
            _refusal_case(_REPLAY, _BAD),
            "the protocol's decoder does not refuse its request",
        ),
        (
            _refusal_case(_batch_request(_TWO_STEPS[0]), _BAD),
            "the protocol's decoder does not refuse its request",
        ),
        (
            _refusal_case(_REPLAY, _BAD, without_form="nope"),
            "its without_form names no batch form: 'nope'",
        ),
        (
            _refusal_case({"op": "describe"}, _BAD),
            "its request must be a replay or replay_batch request",
        ),
        (
            _refusal_case(_REPLAY, {"ok": {"states": [_ONE, _ONE]}}),
            "it must expect one state for each round",
        ),
    ],
    ids=["replay-allowed", "batch-allowed", "no-such-form", "describe", "rounds-miscounted"],
)
def test_a_malformed_refusal_case_is_named(
    tmp_path: Path, case: dict[str, object], message: str
) -> None:
    refused = _refused(tmp_path, "refusals.json", [case])
    assert refused == f"refusals.json: case 'f': not a replay case ({message})"


def test_a_request_that_cannot_be_sent_is_not_a_case(tmp_path: Path) -> None:
    unsendable = {"op": "replay", "x\ud800": 1}
    refusal = _refused(tmp_path, "refusals.json", [_refusal_case(unsendable, _BAD)])
    assert refusal == (
        "refusals.json: case 'f': not a replay case (cannot be sent as UTF-8, it holds a "
        'lone surrogate: {"op": "replay", "x\\ud800": 1})'
    )
    named = _batch([_entry("a\ud800", checkpoint=_START)], expected=[_ONE])
    batch = _refused(tmp_path, "batch.json", [named])
    assert batch.startswith(
        "batch.json: case 'b': not a replay case (cannot be sent as UTF-8, it holds a "
    )


@pytest.mark.parametrize(
    ("bounds", "case", "message"),
    [
        (
            {"float64": {"kernel": 1}},
            _rebuild(),
            "the kernel and self bounds must be numbers in [0, 1)",
        ),
        (
            {"float64": {"kernel": False}},
            _rebuild(),
            "the kernel and self bounds must be numbers in [0, 1)",
        ),
        (
            {"float64": {"kernel": 0, "self": 1.0}},
            _rebuild(),
            "the kernel and self bounds must be numbers in [0, 1)",
        ),
        (
            _BOUNDS,
            _rebuild(clauses=["RB-NOPE-1"]),
            "it cites clauses SPEC.md does not have: ['RB-NOPE-1']",
        ),
        (_BOUNDS, _rebuild(design=7), "a case's design must be a string"),
    ],
    ids=["kernel-1", "kernel-false", "self-1", "unknown-clause", "design-not-a-string"],
)
def test_a_case_with_a_bound_clause_or_design_out_of_its_range_is_named(
    tmp_path: Path, bounds: object, case: dict[str, object], message: str
) -> None:
    refused = _refused(tmp_path, "rebuild.json", [case], bounds)
    assert refused == f"rebuild.json: case 'r': not a replay case ({message})"


def test_a_bound_just_under_one_is_taken(tmp_path: Path) -> None:
    [loaded] = _load(tmp_path, "rebuild.json", [_rebuild()], {"float64": {"kernel": 0.999}})
    assert (loaded.tolerance, loaded.self_tolerance) == (0.999, 0.999)


@pytest.mark.parametrize(
    ("case", "named"),
    [
        (7, "cases[0]"),
        ({"id": 5}, "cases[0]"),
        ({"clauses": []}, "cases[0]"),
        ({"id": "q"}, "case 'q'"),
    ],
)
def test_a_case_that_breaks_the_schema_is_named_by_id_or_index(
    tmp_path: Path, case: object, named: str
) -> None:
    refused = _refused(tmp_path, "rebuild.json", [case])
    assert refused.startswith(f"rebuild.json: {named}: not a replay case (")


def test_files_that_hold_no_states_are_passed_over(tmp_path: Path) -> None:
    loaded = _load(tmp_path, "rebuild.json", [_rebuild()], before=("row_bytes.json",))
    assert [case.case_id for case in loaded] == ["replay-rebuild-r"]


# The states judge, on a case built here.
def _states(tolerance: float = 0.0, bounded: frozenset[int] | None = None) -> ReplayCase:
    return ReplayCase(
        case_id="replay-rounds-x",
        clauses=["RB-REPLAY-6"],
        pipeline="float64",
        request={"op": "replay"},
        expected=[{"conv": [["0x1.0p+0", "0x1.0p+0"]], "h": [[["0x0.0p+0"]]]}],
        tolerance=tolerance,
        bounded=bounded,
    )


def _replied(conv: list[str], h: str = "0x0.0p+0", /) -> dict[str, object]:
    return {"ok": {"states": [{"conv": [conv], "h": [[[h]]]}]}}


@pytest.mark.parametrize(
    ("op", "detail"), [("replay", NOT_OFFERED), ("replay_batch", BATCH_NOT_OFFERED)]
)
def test_an_adapter_without_the_operation_skips_the_case(op: str, detail: str) -> None:
    case = ReplayCase("replay-x", ["RB-REPLAY-1"], "float64", {"op": op}, [], 0.0)
    reply: dict[str, object] = {"error": {"kind": "unknown-op", "message": "no"}}
    assert judge_replay(case, reply) == CaseResult("replay-x", ["RB-REPLAY-1"], "skipped", detail)


def test_the_models_states_pass_exact_with_the_cases_bound() -> None:
    result = judge_replay(_states(0.5), _replied(["0x1.0p+0", "0x1.0p+0"]))
    assert result == CaseResult(
        "replay-rounds-x", ["RB-REPLAY-6"], "passed", "exact: every value the model's", 0.0, 0.5
    )


def test_a_field_of_zeros_passes_only_as_zeros() -> None:
    reply = _replied(["0x1.0p+0", "0x1.0p+0"], "0x1.0p-1")
    result = judge_replay(_states(0.5), reply)
    assert result == CaseResult(
        "replay-rounds-x",
        ["RB-REPLAY-6"],
        "failed",
        "states[0].h[0][0][0]: expected 0x0.0p+0, got 0x1.0p-1: relative error inf "
        "(of max |expected| over states[0].h) exceeds 0.5, the bound for float64 "
        f"(RB-REPLAY-6)\nreplied {encode(reply)}",
        float("inf"),
        0.5,
    )


def test_a_value_too_far_is_named_by_the_first_of_the_farthest() -> None:
    reply = _replied(["0x1.4p+0", "0x1.4p+0"])
    result = judge_replay(_states(0.125), reply)
    assert result == CaseResult(
        "replay-rounds-x",
        ["RB-REPLAY-6"],
        "failed",
        "states[0].conv[0][0]: expected 0x1.0p+0, got 0x1.4p+0: relative error 0.25 "
        "(of max |expected| over states[0].conv) exceeds 0.125, the bound for float64 "
        f"(RB-REPLAY-6)\nreplied {encode(reply)}",
        0.25,
        0.125,
    )


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ({"ok": 5}, 'the reply must be {"ok": {"states": [...]}} with 1 states'),
        (
            {"ok": {"states": [{"conv": [["0x1.0p+0"] * 2], "h": [[["0x0.0p+0"]]], "x": 1}]}},
            "states[0] must be an object with exactly conv and h",
        ),
        (
            _replied(["0x1.0p+0", "nan"]),
            'states[0].conv[0][1] is not a finite float.hex string: "nan"',
        ),
        (
            _replied(["0x1.0p+0"]),
            "states[0].conv has the wrong shape: expected 2 values in the case's shape",
        ),
    ],
    ids=["not-states", "more-than-conv-and-h", "not-finite", "wrong-shape"],
)
@pytest.mark.parametrize("bounded", [None, frozenset[int]()], ids=["every-state", "rerouted"])
def test_a_reply_of_the_wrong_shape_fails_with_a_distance_only_where_bounded(
    reply: dict[str, object], problem: str, bounded: frozenset[int] | None
) -> None:
    result = judge_replay(_states(0.0, bounded), reply)
    detail = f"{problem}\nreplied {encode(reply)}"
    far = () if bounded is None else (0.0, 0.0)
    assert result == CaseResult("replay-rounds-x", ["RB-REPLAY-6"], "failed", detail, *far)


@pytest.mark.parametrize(("length", "kept", "tail"), [(300, 300, ""), (301, 297, "...")])
def test_a_states_reply_is_shown_whole_up_to_300_characters(
    length: int, kept: int, tail: str
) -> None:
    reply = _padded(length)
    shown = f"{encode(reply)[:kept]}{tail}"
    assert judge_replay(_states(), reply).detail.endswith(f"\nreplied {shown}")


def test_an_alone_pair_of_another_shape_names_the_pair_and_the_shape() -> None:
    wide = {"conv": [["0x1.0000000000000p+0"], ["0x1.0000000000000p+0"]], "h": _ONE["h"]}
    reply: dict[str, object] = {"ok": {"states": [wide, _ONE, _ONE]}}
    assert judge_replay(_alone(), reply) == CaseResult(
        "replay-alone-x",
        _CLAUSES,
        "failed",
        "states[0], s in the batch, is not states[2], the same entry alone: "
        "states[0].conv has the wrong shape: expected 1 values in the case's shape"
        f"\nreplied {encode(reply)}",
    )
