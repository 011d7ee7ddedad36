# SPDX-License-Identifier: MIT OR Apache-2.0
"""The model operation's round scripts over the protocol: sent when offered, judged by equalities.

``model_rounds.json`` (written by :mod:`.model_cases`) sits in the replay
corpus's directory and is pinned by its manifest. Each case is one
``model`` request; its reply passes when every rollback step was accepted
and every ``equal`` pair of logit rows is the same within the bound the
adapter's ``describe`` declares for its model (docs/protocol-model.md;
RB-REPLAY-14). No expected logit is shipped: the adapter is judged against
its own plain decode, in the same reply. A case is not sent, and is
skipped, when the ``describe`` names no model, does not list the case's
way, or offers less than the case ``needs``; an adapter that answers
``unknown-op`` is reported as not offering it. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Final, cast

from ..harness.clauses import CLAUSES
from ..harness.model_wire import (
    MODEL_OP,
    DecodeResult,
    MalformedModelReplyError,
    ModelOffer,
    ModelOfferError,
    ModelResult,
    RollbackWay,
    decode_model,
    decode_model_offer,
    decode_model_results,
)
from ..harness.protocol import ProtocolError, encode, encode_line, encode_value
from .files import VectorError, load_corpus
from .model_cases import MODEL_FILE
from .protocol_run import CaseResult

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from .protocol_cases import Case
    from .protocol_run import Judge

__all__ = [
    "MODEL_NOT_DESCRIBED",
    "MODEL_NOT_OFFERED",
    "ModelCase",
    "judge_model",
    "load_model_cases",
    "model_as_cases",
    "model_judges",
]

#: A skipped case's detail, for an adapter that answers ``unknown-op`` to ``model``.
MODEL_NOT_OFFERED: Final = "not offered: the adapter answered unknown-op to model"
#: A skipped case's detail, for an adapter whose ``describe`` names no model.
MODEL_NOT_DESCRIBED: Final = "not offered: the adapter's describe names no model"

#: The longest reply a failure's detail shows.
_SHOWN: Final = 300


@dataclass(frozen=True)
class ModelCase:
    """One round script as sent: its request, what it needs, and the rows that must match."""

    case_id: str
    clauses: list[str]
    request: dict[str, object]
    way: RollbackWay
    vocab: int
    sequences: int
    #: A snapshot case's deepest rollback; None for a checkpoint case.
    snapshot_depth: int | None
    #: Pairs of ``(step, entry, token)`` rows of the reply that must be the same.
    equal: tuple[tuple[tuple[int, int, int], tuple[int, int, int]], ...]


def _row(value: object, /) -> tuple[int, int, int]:
    if not isinstance(value, list) or len(value) != 3 or not all(type(n) is int for n in value):
        raise TypeError(f"a row must be [step, entry, token], got {encode_value(value)}")
    step, entry, token = value
    return step, entry, token


def _needs(case: dict[str, object], /) -> ModelOffer:
    # The least offer the case fits: its request must be one such a model decodes.
    needs = cast("dict[str, object]", case["needs"])
    request = cast("dict[str, object]", case["request"])
    way = RollbackWay(str(request["rollback"]))
    member: dict[str, object] = {
        "name": "needs",
        "vocab": needs["vocab"],
        "sequences": needs["sequences"],
        "rollback": [way.value],
    }
    if way is RollbackWay.SNAPSHOT:
        member["snapshot_depth"] = needs["snapshot_depth"]
    elif "snapshot_depth" in needs:
        raise ValueError("a checkpoint case needs no snapshot depth")
    offer = decode_model_offer({MODEL_OP: member})
    assert offer is not None
    return offer


def _check(case: ModelCase, offer: ModelOffer, /) -> None:
    """Raise unless the case's request decodes for its needs and each pair names two rows."""
    if case.request.get("op") != MODEL_OP:
        raise ValueError("its request must be a model request")
    try:
        decoded = decode_model(case.request, offer)
    except ProtocolError as error:
        raise ValueError(f"its request is refused for what it needs: {error}") from None
    encode_line(case.request)
    script = decoded["script"]
    if not case.equal:
        raise ValueError("it must name at least one pair of rows")
    for pair in case.equal:
        for step, entry, token in pair:
            item = script[step] if 0 <= step < len(script) else None
            if (
                item is None
                or item["kind"] != "decode"
                or not 0 <= entry < len(item["entries"])
                or not 0 <= token < len(item["entries"][entry]["tokens"])
            ):
                raise ValueError(
                    f"its pair {encode_value([list(row) for row in pair])} names no row"
                )


