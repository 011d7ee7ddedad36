# SPDX-License-Identifier: MIT OR Apache-2.0
"""The clause IDs of SPEC.md, and selection by ID or family.

``tests/project/test_spec_document.py`` requires this table to list exactly SPEC.md's
clauses, in order, so the installed suite knows them without the document.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["CLAUSES", "REPLAY_PROFILE_CLAUSES", "UnknownClauseError", "family", "select_clauses"]

#: Every clause of SPEC.md, in document order.
CLAUSES: Final = (
    "RB-MODE-1",
    "RB-PARSE-1",
    "RB-PARSE-2",
    "RB-PUB-1",
    "RB-PUB-2",
    "RB-PUB-3",
    "RB-PUB-4",
    "RB-CELL-1",
    "RB-CELL-2",
    "RB-CELL-3",
    "RB-CELL-4",
    "RB-SIZE-1",
    "RB-SIZE-2",
    "RB-SIZE-3",
    "RB-VERIFY-1",
    "RB-VERIFY-2",
    "RB-PY-1",
    "RB-PY-2",
    "RB-PY-3",
    "RB-PROTO-1",
    "RB-PROTO-2",
    "RB-PROTO-3",
    "RB-PROTO-4",
    "RB-PROTO-5",
    # The replay profile (SPEC.md 1.2.0): judged over the opt-in operations.
    "RB-REPLAY-1",
    "RB-REPLAY-2",
    "RB-REPLAY-3",
    "RB-REPLAY-4",
    "RB-REPLAY-5",
    "RB-REPLAY-6",
    "RB-REPLAY-7",
    "RB-REPLAY-8",
    "RB-REPLAY-9",
    "RB-REPLAY-10",
    "RB-REPLAY-11",
    "RB-REPLAY-12",
    "RB-REPLAY-13",
    "RB-REPLAY-14",
)


#: The replay profile's clauses: binding an implementation that claims the
#: profile, judged over the opt-in operations and by the replay model.
REPLAY_PROFILE_CLAUSES: Final = frozenset(
    clause for clause in CLAUSES if clause.startswith("RB-REPLAY-")
)


class UnknownClauseError(ValueError):
    """A clause ID or family that SPEC.md does not have."""

    def __init__(self, given: str, /) -> None:
        families = ", ".join(dict.fromkeys(family(clause) for clause in CLAUSES))
        super().__init__(
            f"unknown clause {given!r}: give an ID such as RB-SIZE-3 or a family ({families})"
        )


def family(clause: str, /) -> str:
    """The family a clause belongs to: ``RB-SIZE`` for ``RB-SIZE-3``."""
    return clause.rsplit("-", 1)[0]


def select_clauses(given: Iterable[str], /) -> frozenset[str]:
    """The clauses that IDs and families select: ``RB-SIZE`` selects every RB-SIZE-N.

    Raises:
        UnknownClauseError: an item is neither a clause ID nor a family.
    """
    selected: set[str] = set()
    for item in given:
        matched = {c for c in CLAUSES if item in {c, family(c)}}
        if not matched:
            raise UnknownClauseError(item)
        selected |= matched
    return frozenset(selected)
