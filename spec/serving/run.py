# SPDX-License-Identifier: MIT OR Apache-2.0
"""A whole serve-check run: the servers checked, the workload sent, the noise measured, the verdict.

The run sends every request of the workload four times: in its batch and
alone, to the reference and to the target. The runs alone are plain decoding
of each request (the truth each target run is judged by, composition for
composition), and the two compositions measure the arithmetic's noise
(:func:`measure_noise`). A third server (``--calibrate``), the target's
engine speculating with a drafter that never drafts, adds the noise of its
verify path where no rollback can be involved.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from .errors import ServerFailedError, ServersDifferError
from .judge import Comparison, Outcome, compare, noise

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from .client import Counters, Generation, Server
    from .dialects import Dialect
    from .workload import Request, Workload

__all__ = [
    "Noise",
    "Observed",
    "Options",
    "RequestResult",
    "Run",
    "judge_requests",
    "measure_noise",
    "observe",
    "prepare",
    "run",
    "send",
    "still_fails",
]

#: The figures of a model's entry two servers of one model must share, where both give them.
_SHARED_FIGURES: Final = ("n_vocab", "vocab_size", "n_ctx_train", "n_embd")


@dataclass(frozen=True)
class Options:
    """How to run: logprobs asked, the deadline of each request, the bound's factor."""

    top: int = 5
    factor: float = 3.0
    #: Called with one line of progress, or None for a quiet run.
    progress: Callable[[str], None] | None = None


def prepare(
    servers: Sequence[Server], /, *, model: str | None, dialect: Dialect | None
) -> tuple[str, str]:
    """Check that every server answers, and serves one model; return it and the dialect's name.

    Raises:
        ServerUnreachableError, NotOpenAICompatibleError: a server as :meth:`Server.served` says.
        ServersDifferError: the servers serve different models, or ``model`` is not served.
    """
    served = [server.served() for server in servers]
    if model is None:
        firsts = {entry.models[0] for entry in served}
        if len(firsts) != 1:
            listed = "; ".join(
                f"{server.flag} serves {entry.models[0]!r}"
                for server, entry in zip(servers, served, strict=True)
            )
            raise ServersDifferError(f"the servers serve different models: {listed}")
        model = firsts.pop()
    for server, entry in zip(servers, served, strict=True):
        if model not in entry.models:
            raise ServersDifferError(
                f"{server.flag} {server.url} does not serve model {model!r} "
                f"(it serves {', '.join(map(repr, entry.models))})"
            )
    for figure in _SHARED_FIGURES:
        values = {
            server.flag: entry.meta[figure]
            for server, entry in zip(servers, served, strict=True)
            if figure in entry.meta
        }
        if len(set(map(str, values.values()))) > 1:
            listed = ", ".join(f"{flag} {value}" for flag, value in values.items())
            raise ServersDifferError(f"the servers' models differ in {figure}: {listed}")
    for server, entry in zip(servers, served, strict=True):
        server.adopt(entry, model, dialect)
    names = {server.dialect.name for server in servers}
    if len(names) != 1:
        listed = ", ".join(f"{server.flag} {server.dialect.name}" for server in servers)
        raise ServersDifferError(f"the servers are different engines: {listed}")
    return model, names.pop()


def send(
    server: Server, workload: Workload, batch: Sequence[int], top: int, /
) -> dict[int, Generation]:
    """The requests of ``batch`` sent to ``server`` at once, each on a thread of its own.

    Raises:
        ServerFailedError: a request failed; of several, the first (by request
            number) that the server answered with an error, which says what
            went wrong, ahead of the connections its death cut.
    """
    answers: dict[int, Generation] = {}
    failures: dict[int, ServerFailedError] = {}

    def one(index: int) -> None:
        try:
            answers[index] = server.complete(workload.requests[index], top, number=index)
        except ServerFailedError as error:
            failures[index] = error

    threads = [threading.Thread(target=one, args=(index,), daemon=True) for index in batch]
    for thread in threads:
        thread.start()
    # Each request has its own deadline (Server.timeout), so every thread ends.
    for thread in threads:
        thread.join()
    if failures:
        first = min(failures, key=lambda index: (not failures[index].answered, index))
        raise failures[first]
    return answers


