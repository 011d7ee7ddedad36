# SPDX-License-Identifier: MIT OR Apache-2.0
"""Known deviations: a runtime's list of what it knowingly does not conform to, yet.

One file serves ``check --deviations`` and ``vectors run --deviations``::

    {"deviations": [
      {"clause": "RB-SIZE-3", "reason": "release builds wrap; fixed in 1.5"},
      {"property": "test_parse.py::test_every_near_miss_is_rejected_with_its_text_verbatim",
       "reason": "..."},
      {"case": "ring-two-to-the-64", "reason": "...",
       "link": "https://github.com/my-org/my-runtime/issues/123"}
    ]}

An entry may carry a ``link`` to the runtime's own issue; the reports keep it
and the results page (``report``) shows it.

A listed item that fails is reported as a DEVIATION, not a failure. A listed
item that passes fails the run ("listed as deviating, but it conforms"), so
the list cannot go stale; so does an entry that matches nothing. ``check``
reads clause and property entries, ``vectors run`` clause and case entries.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ..harness.clauses import CLAUSES
from ..harness.files import JsonFileError, read_json_file
from ..results import WEB_ADDRESS
from .errors import CliError

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Sequence

    from ..corpus import CaseResult

__all__ = [
    "Deviation",
    "DeviationList",
    "DeviationsError",
    "Judged",
    "Row",
    "Target",
    "apply_deviations",
    "read_deviations",
]


class Target(enum.Enum):
    """What a deviation entry names."""

    CLAUSE = "clause"
    PROPERTY = "property"
    CASE = "case"


class DeviationsError(ValueError):
    """A deviation list that cannot be used: malformed, or an entry that matches nothing."""


@dataclass(frozen=True)
class Deviation:
    """One entry: the clause, property or case it names, and why it deviates."""

    target: Target
    name: str
    reason: str
    #: The runtime's own issue for it, an http(s) URL, or empty.
    link: str = ""

    def __str__(self) -> str:
        return f"{self.target.value} {self.name}"

    def record(self) -> dict[str, str]:
        """The entry as a JSON report keeps it: what it names, its reason and its link."""
        return {"entry": str(self), "reason": self.reason, "link": self.link}


@dataclass(frozen=True)
class Judged:
    """One property's or case's result, as deviations see it."""

    name: str
    clauses: Sequence[str]
    outcome: str


#: What a case of ``vectors run`` is listed by: its ID, or a clause it cites.
_CASES: Final = (Target.CLAUSE, Target.CASE)
_SHAPE: Final = 'must be {"deviations": [{"clause" | "property" | "case": NAME, "reason": TEXT}]}'


def _entry(index: int, entry: object, /) -> Deviation:
    where = f"deviations[{index}]"
    if not isinstance(entry, dict):
        raise DeviationsError(f"{where} must be an object")
    named = [target for target in Target if target.value in entry]
    extra = set(entry) - {target.value for target in Target} - {"reason", "link"}
    if len(named) != 1 or extra:
        raise DeviationsError(f'{where} must name one of "clause", "property" or "case"')
    target = named[0]
    name, reason = entry[target.value], entry.get("reason")
    if not isinstance(name, str) or not name:
        raise DeviationsError(f"{where}: the {target.value} must be a non-empty string")
    if not isinstance(reason, str) or not reason.strip():
        raise DeviationsError(f"{where} ({target.value} {name}) must give a reason")
    if target is Target.CLAUSE and name not in CLAUSES:
        raise DeviationsError(f"{where}: SPEC.md has no clause {name!r}")
    link = entry.get("link", "")
    if link != "" and not (isinstance(link, str) and WEB_ADDRESS.fullmatch(link)):
        raise DeviationsError(f"{where} ({target.value} {name}): the link must be an http(s) URL")
    return Deviation(target, name, reason, link)


def read_deviations(path: Path, /) -> list[Deviation]:
    """The entries of the deviation list in ``path``.

    Raises:
        DeviationsError: the file cannot be read, or is not a deviation list.
    """
    try:
        document = read_json_file(path)
    except JsonFileError as error:
        raise DeviationsError(str(error)) from None
    entries = document.get("deviations") if isinstance(document, dict) else None
    if not isinstance(document, dict) or set(document) != {"deviations"}:
        raise DeviationsError(_SHAPE)
    if not isinstance(entries, list):
        raise DeviationsError(_SHAPE)
    deviations = [_entry(index, entry) for index, entry in enumerate(entries)]
    names = [str(deviation) for deviation in deviations]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise DeviationsError(f"listed more than once: {', '.join(repeated)}")
    return deviations


def _matches(deviation: Deviation, item: Judged, /) -> bool:
    if deviation.target is Target.CLAUSE:
        return deviation.name in item.clauses
    return deviation.name == item.name


def apply_deviations(
    deviations: Iterable[Deviation],
    items: Sequence[Judged],
    /,
    *,
    reads: Collection[Target],
    selected: Collection[str] = (),
) -> tuple[dict[str, Deviation], list[Deviation]]:
    """Which failed items deviate knowingly, and which entries no longer deviate.

    Returns the failed items an entry covers (by name), and the entries whose
    items all conform. Only entries of the targets in ``reads`` apply; with a
    selection (``--clause``, or ``check``'s ``-k``), entries outside it are set
    aside.

    Raises:
        DeviationsError: an entry that applies matches no item of the run.
    """
    deviating: dict[str, Deviation] = {}
    conforming: list[Deviation] = []
    for deviation in deviations:
        if deviation.target not in reads:
            continue
        matched = [item for item in items if _matches(deviation, item)]
        if not matched:
            if selected:
                continue
            raise DeviationsError(f"{deviation} matches nothing this run checks")
        failed = [item for item in matched if item.outcome == "failed"]
        for item in failed:
            deviating.setdefault(item.name, deviation)
        if not failed and any(item.outcome == "passed" for item in matched):
            conforming.append(deviation)
    return deviating, conforming


@dataclass(frozen=True)
class Row:
    """One property's or case's line of a report, which a deviation entry may mark.

    Defined beside the entries that mark it, so that the report's module
    (:mod:`.report`) and this one do not import each other.
    """

    name: str
    clauses: Sequence[str]
    outcome: str
    detail: str = ""
    seconds: float | None = None
    #: The deviation entry a failure is known by (the outcome is then ``deviation``).
    known: Deviation | None = None
    #: The largest relative error measured, and the bound it was judged within
    #: (a replay case or property, RB-REPLAY-1); None where nothing was measured.
    distance: float | None = None
    bound: float | None = None


@dataclass(frozen=True)
class DeviationList:
    """The ``--deviations`` option: the file named (if any) and its entries."""

    option: str | None
    entries: Sequence[Deviation]

    @classmethod
    def from_option(cls, value: str | None, /) -> DeviationList:
        """Read the list ``--deviations`` names, before anything runs.

        Raises:
            CliError: the list is unusable, named by the file given.
        """
        if value is None:
            return cls(None, ())
        try:
            return cls(value, read_deviations(Path(value)))
        except DeviationsError as error:
            raise CliError(f"--deviations {value}: {error}") from None

    def unlisted_failure(self, result: CaseResult, /) -> bool:
        """Whether ``result`` failed and no entry names its case or one of its clauses."""
        item = Judged(result.case_id, result.clauses, result.outcome)
        listed = (_matches(entry, item) for entry in self.entries if entry.target in _CASES)
        return result.outcome == "failed" and not any(listed)

    def mark(
        self,
        rows: Sequence[Row],
        /,
        *,
        reads: Collection[Target],
        selected: Collection[str] = (),
    ) -> tuple[list[Row], list[Deviation]]:
        """The rows with each knowingly deviating failure marked, and the entries that conform.

        Raises:
            CliError: an entry matches nothing this run checks.
        """
        try:
            deviating, conforming = apply_deviations(
                self.entries,
                [Judged(row.name, row.clauses, row.outcome) for row in rows],
                reads=reads,
                selected=selected,
            )
        except DeviationsError as error:
            raise CliError(f"--deviations {self.option}: {error}") from None
        marked = [
            replace(
                row,
                outcome="deviation",
                known=deviating[row.name],
                detail=f"deviates knowingly ({deviating[row.name]}): "
                f"{deviating[row.name].reason}\n{row.detail}",
            )
            if row.name in deviating
            else row
            for row in rows
        ]
        return marked, conforming
