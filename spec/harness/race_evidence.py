# SPDX-License-Identifier: MIT OR Apache-2.0
"""Evidence that a race was run: the racing calls' spans, and whether two overlapped.

A race whose calls never overlapped tested nothing, however it came out: a
check-then-set loses only when two calls are inside it at once. An adapter
asked for ``spans`` (docs/protocol-race-evidence.md) returns each
call's start and end on its monotonic clock, read around the call itself;
a round counts as a race seen when two of its calls' spans intersect.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from .protocol import SPANS, encode_value

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "NOT_OBSERVED",
    "REQUIRE_RACE_HELP",
    "MalformedSpansError",
    "RaceNotSeenError",
    "RaceOutcome",
    "RaceTally",
    "RaceVerdict",
    "Span",
    "judge_races",
    "overlapped",
    "reply_spans",
]

#: How every not-observed verdict's reason opens: ``check`` reads a skip
#: whose reason opens so as the outcome ``not-observed``.
NOT_OBSERVED: Final = "not observed: "

#: What ``--require-race`` does, in ``check``, ``vectors run`` and the suite's pytest plugin.
REQUIRE_RACE_HELP: Final = (
    "fail a race property or case (RB-PUB-4) that saw no two racing calls overlap, "
    "rather than report it NOT OBSERVED"
)

#: What an adapter can do about a race the suite did not see: give spans,
#: release its racers so that they meet, race more often.
_GIVE_SPANS: Final = "give each racing call's span"
_RELEASE: Final = "release the racers together from a spinning barrier"
_OFFER_CELLS: Final = "offer race_cells, which races fresh cells thousands of times in one process"
_WHERE: Final = "(docs/protocol-race-evidence.md)"
#: Why the package's own Python adapter is rarely seen to race, in place of
#: advice: its authors are not the user's, and no release of its threads helps.
_ONE_LOCK: Final = (
    "the package's Python adapter races threads under one interpreter lock, "
    "so two calls overlap only when the interpreter switches threads inside one, "
    "which few of its races see: the interpreter's limit, not an adapter's to fix, "
    "so --require-race is not for it"
)

_U64_MAX: Final = 2**64 - 1

#: One call's start and end, in nanoseconds on the adapter's monotonic clock.
Span = tuple[int, int]


class MalformedSpansError(ValueError):
    """A reply's ``spans`` that are not one ``[start, end]`` per call (RB-PROTO-3)."""


class RaceNotSeenError(AssertionError):
    """A race not observed where one was required (``--require-race``): a failure of RB-PUB-4."""

    def __init__(self, reason: str, /) -> None:
        super().__init__(f"--require-race: {reason}")
        self.clauses: Final = ("RB-PUB-4",)


def _span(value: object, where: str, /) -> Span:
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(type(part) is int and 0 <= part <= _U64_MAX for part in value)
        or value[0] > value[1]
    ):
        raise MalformedSpansError(
            f"{where} must be [START, END], integers in [0, {_U64_MAX}] with START <= END,"
            f" got {encode_value(value)}"
        )
    return (value[0], value[1])


def _round(value: object, calls: int, where: str, /) -> list[Span]:
    if not isinstance(value, list) or len(value) != calls:
        raise MalformedSpansError(
            f"{where} must be a list of {calls} spans, one per event, got {encode_value(value)}"
        )
    return [_span(span, f"{where}[{index}]") for index, span in enumerate(value)]


def reply_spans(
    reply: Mapping[str, object], /, *, calls: int, rounds: int | None = None
) -> list[list[Span]] | None:
    """Each round's spans, or None for a reply that carries none.

    ``rounds`` is None for a ``race`` (one round, its spans a flat list) and
    the number of rounds for a ``race_cells`` (a list of rounds).

    Raises:
        MalformedSpansError: the reply carries spans of the wrong shape.
    """
    if SPANS not in reply:
        return None
    value = reply[SPANS]
    if rounds is None:
        return [_round(value, calls, SPANS)]
    if not isinstance(value, list) or len(value) != rounds:
        raise MalformedSpansError(
            f"{SPANS} must be a list of {rounds} rounds, got {encode_value(value)}"
        )
    return [_round(round_, calls, f"{SPANS}[{index}]") for index, round_ in enumerate(value)]


