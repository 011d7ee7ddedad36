# SPDX-License-Identifier: MIT OR Apache-2.0
"""The replay corpus over the protocol: its cases as ``replay`` requests, judged within a bound.

The replay corpus (``vectors/replay/``, written by :mod:`ssm_rollback_spec.corpus.replay_cases`)
is loaded by the protocol corpus's runner (:mod:`ssm_rollback_spec.corpus.files`);
this module turns each case that holds states (``rebuild.json``,
``post_conv.json``, ``rounds.json``) into one ``replay`` request and judges
the reply against the case's expected states, within the relative bound the
case file states for its pipeline (docs/replay-corpus.md, "Judging a runtime's
replay"). Which cases an adapter is sent, and by which names, is
:mod:`.replay_offer`'s (re-exported here). Standard library only: running
needs no numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Final, cast

from ..harness.clauses import CLAUSES
from ..harness.protocol import ErrorKind, ProtocolError, encode, encode_line
from ..harness.replay_wire import (
    BatchForm,
    batch_forms,
    decode_replay,
    decode_replay_batch,
    finite_hex,
)
from .files import VectorError, load_corpus
from .protocol_run import CaseResult
from .replay_offer import (
    FORM_LISTED,
    FORM_NOT_LISTED,
    ReplayCase,
    ReplayOffer,
    ReplayOfferError,
    not_offered,
    replay_offer,
    split_offered,
    spoken,
    spoken_cases,
)

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from .protocol_cases import Case
    from .protocol_run import Judge

__all__ = [
    "BATCH_NOT_OFFERED",
    "FORM_LISTED",
    "FORM_NOT_LISTED",
    "NOT_OFFERED",
    "ReplayCase",
    "ReplayOffer",
    "ReplayOfferError",
    "as_cases",
    "judge_replay",
    "load_replay_cases",
    "not_offered",
    "replay_offer",
    "split_offered",
    "spoken",
    "spoken_cases",
]

#: A skipped replay case's detail, for an adapter that answers ``unknown-op``.
NOT_OFFERED: Final = "not offered: the adapter answered unknown-op to replay"
#: A skipped batch case's detail, for an adapter that answers ``unknown-op`` to ``replay_batch``.
BATCH_NOT_OFFERED: Final = "not offered: the adapter answered unknown-op to replay_batch"


# The case files that hold states, and the name each gives its cases' IDs.
_STATE_FILES: Final = {
    "rebuild.json": "rebuild",
    "post_conv.json": "post-conv",
    "rounds.json": "rounds",
    "batch.json": "batch",
    "batch_alone.json": "alone",
    "refusals.json": "refusal",
}
_DIMS: Final = ("num_key_heads", "key_head_dim", "num_value_heads", "value_head_dim", "conv_kernel")


_GATE_INPUTS: Final = ("a", "b")


def _rows(rows: list[dict[str, object]], values: str, /) -> list[dict[str, object]]:
    # An engine pipeline's rows also carry the raw gate inputs its kernels take.
    return [
        {values: row[values], "g": row["g"], "beta": row["beta"]}
        | {name: row[name] for name in _GATE_INPUTS if name in row}
        for row in rows
    ]


def _pre_conv_rows(rows: list[dict[str, object]], /) -> list[dict[str, object]]:
    return _rows(rows, "qkv")


def _request(
    case: dict[str, object], layout: str, rounds: list[dict[str, object]], /
) -> dict[str, object]:
    dims = cast("dict[str, object]", case["dims"])
    checkpoint = case["initial"] if "initial" in case else case["checkpoint"]
    return {
        "op": "replay",
        "pipeline": case["pipeline"],
        "layout": layout,
        "dims": {name: dims[name] for name in _DIMS},
        "conv_weight": case["conv_weight"],
        "checkpoint": checkpoint,
        "rounds": rounds,
    } | {name: case[name] for name in ("a_log", "dt_bias") if name in case}


def _batch_entry(entry: dict[str, object], /) -> dict[str, object]:
    rows: dict[str, object] = {}
    # A prompt chunk alone has no window.
    if "rows" in entry:
        rows["rows"] = _pre_conv_rows(cast("list[dict[str, object]]", entry["rows"]))
    if "prefill" in entry:
        rows["prefill"] = _pre_conv_rows(cast("list[dict[str, object]]", entry["prefill"]))
    return entry | rows


def _batch_steps(case: dict[str, object], /) -> list[list[dict[str, object]]]:
    steps = cast("list[dict[str, list[dict[str, object]]]]", case["steps"])
    return [[_batch_entry(entry) for entry in step["batch"]] for step in steps]


def _batch_request(case: dict[str, object], /) -> dict[str, object]:
    dims = cast("dict[str, object]", case["dims"])
    return {
        "op": "replay_batch",
        "pipeline": case["pipeline"],
        "dims": {name: dims[name] for name in _DIMS},
        "conv_weight": case["conv_weight"],
        "slots": case["slots"],
        "steps": [{"batch": batch} for batch in _batch_steps(case)],
    } | {name: case[name] for name in ("a_log", "dt_bias") if name in case}


def _check_request(
    kind: str, request: dict[str, object], expected: int, alone: tuple[tuple[int, int], ...], /
) -> None:
    """Raise unless ``request`` is one the protocol decodes and its case judges every state."""
    if kind in {"batch", "alone"}:
        decode_replay_batch(request)
        entries = len(_entries(request))
        if kind == "batch" and expected != entries:
            raise ValueError("it must expect one state for each entry of each step")
        if kind == "alone" and (not alone or any(not 0 <= i < j < entries for i, j in alone)):
            raise ValueError("its alone pairs must name two states of the reply, the first first")
    else:
        decode_replay(request)
    encode_line(request)


def _refusal(
    case: dict[str, object], /
) -> tuple[dict[str, object], list[object], bool, str | None]:
    """A ``refusals.json`` case's request, expected states, whether refused, and its form.

    Raises:
        ValueError: the reference decoder does not refuse a case that expects
            ``bad-request``, or refuses one at a bound.
    """
    request = cast("dict[str, object]", case["request"])
    expected = cast("dict[str, object]", case["expected"])
    form = case.get("without_form")
    if form is not None and form not in {form.value for form in BatchForm}:
        raise ValueError(f"its without_form names no batch form: {form!r}")
    if request.get("op") not in {"replay", "replay_batch"}:
        raise ValueError("its request must be a replay or replay_batch request")
    decode = decode_replay if request["op"] == "replay" else decode_replay_batch
    if expected == {"error": {"kind": "bad-request"}}:
        try:
            decode(request)
        except ProtocolError as error:
            refused_here = error.kind is ErrorKind.BAD_REQUEST
        else:
            # Allowed by the decoder, which offers every form: a refusal only without its form.
            refused_here = form is not None and BatchForm(form) in batch_forms(request)
        if not refused_here:
            raise ValueError("the protocol's decoder does not refuse its request")
        encode_line(request)
        return request, [], True, form
    value = cast("dict[str, object]", expected["ok"])
    states = cast("list[object]", value["states"])
    _check_request(
        "batch" if request["op"] == "replay_batch" else "replay", request, len(states), ()
    )
    if request["op"] == "replay" and len(states) != len(cast("list[object]", request["rounds"])):
        raise ValueError("it must expect one state for each round")
    return request, states, False, None


def _replay_case(  # noqa: C901 (one branch a file)
    kind: str, case: dict[str, object], tolerances: dict[str, object], /
) -> ReplayCase:
    # KeyError or TypeError here is a case that breaks the schema.
    alone: tuple[tuple[int, int], ...] = ()
    bounded: frozenset[int] | None = None
    refused: bool | None = None
    without_form: str | None = None
    if kind == "refusal":
        request, states, refused, without_form = _refusal(case)
        expected = cast("list[dict[str, object]]", states)
    elif kind == "alone":
        request = _batch_request(case)
        expected = []
        pairs = cast("list[list[int]]", case["alone"])
        alone = tuple((int(first), int(second)) for first, second in pairs)
        rerouted = cast("list[int]", case.get("rerouted", []))
        bounded = frozenset(int(number) for number in rerouted)
        if not bounded <= {first for first, _ in alone} or len(bounded) != len(rerouted):
            raise ValueError("its rerouted entries must each be the first state of a pair, once")
    elif kind == "batch":
        request = _batch_request(case)
        expected = cast("list[dict[str, object]]", case["expected"])
    elif kind == "rounds":
        rounds_json = cast("list[dict[str, object]]", case["rounds"])
        rounds = [
            {
                "rows": _pre_conv_rows(cast("list[dict[str, object]]", r["rows"])),
                "accepted": r["accepted"],
            }
            for r in rounds_json
        ]
        request = _request(case, "pre-conv", rounds)
        expected = [cast("dict[str, object]", r["expected"]) for r in rounds_json]
    elif kind == "post-conv":
        rows = _rows(cast("list[dict[str, object]]", case["post_conv_ring"]), "k_and_v")
        window = {"rows": rows, "accepted": case["accepted"], "conv_window": case["conv_window"]}
        request = _request(case, "post-conv", [window])
        expected = [cast("dict[str, object]", case["expected"])]
    else:
        ring = _pre_conv_rows(cast("list[dict[str, object]]", case["ring"]))
        request = _request(case, "pre-conv", [{"rows": ring, "accepted": case["accepted"]}])
        expected = [cast("dict[str, object]", case["expected"])]
    pipeline = str(case["pipeline"])
    bounds = cast("dict[str, object]", tolerances[pipeline])
    numbers: list[float] = []
    for value in (bounds["kernel"], bounds.get("self", bounds["kernel"])):
        if not isinstance(value, float | int) or isinstance(value, bool) or not 0 <= value < 1:
            raise TypeError("the kernel and self bounds must be numbers in [0, 1)")
        numbers.append(float(value))
    bound, itself = numbers
    if kind != "refusal":
        _check_request(kind, request, len(expected), alone)
    clauses = cast("list[str]", case["clauses"])
    unknown = [clause for clause in clauses if clause not in CLAUSES]
    if unknown:
        raise ValueError(f"it cites clauses SPEC.md does not have: {unknown}")
    design = case.get("design")
    if design is not None and not isinstance(design, str):
        raise TypeError("a case's design must be a string")
    return ReplayCase(
        case_id=f"replay-{kind}-{case['id']}",
        clauses=list(clauses),
        pipeline=pipeline,
        request=request,
        expected=expected,
        tolerance=float(bound),
        layout=str(case["layout"] if kind == "refusal" else request.get("layout", "pre-conv")),
        design=design,
        self_tolerance=itself,
        alone=alone,
        bounded=bounded,
        refused=refused,
        without_form=without_form,
    )


def load_replay_cases(directory: Path, /) -> list[ReplayCase]:
    """Every case of the replay corpus in ``directory`` that holds states, as a replay request.

    Raises:
        VectorError: a file is missing or unreadable, a hash or case count
            does not match the manifest, a state file states no tolerance,
            or a case lacks a field a request needs (named by file and ID).
    """
    cases: list[ReplayCase] = []
    for entry in load_corpus(directory):
        kind = _STATE_FILES.get(entry["path"])
        if kind is None:
            continue
        tolerances = entry["document"].get("tolerance")
        if not isinstance(tolerances, dict):
            raise VectorError(f"{entry['path']}: must state its tolerance per pipeline")
        for index, case in enumerate(entry["cases"]):
            shown = case.get("id") if isinstance(case, dict) else None
            named = f"case {shown!r}" if isinstance(shown, str) else f"cases[{index}]"
            try:
                cases.append(_replay_case(kind, cast("dict[str, object]", case), tolerances))
            except (KeyError, TypeError, ValueError, AttributeError) as error:
                raise VectorError(
                    f"{entry['path']}: {named}: not a replay case ({error})"
                ) from None
    return cases


def _flat(value: object, path: str, /) -> list[tuple[str, object]]:
    if isinstance(value, list):
        return [
            item for index, child in enumerate(value) for item in _flat(child, f"{path}[{index}]")
        ]
    return [(path, value)]


@dataclass(frozen=True)
class _TooFar:
    """A field further from the model than the case's bound: the message, and how far."""

    message: str
    error: float