@dataclass
class Observed:
    """The runs of one server: each request in its batch, and alone."""

    batched: dict[int, Generation] = field(default_factory=dict)
    alone: dict[int, Generation] = field(default_factory=dict)
    #: Per request, the target's counters while it ran alone (drafted, accepted).
    counted: dict[int, tuple[float, float]] = field(default_factory=dict)
    #: The counters over the whole run; None where the server exposes none.
    drafted: float | None = None
    accepted: float | None = None
    #: How the counters were read.
    counted_from: str = ""
    #: A target failure met on the way (the run stops there).
    failure: ServerFailedError | None = None
    failed_batch: tuple[int, ...] = ()


def _difference(before: Counters | None, after: Counters | None, /) -> tuple[float, float] | None:
    if before is None or after is None:
        return None
    return after.drafted - before.drafted, after.accepted - before.accepted


def observe(server: Server, workload: Workload, options: Options, /) -> Observed:
    """Every request of ``workload`` sent to ``server`` in its batch, then alone.

    A reference's failure is raised; a target's is kept in the result, and ends its runs.

    Raises:
        ServerFailedError: the reference failed a request.
    """
    seen = Observed()
    start = server.counters()
    from_responses = bool(server.dialect.drafted_field)
    try:
        for batch in workload.batches:
            seen.failed_batch = batch
            seen.batched |= send(server, workload, batch, options.top)
            _say(options, f"{server.role}: batch of {len(batch)} served")
        for index in range(len(workload.requests)):
            seen.failed_batch = (index,)
            before = server.counters()
            seen.alone |= send(server, workload, (index,), options.top)
            counted = _difference(before, server.counters())
            generation = seen.alone[index]
            if counted is None and generation.drafted is not None:
                counted = (float(generation.drafted), float(generation.accepted or 0))
            if counted is not None:
                seen.counted[index] = counted
        seen.failed_batch = ()
    except ServerFailedError as error:
        if server.role != "target":
            raise
        seen.failure = error
    whole = _difference(start, server.counters())
    if whole is not None:
        seen.drafted, seen.accepted = whole
        seen.counted_from = (
            f"{server.dialect.drafted_metric} and {server.dialect.accepted_metric} on /metrics"
        )
    elif from_responses:
        runs = [*seen.batched.values(), *seen.alone.values()]
        seen.drafted = float(sum(run.drafted or 0 for run in runs))
        seen.accepted = float(sum(run.accepted or 0 for run in runs))
        fields = ".".join(server.dialect.drafted_field), ".".join(server.dialect.accepted_field)
        seen.counted_from = f"{fields[0]} and {fields[1]} of the responses"
    return seen


def _say(options: Options, line: str, /) -> None:
    if options.progress is not None:
        options.progress(line)


@dataclass(frozen=True)
class Noise:
    """The arithmetic's noise as measured, by source, and the bound it gives."""

    #: Each source the bound is drawn from, and its noise.
    sources: dict[str, float]
    #: Differences measured but kept out of the bound, since a rollback is involved.
    reported: dict[str, float]
    factor: float

    @property
    def bound(self) -> float:
        """The bound every comparison is judged within: the factor times the largest source."""
        return self.factor * max(self.sources.values(), default=0.0)


def _pairs(first: dict[int, Generation], second: dict[int, Generation], /) -> list[float]:
    return [noise(first[i], second[i]) for i in sorted(first.keys() & second.keys())]


def measure_noise(
    reference: Observed, target: Observed, calibration: Observed | None, factor: float, /
) -> Noise:
    """The noise of the engine's arithmetic, measured on servers that never roll back.

    The bound is drawn from the reference alone against the reference in its
    batch (the decode path under another composition) and, with a
    calibration server (the target's engine with a drafter that never drafts),
    its runs against the reference's at every position (a verify path that
    never rolls back); each source's largest difference.

    Two more are reported, never used, since the target's rollback bookkeeping
    is in them: the first token, reference against target (the state a
    verify starts from is chosen by the same counts a rollback keeps: vLLM's
    served build with an accepted count one too many differs from its second
    position on), and the target alone against the target in its batch (a
    fault whose effect follows the batch would widen the bound it is judged by).
    """
    sources = {
        "reference alone against in a batch": max(
            _pairs(reference.alone, reference.batched), default=0.0
        ),
    }
    if calibration is not None:
        sources["never-drafting target against reference"] = max(
            _pairs(calibration.batched, reference.batched), default=0.0
        )
    reported = {
        "first token, reference against target": max(
            (
                noise(reference.batched[i], target.batched[i], positions=1)
                for i in sorted(reference.batched.keys() & target.batched.keys())
            ),
            default=0.0,
        ),
        "target alone against in a batch": max(_pairs(target.alone, target.batched), default=0.0),
    }
    return Noise(sources=sources, reported=reported, factor=factor)