def _model_case(case: dict[str, object], /) -> ModelCase:
    # KeyError or TypeError here is a case that breaks the schema.
    clauses = cast("list[str]", case["clauses"])
    unknown = [clause for clause in clauses if clause not in CLAUSES]
    if unknown:
        raise ValueError(f"it cites clauses SPEC.md does not have: {unknown}")
    offer = _needs(case)
    pairs = cast("list[list[object]]", case["equal"])
    built = ModelCase(
        case_id=f"model-{case['id']}",
        clauses=list(clauses),
        request=cast("dict[str, object]", case["request"]),
        way=offer["rollback"][0],
        vocab=offer["vocab"],
        sequences=offer["sequences"],
        snapshot_depth=offer.get("snapshot_depth"),
        equal=tuple((_row(first), _row(second)) for first, second in pairs),
    )
    _check(built, offer)
    return built


def load_model_cases(directory: Path, /) -> list[ModelCase]:
    """The round scripts of the replay corpus in ``directory``; none when it has no such file.

    Raises:
        VectorError: a file is missing or unreadable, a hash or case count does
            not match the manifest, or a case is not a round script a model of
            its needs decodes (named by file and ID).
    """
    cases: list[ModelCase] = []
    for entry in load_corpus(directory):
        if entry["path"] != MODEL_FILE:
            continue
        for index, case in enumerate(entry["cases"]):
            shown = case.get("id") if isinstance(case, dict) else None
            named = f"case {shown!r}" if isinstance(shown, str) else f"cases[{index}]"
            try:
                cases.append(_model_case(cast("dict[str, object]", case)))
            except (KeyError, TypeError, ValueError, AttributeError, ModelOfferError) as error:
                raise VectorError(
                    f"{entry['path']}: {named}: not a round script ({error})"
                ) from None
    return cases


def model_as_cases(cases: Sequence[ModelCase], /) -> list[Case]:
    """The round scripts as corpus cases for :func:`.corpus.run_cases`, each judged by its judge."""
    return [
        {"id": case.case_id, "clauses": case.clauses, "request": case.request, "expected": []}
        for case in cases
    ]


def _short_of(case: ModelCase, offer: ModelOffer, /) -> str | None:
    """Why ``offer`` cannot take ``case``, or None."""
    if case.way not in offer["rollback"]:
        return f"not offered: the adapter's model does not list rollback way {case.way.value}"
    if offer["vocab"] < case.vocab:
        return (
            f"not offered: the case needs a vocabulary of {case.vocab}, "
            f"the adapter's model has {offer['vocab']}"
        )
    if offer["sequences"] < case.sequences:
        return (
            f"not offered: the case needs {case.sequences} sequences at once, "
            f"the adapter's model holds {offer['sequences']}"
        )
    depth = offer.get("snapshot_depth", 0)
    if case.snapshot_depth is not None and depth < case.snapshot_depth:
        return (
            f"not offered: the case needs a snapshot depth of {case.snapshot_depth}, "
            f"the adapter's model reaches {depth}"
        )
    return None


def model_judges(
    cases: Sequence[ModelCase], described: Mapping[str, object], /
) -> tuple[dict[str, Judge], list[CaseResult]]:
    """Each case ``described`` offers, with its judge; a result for each of the others.

    ``described`` is the adapter's ``describe`` reply. A case it does not
    offer is skipped, with the reason; a ``model`` member of another shape
    fails every case, naming the field.
    """
    value = described.get("ok")
    try:
        offer = decode_model_offer(value) if isinstance(value, dict) else None
    except ModelOfferError as error:
        detail = f'the describe\'s "model" member is not as docs/protocol-model.md says: {error}'
        return {}, [CaseResult(case.case_id, case.clauses, "failed", detail) for case in cases]
    judges: dict[str, Judge] = {}
    results: list[CaseResult] = []
    for case in cases:
        reason = MODEL_NOT_DESCRIBED if offer is None else _short_of(case, offer)
        if reason is not None or offer is None:
            results.append(CaseResult(case.case_id, case.clauses, "skipped", str(reason)))
        else:
            judges[case.case_id] = partial(judge_model, case, offer)
    return judges, results


