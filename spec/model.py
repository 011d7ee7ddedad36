# SPDX-License-Identifier: MIT OR Apache-2.0
"""The reference model: the contract stated as plainly as possible.

This is the oracle the properties and the vectors are judged by. It is
written for obviousness, not speed, and shares no code with
:mod:`ssm_rollback_spec.rollback`: modes are plain texts here, outcomes are plain values,
and the arithmetic is Python's exact integers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "DEFAULT_MODE",
    "MODE_NAMES",
    "USIZE_MAX",
    "Call",
    "Rejected",
    "allowed_race_outcomes",
    "fits_usize",
    "parse",
    "ring_bytes",
    "row_bytes",
    "trace_outcomes",
    "verify_may_enter",
]

#: The mode names, in the order the parse error lists them (RB-PARSE-1).
MODE_NAMES: Final = ("snapshot", "replay")

#: The mode a read pins when nothing was published (RB-PUB-2).
DEFAULT_MODE: Final = "snapshot"

#: The largest usize of a 64-bit runtime (RB-SIZE-3).
USIZE_MAX: Final = 18_446_744_073_709_551_615

_PARSE_ERROR: Final = "unknown ssm-rollback-mode '{text}' (valid: {valid})"


@dataclass(frozen=True)
class Rejected:
    """A parse that failed, with the exact message the contract requires."""

    message: str


def parse(text: str, /) -> str | Rejected:
    """The mode named by ``text``, or the rejection (RB-PARSE-1, RB-PARSE-2)."""
    if text in MODE_NAMES:
        return text
    return Rejected(_PARSE_ERROR.format(text=text, valid=", ".join(MODE_NAMES)))


#: One call on the published mode: ``("set", mode)`` or ``("get", None)``.
Call = tuple[Literal["set", "get"], str | None]


def _value_pinned_by(call: Call, /) -> str:
    match call:
        case ("set", str() as mode):
            return mode
        case ("get", None):
            return DEFAULT_MODE
    raise ValueError(f"not a call on the published mode: {call!r}")


def trace_outcomes(calls: Sequence[Call], /) -> list[str]:
    """What each call of a sequential trace returns (RB-PUB-1, RB-PUB-2).

    A fold: the first call, a write or a read, pins the mode; every call
    returns the pinned mode.
    """
    pinned: str | None = None
    returned = []
    for call in calls:
        if pinned is None:
            pinned = _value_pinned_by(call)
        returned.append(pinned)
    return returned


def allowed_race_outcomes(calls: Sequence[Call], /) -> set[tuple[str, ...]]:
    """Every outcome a group of concurrent calls may return (RB-PUB-4).

    Whichever call takes effect first pins the mode for all the others, so
    there is one allowed outcome for each call that could win.
    """
    return {tuple(trace_outcomes([winner, *calls])[1:]) for winner in calls} or {()}


def row_bytes(qkvz_elems: int, nv: int, /) -> int:
    """Exact bytes of one replay row: BF16 qkvz values, FP32 gate and beta per head."""
    bf16_bytes = 2
    fp32_bytes = 4
    return qkvz_elems * bf16_bytes + nv * 2 * fp32_bytes


def ring_bytes(num_ssm_layers: int, row_bytes: int, k_ceiling: int, mtp_state_slots: int, /) -> int:
    """Exact bytes of the replay ring; K-1 replayed rows, never fewer than zero."""
    replayed_rows = max(k_ceiling - 1, 0)
    return mtp_state_slots * replayed_rows * num_ssm_layers * row_bytes


def fits_usize(value: int, /) -> bool:
    """Whether an exact size is representable, rather than an overflow (RB-SIZE-3)."""
    return 0 <= value <= USIZE_MAX


def verify_may_enter(mode: str, /) -> bool:
    """Whether a speculative verify may enter in ``mode`` (RB-VERIFY-1, RB-VERIFY-2)."""
    return mode == "snapshot"
