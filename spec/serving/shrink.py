# SPDX-License-Identifier: MIT OR Apache-2.0
"""A failing set of requests, shrunk to the smallest that still fails.

From the first failing request, in its batch or alone as it failed: each
other request of the batch is dropped while the failure stays; then its
output is cut to the position it failed at; then chunks of its prompt are
dropped, halves first. Every try is judged as the run judged it (the
reference serving the request alone, the target the whole set at once), and
the tries are bounded (``--shrink-tries``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import ServerFailedError
from .judge import Outcome
from .run import send, still_fails

if TYPE_CHECKING:
    from collections.abc import Callable

    from .client import Server
    from .run import Run
    from .workload import Request

__all__ = ["Shrunk", "shrink", "shrink_crash"]


@dataclass(frozen=True)
class Shrunk:
    """The smallest failing set found: its requests (sent at once), which one fails, the tries."""

    requests: tuple[Request, ...]
    focus: int
    tries: int
    #: The original request's index in the run's workload.
    index: int


def shrink(
    reference: Server, target: Server, run: Run, /, *, tries: int, top: int
) -> Shrunk | None:
    """The first failing request's set, shrunk within ``tries`` tries; None where nothing failed.

    A target that fails a try by dying ends the shrinking where it stands.

    Raises:
        ServerFailedError: the reference failed a request.
    """
    failing = next((r for r in run.results if r.outcome is Outcome.FAILED), None)
    if failing is None:
        return None
    where, comparison = failing.worst
    batch = next(b for b in run.workload.batches if failing.index in b)
    members = (failing.index,) if where == "alone" else batch
    requests = [run.workload.requests[i] for i in members]
    focus = members.index(failing.index)
    spent = 0

    def fails(candidate: list[Request], at: int) -> bool:
        nonlocal spent
        spent += 1
        return still_fails(reference, target, candidate, at, run.noise.bound, top)

    try:
        position = 0
        while position < len(requests) and spent < tries:
            if position == focus:
                position += 1
                continue
            candidate = requests[:position] + requests[position + 1 :]
            at = focus - (position < focus)
            if fails(candidate, at):
                requests, focus = candidate, at
            else:
                position += 1
        last = comparison.position if comparison.position is not None else comparison.drift_position
        if last is not None and last + 1 < requests[focus]["max_tokens"] and spent < tries:
            cut = [*requests]
            cut[focus] = {"prompt": cut[focus]["prompt"], "max_tokens": last + 1}
            if fails(cut, focus):
                requests = cut
        requests = _shrink_prompt(requests, focus, tries, fails, lambda: spent)
    except ServerFailedError as error:
        if error.role != "target":
            raise
    return Shrunk(tuple(requests), focus, spent, failing.index)


def _shrink_prompt(
    requests: list[Request],
    focus: int,
    tries: int,
    fails: Callable[[list[Request], int], bool],
    spent: Callable[[], int],
    /,
) -> list[Request]:
    prompt = requests[focus]["prompt"]
    if not isinstance(prompt, list):
        return requests
    chunk = len(prompt) // 2
    while chunk >= 1 and spent() < tries:
        start = 0
        while start < len(prompt) and spent() < tries:
            shorter = prompt[:start] + prompt[start + chunk :]
            candidate = [*requests]
            candidate[focus] = {"prompt": shorter, "max_tokens": requests[focus]["max_tokens"]}
            if shorter and fails(candidate, focus):
                prompt, requests = shorter, candidate
            else:
                start += chunk
        chunk //= 2
    return requests


def _crashes(target: Server, requests: list[Request], top: int, /) -> bool:
    from .workload import Workload  # noqa: PLC0415 - the dataclass only

    workload = Workload(tuple(requests), (tuple(range(len(requests))),))
    try:
        send(target, workload, workload.batches[0], top)
    except ServerFailedError as error:
        if error.role == "target":
            return True
        raise
    return False


def shrink_crash(
    target: Server,
    run: Run,
    restart: Callable[[], None],
    /,
    *,
    tries: int,
    top: int,
) -> Shrunk:
    """The smallest set of the batch a target died on that still kills it.

    ``restart`` starts the target again (it died in the run, and dies again in
    every try that still fails). Each request of the batch is tried alone,
    shortest prompt first; where none kills it alone, the requests of the batch
    are dropped one at a time while the rest still kill it.

    Raises:
        ServerFailedError: the reference failed a request.
        ServerStartError: the target could not be started again.
    """
    batch = run.target.failed_batch
    requests = [run.workload.requests[i] for i in batch]
    spent = 0
    if len(requests) == 1:
        return Shrunk(tuple(requests), 0, spent, batch[0])
    restart()

    def length(index: int) -> int:
        prompt = requests[index]["prompt"]
        return len(prompt)

    for index in sorted(range(len(requests)), key=length):
        if spent >= tries:
            break
        spent += 1
        if _crashes(target, [requests[index]], top):
            return Shrunk((requests[index],), 0, spent, batch[index])
    # None dies alone: the requests it dies on together, one dropped at a time.
    kept = list(range(len(requests)))
    position = 0
    while position < len(kept) and len(kept) > 2 and spent < tries:
        candidate = kept[:position] + kept[position + 1 :]
        spent += 1
        if _crashes(target, [requests[i] for i in candidate], top):
            kept = candidate
            restart()
        else:
            position += 1
    return Shrunk(tuple(requests[i] for i in kept), 0, spent, batch[kept[0]])
