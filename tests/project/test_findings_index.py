# SPDX-License-Identifier: MIT OR Apache-2.0
"""docs/findings/README.md indexes every finding page, and README.md counts them."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from tests.child import ROOT

if TYPE_CHECKING:
    from pathlib import Path

FINDINGS: Final = ROOT / "docs" / "findings"
INDEX: Final = FINDINGS / "README.md"
APPENDIX: Final = FINDINGS / "appendix.md"
#: The longest cell the index and the appendix hold, in words.
MOST_WORDS: Final = 30
#: How many of the README's first lines must say what the suite found.
FIRST_SCREEN: Final = 40
#: A Markdown link: its text and its target.
_LINK: Final = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")
#: How a page may write a count in words.
_WORDS: Final = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def _pages() -> list[Path]:
    """Every finding page: the folder's Markdown files but the index and the appendix."""
    return sorted(path for path in FINDINGS.glob("*.md") if path not in {INDEX, APPENDIX})


def _cells(line: str, /) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _tables(path: Path, /) -> list[list[list[str]]]:
    """Each table of ``path``: its rows' cells, the header row first, the rule left out."""
    tables: list[list[list[str]]] = []
    current: list[list[str]] | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("|"):
            current = None
            continue
        cells = _cells(line)
        if all(re.fullmatch(r":?-+:?", cell) for cell in cells):
            continue
        if current is None:
            current = []
            tables.append(current)
        current.append(cells)
    return tables


def _findings_table() -> tuple[list[str], list[list[str]]]:
    """The index's first table: its header, and one row per finding."""
    header, *rows = _tables(INDEX)[0]
    return header, rows


def _words(cell: str, /) -> int:
    """How many words a reader sees in ``cell``: a link's text, not its target."""
    return len(_LINK.sub(r"\1", cell).replace("`", "").split())


def _number(word: str, /) -> int:
    return int(word) if word.isdigit() else _WORDS.index(word.lower())


def _title(page: Path, /) -> str:
    heading = page.read_text(encoding="utf-8").splitlines()[1]
    assert heading.startswith("# "), page.name
    return heading.removeprefix("# ")


def test_every_finding_page_has_exactly_one_row_in_the_index() -> None:
    header, rows = _findings_table()
    assert header[:2] == ["finding", "engine"]
    linked = [target for row in rows for _, target in _LINK.findall(row[0])]
    assert sorted(linked) == sorted(page.name for page in _pages())


def test_each_row_names_the_engine_its_page_is_about() -> None:
    _, rows = _findings_table()
    for row in rows:
        [(_, target)] = _LINK.findall(row[0])
        engine = row[1].split()[0]
        assert _title(FINDINGS / target).startswith(engine), (target, engine)


def test_each_row_links_a_reproducer_its_page_names() -> None:
    header, rows = _findings_table()
    column = header.index("reproducer")
    for row in rows:
        [(_, page)] = _LINK.findall(row[0])
        [(_, reproducer)] = _LINK.findall(row[column])
        assert (FINDINGS / reproducer).is_file(), reproducer
        assert reproducer in (FINDINGS / page).read_text(encoding="utf-8"), (page, reproducer)


def test_every_link_of_the_index_and_the_appendix_exists() -> None:
    for document in (INDEX, APPENDIX):
        targets = [target for _, target in _LINK.findall(document.read_text(encoding="utf-8"))]
        local = [t.split("#")[0] for t in targets if not t.startswith(("http:", "https:", "#"))]
        assert local, document.name
        missing = [target for target in local if not (document.parent / target).exists()]
        assert missing == [], document.name


def test_no_cell_of_the_index_or_the_appendix_runs_past_thirty_words() -> None:
    long = [
        (document.name, cell[:60])
        for document in (INDEX, APPENDIX)
        for table in _tables(document)
        for row in table
        for cell in row
        if _words(cell) > MOST_WORDS
    ]
    assert long == []


def test_each_appendix_row_says_what_would_reach_it() -> None:
    [table] = _tables(APPENDIX)
    header, *rows = table
    assert header[-1] == "what would reach it"
    assert rows
    assert all(len(row) == len(header) and row[-1] for row in rows)


def test_each_live_bug_links_its_report_and_says_what_is_not_reached() -> None:
    # The index's table of bugs live in a pinned release that no tier reaches yet.
    [live] = [table for table in _tables(INDEX) if table[0][0] == "upstream report, as read"]
    header, *rows = live
    assert header[-2:] == ["condition not yet reached", "what would reach it"]
    assert rows
    for row in rows:
        assert len(row) == len(header), row[0]
        assert all(row), row[0]
        [(_, target)] = _LINK.findall(row[0])
        assert target.startswith("https://github.com/"), target


def test_the_readme_counts_the_findings_on_its_first_screen() -> None:
    first = " ".join(
        (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:FIRST_SCREEN]
    ).split()
    text = " ".join(first)
    found = re.search(r"\[(\w+) bugs? in released engines\]\(docs/findings/README\.md\)", text)
    assert found is not None
    assert _number(found[1]) == len(_pages())
    # The count by engine, as the index's engine column gives it.
    _, rows = _findings_table()
    by_engine = re.search(r"(\w+) in llama\.cpp and (\w+) in vLLM", text)
    assert by_engine is not None
    engines = [row[1].split()[0] for row in rows]
    assert (_number(by_engine[1]), _number(by_engine[2])) == (
        engines.count("llama.cpp"),
        engines.count("vLLM"),
    )
