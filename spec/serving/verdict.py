# SPDX-License-Identifier: MIT OR Apache-2.0
"""The run's verdict, its lines for a maintainer, its JSON report and its reproducer.

``PASS`` needs drafts accepted: a target that accepted none (or whose
counters cannot be read) never rolled back anything the run could judge, so
its verdict is ``NOT OBSERVED``, with the reason, as a race's is.
"""

from __future__ import annotations

import enum
import json
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypedDict

from .. import SPEC_VERSION
from .judge import Outcome

if TYPE_CHECKING:
    from .client import Server
    from .run import Run
    from .shrink import Shrunk
    from .workload import Request

__all__ = [
    "CLAUSES",
    "CaseEntry",
    "ServeReport",
    "Verdict",
    "VerdictKind",
    "curl_line",
    "decide",
    "lines",
    "report_document",
    "reproducer_lines",
]

#: The clause each request is judged on: rollback is plain decoding (SPEC.md).
CLAUSES: Final = ("RB-REPLAY-14",)


class VerdictKind(enum.Enum):
    """The run's verdict, as its first line says it."""

    PASS = "PASS"  # noqa: S105 - a verdict, no secret
    FAIL = "FAIL"
    NOT_OBSERVED = "NOT OBSERVED"


@dataclass(frozen=True)
class Verdict:
    """The verdict and the one line that says why."""

    kind: VerdictKind
    reason: str


def decide(run: Run, /) -> Verdict:
    """The run's verdict: a failure first, then whether any draft was accepted."""
    failed = [r for r in run.results if r.outcome is Outcome.FAILED]
    inconclusive = sum(r.outcome is Outcome.INCONCLUSIVE for r in run.results)
    if run.target.failure is not None:
        return Verdict(VerdictKind.FAIL, str(run.target.failure))
    if failed:
        return Verdict(
            VerdictKind.FAIL,
            f"{len(failed)} of {len(run.results)} requests generate otherwise with speculation",
        )
    if run.target.accepted is None:
        return Verdict(
            VerdictKind.NOT_OBSERVED,
            f"the target's acceptance counters cannot be read (dialect {run.dialect}): "
            "no run can show that it rolled back",
        )
    if run.target.accepted <= 0:
        return Verdict(
            VerdictKind.NOT_OBSERVED,
            f"the target accepted no drafts ({run.target.drafted:g} drafted): nothing was "
            "rolled back past an accepted draft",
        )
    if inconclusive == len(run.results):
        return Verdict(VerdictKind.NOT_OBSERVED, "every request ended in a near tie")
    return Verdict(
        VerdictKind.PASS,
        f"{len(run.results) - inconclusive} of {len(run.results)} requests generate the same "
        f"with speculation ({inconclusive} inconclusive near ties)",
    )


def curl_line(server: Server, request: Request, top: int, /) -> str:
    """A ``curl`` command that asks ``server`` for ``request`` as the run did."""
    body = json.dumps(server.body(request, top), separators=(",", ":"))
    return (
        f"curl -s {shlex.quote(server.url + server.dialect.path)} "
        f"-H 'Content-Type: application/json' -d {shlex.quote(body)}"
    )


def reproducer_lines(
    reference: Server, target: Server, requests: tuple[Request, ...], top: int, /
) -> list[str]:
    """The failing set as a ``--prompts`` file's lines, and a ``curl`` line a request and server."""
    found = [
        "requests (a --prompts file; sent at once):",
        *(
            "  " + json.dumps({"prompt": r["prompt"], "max_tokens": r["max_tokens"], "batch": 0})
            for r in requests
        ),
    ]
    for number, request in enumerate(requests):
        found.append(f"request {number}, reference: {curl_line(reference, request, top)}")
        found.append(f"request {number}, target: {curl_line(target, request, top)}")
    return found


def _counted(run: Run, index: int, /) -> str:
    counted = run.target.counted.get(index)
    if counted is None:
        return "counters alone: unknown"
    return f"alone, the target drafted {counted[0]:g} and accepted {counted[1]:g}"


def _calibration_may_help(run: Run, verdict: Verdict, /) -> bool:
    """Whether requests failed by their logprobs in a run no never-drafting server calibrated."""
    if verdict.kind is not VerdictKind.FAIL or run.target.failure is not None:
        return False
    return "never-drafting target against reference" not in run.noise.sources


