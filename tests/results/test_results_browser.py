# SPDX-License-Identifier: MIT OR Apache-2.0
"""The results page in a real browser: headless Chromium renders it, and it holds up.

Chromium's ``--dump-dom`` gives the document as the browser built it (a page
the parser had to repair shows it), and ``--enable-logging=stderr`` its
console, where a script error or a resource that failed to load would be
logged. A control page with one console error shows that such a message is
seen. ``.ci/run`` installs Chromium where it is missing (Debian's
``chromium`` package).
"""

from __future__ import annotations

import html.parser
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import pytest

from ssm_rollback_spec.harness.clauses import CLAUSES
from ssm_rollback_spec.tools.cli import main
from tests.child import ROOT
from tests.results.test_results import LINK, reports  # noqa: F401 - the fixture

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.browser

BROWSER: Final = "chromium"
_CONSOLE: Final = re.compile(r":INFO:CONSOLE[:(]")


class _Page(html.parser.HTMLParser):
    """The ids, links, and the text of each table header and row header of a document."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.headers: dict[str, list[str]] = {"col": [], "row": []}
        #: Each table cell: its class, its title, the text it shows and the links in it.
        self.cells: list[_Cell] = []
        #: The text of each list item with an id (the footnotes).
        self.items: dict[str, str] = {}
        self._in: str | None = None
        self._item: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(str(found["id"]))
        if tag == "a" and found.get("href") is not None:
            self.links.append(str(found["href"]))
            if self.cells and self._in == "td":
                self.cells[-1].links.append(str(found["href"]))
        if tag == "th" and found.get("scope") in self.headers:
            self._in = str(found["scope"])
            self.headers[self._in].append("")
        if tag == "td":
            self._in = "td"
            self.cells.append(_Cell(found.get("class") or "", found.get("title"), "", []))
        if tag == "li" and found.get("id"):
            self._item = str(found["id"])
            self.items[self._item] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag in ("th", "td"):
            self._in = None
        if tag == "li":
            self._item = None

    def handle_data(self, data: str) -> None:
        if self._in == "td":
            self.cells[-1].text += data
        elif self._in is not None:
            self.headers[self._in][-1] += data
        if self._item is not None:
            self.items[self._item] += data


@dataclass
class _Cell:
    """One ``td`` as the browser built it."""

    classes: str
    title: str | None
    text: str
    links: list[str]


def _render(page: Path, tmp_path: Path, /) -> tuple[str, list[str]]:
    """The DOM Chromium builds from ``page``, and its console's messages."""
    program = shutil.which(BROWSER)
    if program is None:
        pytest.fail(f"{BROWSER} is not installed: apt-get install -y {BROWSER}", pytrace=False)
    finished = subprocess.run(
        [program, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
         "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert finished.returncode == 0, finished.stderr[-2000:]
    return finished.stdout, [line for line in finished.stderr.splitlines() if _CONSOLE.search(line)]


def _spec_anchors() -> set[str]:
    text = (ROOT / "SPEC.md").read_text(encoding="utf-8")
    # GitHub's anchor of a heading: lower case, spaces to dashes, other punctuation dropped.
    return {
        re.sub(r"[^a-z0-9 _-]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in text.splitlines()
        if line.startswith("#")
    }


def test_a_console_error_is_seen(tmp_path: Path) -> None:
    control = tmp_path / "control.html"
    control.write_text(
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>c</title></head>'
        '<body><script>console.error("control")</script></body></html>',
        encoding="utf-8",
    )
    _, console = _render(control, tmp_path)
    assert len(console) == 1
    assert '"control"' in console[0]


def test_the_html_page_renders_every_clause_and_implementation_with_no_console_error(
    tmp_path: Path,
    reports: list[str],  # noqa: F811 - the fixture
) -> None:
    page = tmp_path / "results" / "page.html"
    assert main(["report", *reports, "--html", str(page), "--spec-url", "../SPEC.md"]) == 0
    dom, console = _render(page, tmp_path)
    assert console == []
    parsed = _Page()
    parsed.feed(dom)
    totals, *clauses = parsed.headers["row"]
    assert totals == "Totals"
    shown = [re.match(r"RB-[A-Z]+-\d+", text) for text in clauses]
    assert [match[0] if match else None for match in shown] == list(CLAUSES)
    assert parsed.headers["col"] == [
        "Clause",
        "my-runtime <rollback>1.4.2",
        "other-runtimerelease not stated",
    ]
    anchors = _spec_anchors()
    for link in parsed.links:
        if link.startswith("#"):
            assert link[1:] in parsed.ids, link
        elif link.startswith("../SPEC.md#"):
            assert link.removeprefix("../SPEC.md#") in anchors, link
        else:
            # The runtime's own issue, which a deviation entry names.
            assert link == LINK
    assert {link.removeprefix("../SPEC.md#") for link in parsed.links} >= {
        clause.lower() for clause in CLAUSES
    }
    assert len([link for link in parsed.links if link.startswith("#impl-")]) == 2


def test_the_rendered_page_shows_each_columns_totals_and_every_skips_reason(
    tmp_path: Path,
) -> None:
    results = [
        {"property": f"t::{n}", "clauses": [clause], "outcome": outcome, "detail": detail}
        for n, (clause, outcome, detail) in enumerate([
            ("RB-MODE-1", "passed", ""),
            ("RB-PARSE-1", "failed", "wrong"),
            ("RB-SIZE-1", "skipped", "not offered: no usize op"),
            ("RB-SIZE-2", "skipped", "not offered: no usize op"),
            ("RB-PUB-4", "not-observed", "no race seen in 200 tries"),
        ])
    ]  # fmt: skip
    report = tmp_path / "report.json"
    report.write_text(
        json.dumps({"implementation": "x", "spec_version": "1.0.0", "profile": "ci",
                    "describe": {"name": "skipper", "release": "3.1", "usize_bits": 64},
                    "properties": results, "conforming": []}),
        encoding="utf-8",
    )  # fmt: skip
    page = tmp_path / "page.html"
    assert main(["report", str(report), "--html", str(page)]) == 0
    dom, console = _render(page, tmp_path)
    assert console == []
    parsed = _Page()
    parsed.feed(dom)
    # The first cell is the column's totals, in the order of the outcomes, worst first.
    assert parsed.cells[0].text == f"1 FAIL, 1 NOT OBSERVED, 2 SKIP, 1 PASS, {len(CLAUSES) - 5} —"
    reasoned = [cell for cell in parsed.cells if cell.classes in ("skipped", "not-observed")]
    assert len(reasoned) == 3
    for cell in reasoned:
        [note] = cell.links
        # Readable without a script: the cell's title, and a footnote the page links to.
        assert note.startswith("#reason-")
        assert parsed.items[note[1:]] == cell.title
    assert sorted({cell.title or "" for cell in reasoned}) == [
        "no race seen in 200 tries",
        "not offered: no usize op",
    ]