@dataclass(frozen=True)
class RequestResult:
    """One request's judgement: its two comparisons (in its batch, alone), worst first."""

    index: int
    comparisons: tuple[tuple[str, Comparison], ...]

    @property
    def outcome(self) -> Outcome:
        """The worst of its comparisons' outcomes."""
        order = list(Outcome)
        return max((c.outcome for _, c in self.comparisons), key=order.index)

    @property
    def worst(self) -> tuple[str, Comparison]:
        """The comparison that decided the outcome."""
        return next((w, c) for w, c in self.comparisons if c.outcome is self.outcome)


def judge_requests(reference: Observed, target: Observed, bound: float, /) -> list[RequestResult]:
    """Each request's target runs judged against the reference's in the same composition."""
    results = []
    for index in sorted(reference.batched):
        comparisons = [
            (where, compare(reference_runs[index], target_runs[index], bound=bound))
            for where, reference_runs, target_runs in (
                ("in its batch", reference.batched, target.batched),
                ("alone", reference.alone, target.alone),
            )
            if index in target_runs and index in reference_runs
        ]
        if comparisons:
            results.append(RequestResult(index, tuple(comparisons)))
    return results


@dataclass(frozen=True)
class Run:
    """A whole run's observations and judgements, before shrinking and reporting."""

    model: str
    dialect: str
    workload: Workload
    reference: Observed
    target: Observed
    noise: Noise
    results: tuple[RequestResult, ...]
    seconds: float = field(default=0.0)


def run(  # noqa: PLR0913 - the servers, the work and how, each its own
    reference: Server,
    target: Server,
    workload: Workload,
    options: Options,
    /,
    *,
    calibration: Server | None = None,
    model: str | None = None,
    dialect: Dialect | None = None,
) -> Run:
    """Check the servers, send the workload to each, measure the noise and judge every request.

    Raises:
        ServerUnreachableError, NotOpenAICompatibleError, ServersDifferError: as :func:`prepare`.
        ServerFailedError: the reference (or the calibration server) failed a request.
    """
    started = time.perf_counter()
    servers = [reference, target, *([] if calibration is None else [calibration])]
    chosen, name = prepare(servers, model=model, dialect=dialect)
    referenced = observe(reference, workload, options)
    targeted = observe(target, workload, options)
    calibrated = None if calibration is None else observe(calibration, workload, options)
    measured = measure_noise(referenced, targeted, calibrated, options.factor)
    results = judge_requests(referenced, targeted, measured.bound)
    return Run(
        model=chosen,
        dialect=name,
        workload=workload,
        reference=referenced,
        target=targeted,
        noise=measured,
        results=tuple(results),
        seconds=time.perf_counter() - started,
    )


def still_fails(  # noqa: PLR0913, PLR0917 - one try, as the run judged
    reference: Server,
    target: Server,
    requests: Sequence[Request],
    focus: int,
    bound: float,
    top: int,
    /,
) -> bool:
    """Whether request ``focus`` of ``requests`` still fails, sent at once with the others.

    The reference serves ``requests[focus]`` alone (plain decoding); the target,
    every request at once.
    """
    from .workload import Workload  # noqa: PLC0415 - the dataclass only

    workload = Workload(tuple(requests), (tuple(range(len(requests))),))
    truth = send(reference, workload, (focus,), top)[focus]
    served = send(target, workload, workload.batches[0], top)[focus]
    return compare(truth, served, bound=bound).outcome is Outcome.FAILED