def overlapped(spans: Sequence[Span], /) -> bool:
    """Whether two of the calls overlapped: each started before the other ended.

    Spans that only touch do not count: one call may have ended in the very
    nanosecond the other started.
    """
    latest_end: int | None = None
    for start, end in sorted(spans):
        if latest_end is not None and start < latest_end:
            return True
        latest_end = end if latest_end is None else max(latest_end, end)
    return False


@dataclass
class RaceTally:
    """What a run of races showed: how many ran, gave spans, and overlapped."""

    #: What the races are, as the verdict counts them ("races", "rounds of fresh cells").
    units: str
    #: What one is, for a count of one ("race", "round of fresh cells").
    unit: str
    #: Whether the verdict suggests race_cells (it does not to race_cells itself).
    suggest_cells: bool = False
    #: Whether the racers are the package's Python adapter's
    #: (``python -m ssm_rollback_spec.harness.adapter``), under one interpreter
    #: lock: the verdict then says why, rather than what to fix.
    one_interpreter_lock: bool = False
    races: int = 0
    with_spans: int = 0
    overlapping: int = 0

    def add(self, spans: Sequence[Span] | None, /) -> None:
        """Count one race, with its calls' spans or None for none given."""
        self.races += 1
        if spans is not None:
            self.with_spans += 1
            self.overlapping += overlapped(spans)

    def not_observed(self) -> str | None:
        """Why no race was seen, with what to do; None when one was.

        A race counts as seen when two of its calls overlapped; a race
        without spans cannot be shown to have overlapped.
        """
        if self.overlapping:
            return None
        many = f"{self.races} {self.unit if self.races == 1 else self.units}"
        if self.one_interpreter_lock and self.with_spans == self.races:
            why = f"in none of {many} did two calls overlap, and none lost"
            return f"{NOT_OBSERVED}{why}; {_ONE_LOCK} {_WHERE}"
        if not self.with_spans:
            why = f"none of {many} gave its calls' spans, so none is known to have overlapped"
            remedies = [_GIVE_SPANS]
        elif self.with_spans < self.races:
            why = (
                f"of {many}, the {self.with_spans} that gave their calls' spans"
                " had no two calls overlap and the rest gave none"
            )
            remedies = [_GIVE_SPANS, _RELEASE]
        else:
            why = f"in none of {many} did two calls overlap"
            remedies = [_RELEASE]
        remedy = " and ".join(remedies) + (f", or {_OFFER_CELLS}" if self.suggest_cells else "")
        return f"{NOT_OBSERVED}{why}, and none lost; {remedy} {_WHERE}"


class RaceOutcome(enum.Enum):
    """What a run of races comes to, as the reports of ``check`` and ``vectors run`` name it."""

    #: Two calls of a race overlapped, and none lost.
    SEEN = "passed"
    #: No race was seen, and none lost: no verdict on the cell (docs/protocol.md).
    NOT_OBSERVED = "not-observed"
    #: No race was seen where one was required (``--require-race``): a failure of RB-PUB-4.
    NOT_SEEN_REQUIRED = "failed"


@dataclass(frozen=True)
class RaceVerdict:
    """The verdict on a run of races none of which lost, the one both commands give."""

    #: Why no race was seen, with what to do; None when one was.
    reason: str | None
    #: Whether a race not seen fails (``--require-race``).
    required: bool

    @property
    def outcome(self) -> RaceOutcome:
        """The outcome the report gives."""
        if self.reason is None:
            return RaceOutcome.SEEN
        return RaceOutcome.NOT_SEEN_REQUIRED if self.required else RaceOutcome.NOT_OBSERVED

    @property
    def failure(self) -> RaceNotSeenError | None:
        """The failure a race required but not seen is, or None."""
        if self.reason is None or not self.required:
            return None
        return RaceNotSeenError(self.reason)

    @property
    def detail(self) -> str:
        """What the report says of it: the failure's message, the reason, or nothing."""
        failure = self.failure
        return str(failure) if failure is not None else self.reason or ""


def judge_races(tally: RaceTally, /, *, required: bool) -> RaceVerdict:
    """The verdict on ``tally``'s races, none of which lost (a lost race is a failure of its own).

    Passed when two calls of one race overlapped; otherwise not observed, or,
    when ``required`` (``--require-race``), failed (RB-PUB-4).
    """
    return RaceVerdict(tally.not_observed(), required)