def _field_problem(
    case: ReplayCase, number: int, field: str, actual: object, expected: object, /
) -> str | _TooFar | float:
    """What is wrong with one field of a replied state, or its largest relative error."""
    where = f"states[{number}].{field}"
    wanted = _flat(expected, where)
    got = _flat(actual, where)
    if [path for path, _ in got] != [path for path, _ in wanted]:
        return f"{where} has the wrong shape: expected {len(wanted)} values in the case's shape"
    scale = max(abs(float.fromhex(str(value))) for _, value in wanted)
    worst: tuple[float, str, str, object] | None = None
    for (path, value), (_, found) in zip(wanted, got, strict=True):
        parsed = finite_hex(found)
        if parsed is None:
            return f"{path} is not a finite float.hex string: {encode({'value': found})[9:-1]}"
        difference = abs(parsed - float.fromhex(str(value)))
        error = difference / scale if scale else (math.inf if difference else 0.0)
        if worst is None or error > worst[0]:
            worst = (error, path, str(value), found)
    assert worst is not None
    error, path, value, found = worst
    bound = case.bound(number)
    if error > bound:
        why = f"the bound for {case.pipeline}"
        if bound != case.tolerance:
            why = (
                f"{case.pipeline}'s bound where no one-token prompt chunk of the "
                "sequence ran beside other rows before"
            )
        return _TooFar(
            f"{path}: expected {value}, got {found}: relative error {error:.3g} "
            f"(of max |expected| over {where}) exceeds {bound:g}, {why} "
            f"({', '.join(case.clauses)})",
            error,
        )
    return error


