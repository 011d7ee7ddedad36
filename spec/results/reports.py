# SPDX-License-Identifier: MIT OR Apache-2.0
"""One JSON report of ``check --json`` or ``vectors run --json``, read and checked.

Only what the page shows is read: who was judged (the adapter's
``describe``), each property's or case's clauses, outcome and detail, a
replay case's or property's distance measured against its bound (absent
from reports of ``check`` written before it kept them), and the deviation
entries a failure is known by or that now conform. Timings and the command
line are left out, since they differ between machines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ..harness.files import JsonFileError, read_json_file

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "WEB_ADDRESS",
    "Known",
    "Report",
    "ReportError",
    "Result",
    "parse_report",
    "read_document",
    "read_report",
]


#: What a page may link to: a web address, with nothing a page would have to escape.
WEB_ADDRESS: Final = re.compile(r"https?://[^\s\"'<>`]+")


class ReportError(ValueError):
    """A file that is not a report of ``check`` or ``vectors run``."""


@dataclass(frozen=True)
class Known:
    """A deviation entry: what it names, why, and the runtime's own issue (or empty).

    A tier's test that holds a finding live (:mod:`.tier_report`) also names
    the finding's page, a path from the repository's root, which the page
    links beside SPEC.md.
    """

    entry: str
    reason: str
    link: str = ""
    page: str = ""


@dataclass(frozen=True)
class Result:
    """One property's or case's result, as the page needs it."""

    name: str
    clauses: tuple[str, ...]
    outcome: str
    detail: str
    distance: float | None = None
    bound: float | None = None
    known: Known | None = None

    @property
    def reproductions(self) -> tuple[str, ...]:
        """The detail's ``reproduce:`` lines."""
        return tuple(line for line in self.detail.splitlines() if line.startswith("reproduce: "))


@dataclass(frozen=True)
class Report:
    """One report: the implementation, which command made it, its results and its stale entries."""

    name: str
    release: str
    command: str
    spec_version: str
    results: tuple[Result, ...]
    conforming: tuple[Known, ...]


def _fail(what: str, /) -> ReportError:
    return ReportError(f"not a report of check or vectors run: {what}")


def _text(
    document: dict[str, object], key: str, where: str, /, *, default: str | None = None
) -> str:
    value = document.get(key, default)
    if not isinstance(value, str):
        raise _fail(f"{where}{key} must be a string")
    return value


def _number(document: dict[str, object], key: str, where: str, /) -> float | None:
    value = document.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(f"{where}{key} must be a number")
    return float(value)


def _known(value: object, where: str, /) -> Known:
    if not isinstance(value, dict):
        raise _fail(f"{where} must be an object")
    link = _text(value, "link", f"{where}.", default="")
    if link and not WEB_ADDRESS.fullmatch(link):
        raise _fail(f"{where}.link must be an http(s) URL")
    return Known(_text(value, "entry", f"{where}."), _text(value, "reason", f"{where}."), link)


def _result(value: object, name_key: str, where: str, /) -> Result:
    if not isinstance(value, dict):
        raise _fail(f"{where} must be an object")
    clauses = value.get("clauses")
    if not isinstance(clauses, list) or not all(isinstance(c, str) for c in clauses):
        raise _fail(f"{where}.clauses must be a list of strings")
    known = value.get("known")
    return Result(
        name=_text(value, name_key, f"{where}."),
        clauses=tuple(clauses),
        outcome=_text(value, "outcome", f"{where}."),
        detail=_text(value, "detail", f"{where}.", default=""),
        distance=_number(value, "distance", f"{where}."),
        bound=_number(value, "bound", f"{where}."),
        known=None if known is None else _known(known, f"{where}.known"),
    )


def parse_report(document: object, /) -> Report:
    """The report a decoded JSON document holds.

    Raises:
        ReportError: the document is not a report of ``check`` or ``vectors run``.
    """
    if not isinstance(document, dict):
        raise _fail("the document must be an object")
    kinds = [key for key in ("properties", "cases") if key in document]
    if len(kinds) != 1:
        raise _fail('it must hold "properties" (check) or "cases" (vectors run)')
    items = document[kinds[0]]
    if not isinstance(items, list):
        raise _fail(f"{kinds[0]} must be a list")
    name_key = "property" if kinds[0] == "properties" else "id"
    results = tuple(
        _result(item, name_key, f"{kinds[0]}[{index}]") for index, item in enumerate(items)
    )
    described = document.get("describe", {})
    if not isinstance(described, dict):
        raise _fail("describe must be an object")
    implementation = _text(document, "implementation", "")
    conforming = document.get("conforming", [])
    if not isinstance(conforming, list):
        raise _fail("conforming must be a list")
    profile = document.get("profile")
    command = "vectors run" if kinds[0] == "cases" else "check"
    if kinds[0] == "cases" and document.get("command") == "serve-check":
        # serve-check's report: a case a request, in vectors run's form.
        command = "serve-check"
    return Report(
        name=_text(described, "name", "describe.", default=implementation) or implementation,
        release=_text(described, "release", "describe.", default=""),
        command=f"{command} (profile {profile})" if isinstance(profile, str) else command,
        spec_version=_text(document, "spec_version", ""),
        results=results,
        conforming=tuple(
            _known(entry, f"conforming[{index}]") for index, entry in enumerate(conforming)
        ),
    )


def read_document(path: Path, /) -> object:
    """The JSON document in the file ``path``, read bounded in size and depth.

    Raises:
        ReportError: the file is missing, too large or not JSON.
    """
    try:
        return read_json_file(path)
    except JsonFileError as error:
        raise ReportError(str(error)) from None


def read_report(path: Path, /) -> Report:
    """The report in the file ``path``, read bounded in size and depth.

    Raises:
        ReportError: the file is missing, too large, not JSON, or not a report.
    """
    return parse_report(read_document(path))
