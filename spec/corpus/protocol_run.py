# SPDX-License-Identifier: MIT OR Apache-2.0
"""The protocol corpus read back: its cases checked against the schema, run and judged.

Loading checks every file against the manifest that pins it and every case
against the schema's rules, with the standard library; running sends each
case through one adapter and judges the reply by the replies the model
allows, or, for the replay cases, by a judge of their own. A race that a
racy cell could lose is asked for its calls' spans and passes only when two
of them overlapped, as ``check``'s races do (docs/protocol-race-evidence.md).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, cast

from ..harness.clauses import CLAUSES
from ..harness.driver import is_stateful
from ..harness.protocol import (
    SPANS,
    UnencodableMessageError,
    encode,
    encode_line,
    reply_matches,
)
from ..harness.race_evidence import MalformedSpansError, RaceTally, judge_races, reply_spans
from .files import VectorError, load_corpus

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from ..harness.failures import AdapterFailure
    from ..harness.subprocess_driver import SubprocessDriver
    from .protocol_cases import Case

__all__ = [
    "EXITFIRST_HELP",
    "STOPPED",
    "CaseResult",
    "Judge",
    "is_contested_race",
    "load_cases",
    "run_cases",
]


_CASE_ID: Final = re.compile(r"[a-z0-9][a-z0-9-]*")
_ERROR_KINDS: Final = ("unknown-mode", "overflow", "unsupported", "unknown-op", "bad-request")


def _is_expected_reply(value: object, /) -> bool:
    if not isinstance(value, dict) or len(value) != 1:
        return False
    if "ok" in value:
        return True
    body = value.get("error")
    return (
        isinstance(body, dict)
        and body.get("kind") in _ERROR_KINDS
        and set(body) <= {"kind", "message"}
        and isinstance(body.get("message", ""), str)
    )


_CASE_KEYS: Final = frozenset({"id", "clauses", "request", "expected"})


def _case_problem(case: object, /) -> str | None:  # noqa: C901, PLR0911 - one return per rule
    # The schema's rules for one case, checked with the standard library.
    if not isinstance(case, dict) or set(case) - {"line"} != _CASE_KEYS:
        return "must be an object with exactly id, clauses, request and expected, and maybe line"
    line = case.get("line", "")
    if not isinstance(line, str) or "\n" in line or "\r" in line:
        return "its line must be a text with no line break"
    if not isinstance(case["id"], str) or not _CASE_ID.fullmatch(case["id"]):
        return "its id must be lower-case letters, digits and hyphens"
    clauses = case["clauses"]
    if not isinstance(clauses, list) or not clauses or len(set(map(str, clauses))) != len(clauses):
        return "its clauses must be a non-empty list of distinct clause IDs"
    unknown = [clause for clause in clauses if clause not in CLAUSES]
    if unknown:
        return f"it cites clauses SPEC.md does not have: {unknown}"
    if not isinstance(case["request"], dict):
        return "its request must be an object"
    try:
        encode_line(case["request"])
        line.encode("utf-8")
    except UnencodableMessageError as error:
        return f"its request {error}"
    except UnicodeEncodeError:
        return "its line cannot be sent as UTF-8, it holds a lone surrogate"
    expected = case["expected"]
    if not isinstance(expected, list) or not expected:
        return "its expected replies must be a non-empty list"
    if not all(_is_expected_reply(reply) for reply in expected):
        return 'each expected reply must be {"ok": VALUE} or {"error": {"kind": KIND}}'
    return None


def load_cases(directory: Path, /) -> list[Case]:
    """Every case of the corpus in ``directory``, checked against its manifest and the schema.

    Raises:
        VectorError: a file is missing or unreadable, a hash or case count
            does not match the manifest, a case breaks the schema (named by
            file and ID), or two cases share an ID.
    """
    cases: list[Case] = []
    for entry in load_corpus(directory):
        for index, case in enumerate(entry["cases"]):
            problem = _case_problem(case)
            if problem is not None:
                shown = case.get("id") if isinstance(case, dict) else None
                named = f"case {shown!r}" if isinstance(shown, str) else f"cases[{index}]"
                raise VectorError(f"{entry['path']}: {named}: {problem}")
            cases.append(cast("Case", case))
    ids = [case["id"] for case in cases]
    duplicates = sorted({case_id for case_id in ids if ids.count(case_id) > 1})
    if duplicates:
        raise VectorError(f"duplicate case IDs: {', '.join(duplicates)}")
    return cases


@dataclass(frozen=True)
class CaseResult:
    """The outcome of one case: ``passed``, ``failed``, ``not-run``, ``skipped``, ``not-observed``.

    ``deviation`` is marked later, from the deviation list.
    """

    case_id: str
    clauses: list[str]
    outcome: str
    detail: str = ""
    #: A replay case's relative error from the model, and its bound (RB-REPLAY-1).
    distance: float | None = None
    bound: float | None = None
    #: The line sent, where it is not the case's own (a race asked for its spans).
    sent: str | None = None


def _judge(case: Case, reply: dict[str, object], /, sent: str | None = None) -> CaseResult:
    if any(reply_matches(reply, expected) for expected in case["expected"]):
        return CaseResult(case["id"], case["clauses"], "passed", sent=sent)
    shown = " or ".join(encode(expected) for expected in case["expected"])
    line = sent or case.get("line", encode(case["request"]))
    detail = f"request {line}\nreplied {encode(reply)}\nexpected {shown}"
    return CaseResult(case["id"], case["clauses"], "failed", detail, sent=sent)


def is_contested_race(case: Case, /) -> bool:
    """Whether ``case`` is a race a racy cell could lose: more than one winner is allowed.

    A race of readers alone, or of writers of one mode, returns the same
    whoever wins, so only its reply is judged.
    """
    return case["request"].get("op") == "race" and len(case["expected"]) > 1


#: A contested race not seen to overlap is sent again, each time to a fresh
#: process, until two calls overlap: at most this many sends in all, and
#: none begun later than this many seconds after its first. A compiled
#: adapter gets all its sends (milliseconds each); a Python one, whose
#: process starts in a tenth of a second, one: no run of the reference slows.
_MOST_RACE_SENDS: Final = 10
_RACE_SECONDS: Final = 0.05


def _asking_spans(case: Case, /) -> tuple[dict[str, object], str | None]:
    # A case whose exact text matters is sent as it is, asking or not.
    if "line" in case:
        return case["request"], case["line"]
    return {**case["request"], SPANS: True}, None


def _run_race(
    driver: SubprocessDriver, case: Case, /, *, required: bool, one_interpreter_lock: bool
) -> CaseResult:
    """A contested race, judged as ``check`` judges its races: seen, lost, or not observed.

    Raises:
        AdapterFailure: the adapter broke on the race.
    """
    request, line = _asking_spans(case)
    sent = line if line is not None else encode(request)
    events = request["events"]
    calls = len(events) if isinstance(events, list) else 0
    tally = RaceTally(
        "sends of this race", "send of this race", one_interpreter_lock=one_interpreter_lock
    )
    started = time.monotonic()
    while True:
        reply = driver.request(request, line=line)
        judged = _judge(case, reply, sent)
        if judged.outcome == "failed":
            return judged
        try:
            spans = reply_spans(reply, calls=calls) if request.get(SPANS) is True else None
        except MalformedSpansError as error:
            detail = (
                f'request {sent}\nreplied {encode(reply)}\nexpected no "{SPANS}", or '
                f"[START, END] per call (docs/protocol-race-evidence.md): {error}"
            )
            return CaseResult(case["id"], ["RB-PROTO-3"], "failed", detail, sent=sent)
        tally.add(None if spans is None else spans[0])
        # An adapter that gives no spans cannot be shown a race by sending again.
        spent = time.monotonic() - started > _RACE_SECONDS
        if tally.overlapping or spans is None or tally.races >= _MOST_RACE_SENDS or spent:
            break
    verdict = judge_races(tally, required=required)
    outcome = verdict.outcome.value
    return CaseResult(case["id"], case["clauses"], outcome, verdict.detail, sent=sent)


#: A judge of one case's reply, for cases not judged by their expected replies.
Judge = Callable[[dict[str, object]], CaseResult]


#: A case not run because the run stopped at a failure (``vectors run --exitfirst``).
STOPPED: Final = "not run (the run stopped at the first failure, case {})"
#: ``vectors run --exitfirst``'s help.
EXITFIRST_HELP: Final = (
    "stop at the first failed case that --deviations does not list, sending each case "
    "alone; the cases after it are reported as not run"
)


def _run_until(  # noqa: PLR0913 (the run's settings, each its own)
    driver: SubprocessDriver,
    cases: Sequence[Case],
    judges: Mapping[str, Judge],
    stop: Callable[[CaseResult], bool],
    /,
    *,
    require_race: bool,
    one_interpreter_lock: bool,
) -> list[CaseResult]:
    """Each case in turn, one request at a time, until a result ``stop`` takes; the rest not run.

    An adapter that breaks on a case stops the run there too.
    """
    results: list[CaseResult] = []
    stopped: str | None = None
    for case in cases:
        if stopped is not None:
            detail = STOPPED.format(stopped)
            results.append(CaseResult(case["id"], case["clauses"], "not-run", detail))
            continue
        try:
            if is_contested_race(case):
                result = _run_race(
                    driver, case, required=require_race, one_interpreter_lock=one_interpreter_lock
                )
            else:
                reply = driver.request(case["request"], line=case.get("line"))
                judge = judges.get(case["id"])
                result = judge(reply) if judge is not None else _judge(case, reply)
        except AssertionError as failure:
            result = CaseResult(case["id"], case["clauses"], "failed", str(failure))
            stopped = case["id"]
        results.append(result)
        if stop(result):
            stopped = case["id"]
    return results


def run_cases(  # noqa: PLR0913 (each a setting of the run)
    driver: SubprocessDriver,
    cases: Sequence[Case],
    /,
    judges: Mapping[str, Judge] | None = None,
    *,
    require_race: bool = False,
    one_interpreter_lock: bool = False,
    stop: Callable[[CaseResult], bool] | None = None,
) -> list[CaseResult]:
    """Run every case; stateless ones pipelined through one process.

    With ``stop``, each case is sent alone, in order, and the run stops at the
    first result it takes: every later case is "not run" (:data:`STOPPED`).

    A case named in ``judges`` is judged by its judge (the replay cases,
    within a tolerance); every other by its expected replies. A contested
    race (:func:`is_contested_race`) also needs two of its calls seen to
    overlap: else it is not observed, or, with ``require_race``, failed.
    ``one_interpreter_lock`` says the adapter is the package's Python adapter,
    whose races not seen are explained rather than given advice.

    When the adapter breaks on a case, that case fails with what happened, and
    every later case of its batch is "not run", naming the case it broke on.

    Raises:
        VectorError: a case got no result (a driver answered fewer than asked).
    """
    if stop is not None:
        return _run_until(
            driver,
            cases,
            judges or {},
            stop,
            require_race=require_race,
            one_interpreter_lock=one_interpreter_lock,
        )
    return _run_pipelined(
        driver,
        cases,
        judges,
        require_race=require_race,
        one_interpreter_lock=one_interpreter_lock,
    )


def _run_pipelined(
    driver: SubprocessDriver,
    cases: Sequence[Case],
    judges: Mapping[str, Judge] | None,
    /,
    *,
    require_race: bool,
    one_interpreter_lock: bool,
) -> list[CaseResult]:
    """:func:`run_cases` without a stop: stateless cases pipelined, then the stateful in turn.

    Raises:
        VectorError: a case got no result (a driver answered fewer than asked).
    """
    stateless = [case for case in cases if not is_stateful(case["request"])]
    stateful = [case for case in cases if is_stateful(case["request"])]
    replies: list[dict[str, object] | AdapterFailure | CaseResult] = list(
        driver.request_many(
            [case["request"] for case in stateless], [case.get("line") for case in stateless]
        )
    )
    for case in stateful:
        try:
            if is_contested_race(case):
                replies.append(
                    _run_race(
                        driver,
                        case,
                        required=require_race,
                        one_interpreter_lock=one_interpreter_lock,
                    )
                )
            else:
                replies.append(driver.request(case["request"], line=case.get("line")))
        except AssertionError as failure:
            replies.append(cast("AdapterFailure", failure))
    results: dict[str, CaseResult] = {}
    broke_on: dict[int, str] = {}
    # Not strict: a driver that answers fewer cases than it was sent leaves
    # those cases unrecorded, and the check below names them.
    for case, reply in zip([*stateless, *stateful], replies, strict=False):
        if isinstance(reply, BaseException):
            first = broke_on.setdefault(id(reply), case["id"])
            if first == case["id"]:
                outcome = CaseResult(case["id"], case["clauses"], "failed", str(reply))
            else:
                how = "hung" if getattr(reply, "hung", False) else "broke"
                detail = f"not run (the adapter {how} at case {first})"
                outcome = CaseResult(case["id"], case["clauses"], "not-run", detail)
            results[case["id"]] = outcome
        elif isinstance(reply, CaseResult):
            results[case["id"]] = reply
        elif judges is not None and case["id"] in judges:
            results[case["id"]] = judges[case["id"]](reply)
        else:
            results[case["id"]] = _judge(case, reply)
    missing = [case["id"] for case in cases if case["id"] not in results]
    if missing:
        raise VectorError(f"cases that got no result: {', '.join(missing)}")
    return [results[case["id"]] for case in cases]