def lines(run: Run, verdict: Verdict, shrunk: Shrunk | None, reproducer: list[str], /) -> list[str]:
    """What the command prints: the verdict, the bound, the counters, failures, reproducer."""
    noise = run.noise
    how = ", ".join(f"{name} {value:.3g}" for name, value in noise.sources.items())
    aside = ", ".join(f"{name} {value:.3g}" for name, value in noise.reported.items())
    exact = " (exact: the engine is bit-stable here)" if noise.bound == 0 else ""
    found = [
        f"serve-check: {verdict.kind.value}: {verdict.reason}",
        (
            f"model {run.model!r}, dialect {run.dialect}, {len(run.workload.requests)} requests "
            f"in {len(run.workload.batches)} batches, {run.seconds:.1f} s"
        ),
        f"noise bound: {noise.bound:.6g}{exact} = {noise.factor:g} x the largest of: {how}",
        f"not in the bound, since a rollback is involved: {aside}",
    ]
    target = run.target
    if target.accepted is not None:
        found.append(
            f"target drafts: {target.drafted:g} drafted, {target.accepted:g} accepted "
            f"({target.counted_from})"
        )
    inconclusive = [r for r in run.results if r.outcome is Outcome.INCONCLUSIVE]
    found.append(f"inconclusive near ties: {len(inconclusive)}")
    for result in run.results:
        if result.outcome is Outcome.FAILED:
            where, comparison = result.worst
            found.append(
                f"FAIL request {result.index} ({where}): {comparison.sentence()}; "
                f"{_counted(run, result.index)}"
            )
    for result in inconclusive:
        where, comparison = result.worst
        found.append(f"NEAR TIE request {result.index} ({where}): {comparison.sentence()}")
    if _calibration_may_help(run, verdict):
        found.append(
            "hint: no server calibrated the bound: if the engine's verify path rounds otherwise "
            "than its decode path, judge again with --calibrate URL (the engine speculating "
            "with a drafter that never drafts); a failure that stays is no rounding"
        )
    if shrunk is not None:
        found.append(
            f"shrunk in {shrunk.tries} tries to {len(shrunk.requests)} request(s); "
            f"request {shrunk.focus} of them fails"
        )
    found += reproducer
    return found


class CaseEntry(TypedDict):
    """One request's entry of the JSON report, as ``report`` reads a case."""

    id: str
    clauses: list[str]
    outcome: str
    detail: str
    distance: float
    bound: float


class ServeReport(TypedDict):
    """The JSON report (schema: ``serving/schemas/serve-report.schema.json``)."""

    command: str
    implementation: str
    describe: dict[str, str]
    spec_version: str
    verdict: str
    reason: str
    bound: float
    noise: dict[str, float]
    #: Differences measured but kept out of the bound (a rollback is involved).
    reported: dict[str, float]
    drafted: float | None
    accepted: float | None
    cases: list[CaseEntry]
    reproducer: list[str]


def report_document(  # noqa: PLR0913 - the run, its verdict and what the report adds
    run: Run,
    verdict: Verdict,
    target: Server,
    release: str,
    reproducer: list[str],
    /,
    *,
    name: str | None = None,
) -> ServeReport:
    """The JSON report: one case a request, in the form ``report`` reads, and the run's figures."""
    cases: list[CaseEntry] = []
    for result in run.results:
        where, comparison = result.worst
        outcome = {
            Outcome.PASSED: "passed",
            Outcome.FAILED: "failed",
            Outcome.INCONCLUSIVE: "not-observed",
        }[result.outcome]
        detail = f"{where}: {comparison.sentence()}"
        if outcome == "passed" and verdict.kind is VerdictKind.NOT_OBSERVED:
            outcome, detail = "not-observed", f"not observed: {verdict.reason}"
        elif outcome == "not-observed":
            detail = f"not observed: a near tie within the noise bound; {detail}"
        cases.append(
            {
                "id": f"request-{result.index}",
                "clauses": list(CLAUSES),
                "outcome": outcome,
                "detail": detail,
                "distance": comparison.drift,
                "bound": comparison.bound,
            }
        )
    if run.target.failure is not None:
        cases.append(
            {
                "id": "target-server",
                "clauses": list(CLAUSES),
                "outcome": "failed",
                "detail": str(run.target.failure),
                "distance": 0.0,
                "bound": run.noise.bound,
            }
        )
    if name is None:
        name = f"{run.dialect} served ({run.model})"
    return {
        "command": "serve-check",
        "implementation": target.url,
        "describe": {"name": name, "release": release},
        "spec_version": SPEC_VERSION,
        "verdict": verdict.kind.value,
        "reason": verdict.reason,
        "bound": run.noise.bound,
        "noise": dict(run.noise.sources),
        "reported": dict(run.noise.reported),
        "drafted": run.target.drafted,
        "accepted": run.target.accepted,
        "cases": cases,
        "reproducer": reproducer,
    }