def _shown(reply: dict[str, object], /) -> str:
    replied = encode(reply)
    return replied if len(replied) <= _SHOWN else f"{replied[: _SHOWN - 3]}..."


def _sequence(case: ModelCase, step: int, entry: int, /) -> str:
    script = cast("list[dict[str, list[dict[str, object]]]]", case.request["script"])
    return str(script[step]["decode"][entry]["sequence"])


def _pair_problem(
    case: ModelCase,
    offer: ModelOffer,
    rows: tuple[tuple[int, int, int], tuple[int, int, int]],
    results: list[DecodeResult],
    /,
) -> tuple[str | None, float]:
    (step, entry, token), (plain_step, plain_entry, plain_token) = rows
    got = results[step]["logits"][entry][token]
    want = results[plain_step]["logits"][plain_entry][plain_token]
    apart = [abs(a - b) for a, b in zip(got, want, strict=True)]
    distance = max(apart)
    if distance <= offer["bound"]:
        return None, distance
    worst = apart.index(distance)
    return (
        f"results[{step}].logits[{entry}][{token}], token {token} of "
        f"{_sequence(case, step, entry)}'s window: logit {worst} is {got[worst].hex()}, and "
        f"results[{plain_step}].logits[{plain_entry}][{plain_token}], the same kept token "
        f"decoded plainly as {_sequence(case, plain_step, plain_entry)}, gives "
        f"{want[worst].hex()}, {distance:.3g} apart, past the bound {offer['bound']:g} "
        f"model {offer['name']!r} declares ({', '.join(case.clauses)})"
    ), distance


def judge_model(case: ModelCase, offer: ModelOffer, reply: dict[str, object], /) -> CaseResult:
    """One round script's outcome: every rollback accepted and every pair within the bound."""
    error = reply.get("error")
    if isinstance(error, dict) and error.get("kind") == "unknown-op":
        return CaseResult(case.case_id, case.clauses, "skipped", MODEL_NOT_OFFERED)
    request = decode_model(case.request, offer)
    results: list[ModelResult] | None = None
    note = "the reply must be ok"
    if "ok" in reply:
        try:
            results = decode_model_results(reply["ok"], request, offer["vocab"])
        except MalformedModelReplyError as malformed:
            note = str(malformed)
    if results is None:
        detail = f'the reply is not {{"ok": {{"results": [...]}}}}, one per step: {note}'
        return CaseResult(
            case.case_id, case.clauses, "failed", f"{detail}\nreplied {_shown(reply)}"
        )
    for index, (step, result) in enumerate(zip(request["script"], results, strict=True)):
        if result["kind"] == "rollback" and not result["accepted"]:
            assert step["kind"] == "rollback"
            detail = (
                f"results[{index}]: the rollback of {step['tokens']} of {step['sequence']}'s "
                "tokens was refused, though the model offers it (right after the sequence's "
                "decode, within what it appended and the snapshot depth)"
            )
            return CaseResult(
                case.case_id, case.clauses, "failed", f"{detail}\nreplied {_shown(reply)}"
            )
    decoded = [cast("DecodeResult", result) for result in results]
    largest = 0.0
    for rows in case.equal:
        problem, distance = _pair_problem(case, offer, rows, decoded)
        largest = max(largest, distance)
        if problem is not None:
            return CaseResult(
                case.case_id,
                case.clauses,
                "failed",
                f"{problem}\nreplied {_shown(reply)}",
                largest,
                offer["bound"],
            )
    how = "bit for bit" if largest == 0 else f"within {offer['bound']:g}: {largest:.3g} at most"
    detail = f"each of {len(case.equal)} kept tokens' logits a plain decode's, {how}"
    return CaseResult(case.case_id, case.clauses, "passed", detail, largest, offer["bound"])