def _states_problem(case: ReplayCase, states: list[object], /) -> tuple[str | None, float]:
    """The first problem of the replied states against the case's, and the largest error."""
    largest = 0.0
    for number, (state, expected) in enumerate(zip(states, case.expected, strict=True)):
        if not isinstance(state, dict) or set(state) != {"conv", "h"}:
            return f"states[{number}] must be an object with exactly conv and h", largest
        for field in ("conv", "h"):
            found = _field_problem(case, number, field, state[field], expected[field])
            if isinstance(found, str):
                return found, largest
            if isinstance(found, _TooFar):
                return found.message, max(largest, found.error)
            largest = max(largest, found)
    return None, largest


def judge_replay(case: ReplayCase, reply: dict[str, object], /) -> CaseResult:
    """One replay case's outcome: passed within its bound, failed, or skipped when not offered."""
    error = reply.get("error")
    if isinstance(error, dict) and error.get("kind") == "unknown-op":
        detail = BATCH_NOT_OFFERED if case.request["op"] == "replay_batch" else NOT_OFFERED
        return CaseResult(case.case_id, case.clauses, "skipped", detail)
    if case.refused:
        return _judge_refusal(case, reply)
    value = reply.get("ok")
    states = value.get("states") if isinstance(value, dict) else None
    if case.alone:
        return _judge_alone(case, reply, states)
    problem: str | None = None
    largest = 0.0
    if not isinstance(states, list) or len(states) != len(case.expected):
        problem = (
            f'the reply must be {{"ok": {{"states": [...]}}}} with {len(case.expected)} states'
        )
    else:
        problem, largest = _states_problem(case, states)
    if problem is None:
        # A port of the model's arithmetic is exact (the case file's port bound, 0).
        detail = (
            "exact: every value the model's"
            if largest == 0
            else f"within {case.tolerance:g}, not exact: largest relative error {largest:.3g}"
        )
        return CaseResult(case.case_id, case.clauses, "passed", detail, largest, case.tolerance)
    replied = encode(reply)
    shown = replied if len(replied) <= 300 else f"{replied[:297]}..."
    detail = f"{problem}\nreplied {shown}"
    if largest <= case.tolerance and case.bounded is None:
        # Not a distance: the reply broke the shape, not the bound.
        return CaseResult(case.case_id, case.clauses, "failed", detail)
    return CaseResult(case.case_id, case.clauses, "failed", detail, largest, case.tolerance)


def _judge_refusal(case: ReplayCase, reply: dict[str, object], /) -> CaseResult:
    """A request past a rule: passed when refused as ``bad-request``, with any message."""
    error = reply.get("error")
    if isinstance(error, dict) and error.get("kind") == "bad-request":
        return CaseResult(case.case_id, case.clauses, "passed", "refused as bad-request")
    replied = encode(reply)
    shown = replied if len(replied) <= 300 else f"{replied[:297]}..."
    detail = (
        "the request breaks a rule of docs/protocol.md, so the only allowed reply is "
        f'{{"error":{{"kind":"bad-request"}}}} (any message)\nreplied {shown}'
    )
    return CaseResult(case.case_id, case.clauses, "failed", detail)


def _entries(request: dict[str, object], /) -> list[str]:
    """The sequence of each entry of a ``replay_batch`` request, step by step."""
    steps = cast("list[dict[str, list[dict[str, object]]]]", request["steps"])
    return [str(entry["sequence"]) for step in steps for entry in step["batch"]]


def _judge_alone(case: ReplayCase, reply: dict[str, object], states: object, /) -> CaseResult:
    """A batch case judged against the implementation itself: each pair within the case's bound.

    The bound is ``batch_alone.json``'s for the pipeline: 0, bit for bit, but
    where an engine's own kernels differ for the same rows (RB-REPLAY-13), and
    only for the case's ``rerouted`` entries; every other pair bit for bit.
    """
    names = _entries(case.request)
    problem: str | None = None
    largest = 0.0
    if not isinstance(states, list) or len(states) != len(names):
        problem = f'the reply must be {{"ok": {{"states": [...]}}}} with {len(names)} states'
    else:
        for batched, alone in case.alone:
            pair = (states[batched], states[alone])
            if not all(isinstance(state, dict) and set(state) == {"conv", "h"} for state in pair):
                problem = (
                    f"states[{batched}] and states[{alone}] must be objects with exactly conv and h"
                )
                break
            for field in ("conv", "h"):
                found = _field_problem(case, batched, field, pair[0][field], pair[1][field])
                if isinstance(found, float):
                    largest = max(largest, found)
                else:
                    shown = found if isinstance(found, str) else found.message
                    problem = (
                        f"states[{batched}], {names[batched]} in the batch, is not "
                        f"states[{alone}], the same entry alone: {shown}"
                    )
                    break
            if problem:
                break
    if problem is None:
        how = "bit for bit" if largest == 0 else f"within {case.tolerance:g}: {largest:.3g} at most"
        detail = f"each of {len(case.alone)} entries the same in the batch as alone, {how}"
        return CaseResult(case.case_id, case.clauses, "passed", detail, largest, case.tolerance)
    replied = encode(reply)
    shown = replied if len(replied) <= 300 else f"{replied[:297]}..."
    return CaseResult(case.case_id, case.clauses, "failed", f"{problem}\nreplied {shown}")


def as_cases(cases: Sequence[ReplayCase], /) -> tuple[list[Case], dict[str, Judge]]:
    """The replay cases as corpus cases for :func:`.corpus.run_cases`, and each one's judge.

    ``expected`` holds the states a port of the model replies; the judge
    accepts any within the case's bound.
    """
    as_corpus: list[Case] = [
        {
            "id": case.case_id,
            "clauses": case.clauses,
            "request": case.request,
            "expected": [
                {"error": {"kind": "bad-request"}}
                if case.refused
                else {"ok": {"states": case.expected}}
            ],
        }
        for case in cases
    ]
    judges: dict[str, Judge] = {case.case_id: partial(judge_replay, case) for case in cases}
    return as_corpus, judges
