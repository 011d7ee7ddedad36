# SPDX-License-Identifier: MIT OR Apache-2.0
"""The llama.cpp records as ``--json`` reports: ``report`` gives the columns docs/results.md has.

docs/results.md's llama.cpp columns are built by tests/llamacpp/results.py from
the ggml report and the tier's records; the HTML page .ci/run builds with
``ssm-rollback-spec report`` reads reports alone, so the tier writes each record
column as a report (``write_record_reports``). These tests hold what ``report``
makes of them to what the page generator gives: every cell, the totals, the
badge, and each finding's entry, where a report can only link a web address
(llama.cpp's report; the finding page is named in the reason).
"""

from __future__ import annotations

import html
import json
import re
from typing import TYPE_CHECKING, Any, Final

from ssm_rollback_spec.results import WEB_ADDRESS, read_report
from ssm_rollback_spec.results.matrix import Standing
from ssm_rollback_spec.tools.cli import main
from tests.child import ROOT
from tests.llamacpp import results as llamacpp_results

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

_CLAUSE: Final = "RB-REPLAY-14"
_FOOTNOTE: Final = re.compile(r"\[\^[a-z0-9-]+\]")
#: A markdown entry: ``[text](target): reason`` or ``text: reason``, the text's brackets escaped.
_LINKED: Final = re.compile(r"\[((?:\\.|[^\]\\])*)\]\(([^)]*)\): (.*)")
_PLAIN: Final = re.compile(r"((?:\\.|[^:\\])*(?:::(?:\\.|[^:\\])*)*): (.*)")


def _findings() -> dict[str, tuple[str, list[llamacpp_results.Finding]]]:
    """Each record column: the name ``report`` gives it, and the findings of its records."""
    v050 = [f for f in llamacpp_results.ARCHITECTURES_RECORD if llamacpp_results.on_v050(f)]
    sdist = [f for f in llamacpp_results.ARCHITECTURES_RECORD if f not in v050]
    return {
        llamacpp_results.NAME: (llamacpp_results.GGML_NAME, [*llamacpp_results.RECORD, *sdist]),
        llamacpp_results.PREBUILT_NAME: (
            llamacpp_results.PREBUILT_NAME,
            [*llamacpp_results.PREBUILT_RECORD, *v050],
        ),
    }


def _plain(text: str, /) -> str:
    """A markdown cell's text without its escapes."""
    return html.unescape(re.sub(r"\\(.)", r"\1", text))


def _resolved(column: llamacpp_results.Column, /) -> dict[str, str]:
    """The column's cells, each footnote label replaced by its reason (labels differ by key)."""
    notes = dict(re.findall(r"^(\[\^[a-z0-9-]+\]): (.*)$", column[3], flags=re.MULTILINE))
    return {
        clause: _FOOTNOTE.sub(lambda m: f"[{notes[m[0]]}]", cell)
        for clause, cell in column[2].items()
    }


def _entries(cell: str, /) -> dict[str, tuple[str | None, str]]:
    """A deviation cell's entries: each entry's text, its link (or None) and its reason."""
    found: dict[str, tuple[str | None, str]] = {}
    for part in cell.split("<br>")[2:]:
        if linked := _LINKED.fullmatch(part):
            found[_plain(linked[1])] = (linked[2], _plain(linked[3]))
        else:
            plain = _PLAIN.fullmatch(part)
            assert plain is not None, part
            found[_plain(plain[1])] = (None, _plain(plain[2]))
    return found


def _section_line(section: str, start: str, /) -> str:
    (line,) = [line for line in section.splitlines() if line.startswith(start)]
    return line


def _badge_message(section: str, /) -> str:
    return _section_line(section, "- Badge `").split("`: ", 1)[1]


def report_pages(folder: Path, reports: Sequence[Path], /) -> tuple[str, str, Path]:
    """``report --markdown --html --badges`` over ``reports``, as .ci/run runs it: both pages."""
    markdown, page, badges = folder / "page.md", folder / "page.html", folder / "badges"
    status = main(
        [
            "report",
            *map(str, reports),
            *("--spec-url", "../SPEC.md", "--bounds-only"),
            *("--markdown", str(markdown), "--html", str(page), "--badges", str(badges)),
        ]
    )
    assert status == 0
    return markdown.read_text(encoding="utf-8"), page.read_text(encoding="utf-8"), badges


def _check_markdown(page: str, generated: str, /) -> None:
    for name, (reported, findings) in _findings().items():
        mine = llamacpp_results.page_column(generated, name)
        theirs = llamacpp_results.page_column(page, reported)
        # The same release and totals; the sdist column keeps the ggml report's name.
        assert theirs[0].split("<br>")[1] == mine[0].split("<br>")[1], name
        assert theirs[1] == mine[1], name
        cells, expected = _resolved(theirs), _resolved(mine)
        assert {c: v for c, v in cells.items() if c != _CLAUSE} == {
            c: v for c, v in expected.items() if c != _CLAUSE
        }, name
        # RB-REPLAY-14: the same outcome and findings; a link only where llama.cpp has a report.
        deviations = [f for f in findings if f["outcome"] == "deviation"]
        assert deviations, name
        linked = all(WEB_ADDRESS.fullmatch(f["link"]) for f in deviations)
        standing = Standing.KNOWN_LINKED if linked else Standing.KNOWN_UNLINKED
        head = cells[_CLAUSE].split("<br>")[:2]
        assert head == [expected[_CLAUSE].split("<br>")[0], f"*{standing.value}*"], name
        on_page, in_report = _entries(expected[_CLAUSE]), _entries(cells[_CLAUSE])
        # In the same order (the page sorts them); each of a deviation of the records.
        assert list(in_report) == list(on_page)
        assert sorted(on_page) == sorted(f"property {f['test']}" for f in deviations), name
        for finding in deviations:
            target, reason = on_page[f"property {finding['test']}"]
            assert target == finding["page"]
            web = finding["link"] if WEB_ADDRESS.fullmatch(finding["link"]) else None
            assert in_report[f"property {finding['test']}"] == (
                web,
                f"{reason}; its page: docs/{finding['page']}",
            )
        # The section: its Reports line says the record is one, and the same badge.
        reports = _section_line(mine[3], "- Reports: ").removeprefix("- Reports: ")
        command = {
            llamacpp_results.NAME: llamacpp_results.RECORD_COMMAND,
            llamacpp_results.PREBUILT_NAME: llamacpp_results.PREBUILT_COMMAND,
        }[name]
        profile = llamacpp_results.record_profile(command)
        assert _section_line(theirs[3], "- Reports: ") == "- Reports: " + _plain(reports).replace(
            command, f"check (profile {profile})"
        )
        assert _badge_message(theirs[3]) == _badge_message(mine[3]), name


def _html_rows(
    page: str, /
) -> tuple[list[tuple[str, str]], list[str], list[str], dict[str, list[str]]]:
    """The HTML table's headers (name, release), their keys, totals and each clause row's cells."""
    found = re.findall(r'<th scope="col"><a href="#impl-([^"]*)">(.*?)</a><br>(.*?)</th>', page)
    headers = [(html.unescape(name), html.unescape(release)) for _, name, release in found]
    keys = [key for key, _, _ in found]
    totals_row = re.search(r'<tr class="totals"><th scope="row">Totals</th>(.*?)</tr>', page)
    assert totals_row is not None
    totals = [html.unescape(cell) for cell in re.findall(r"<td>(.*?)</td>", totals_row[1])]
    rows = {
        clause.upper(): re.findall(r"<td [^>]*>(.*?)</td>", cells)
        for clause, cells in re.findall(r'<tr id="(rb-[a-z]+-\d+)">(.*?)</tr>', page)
    }
    return headers, keys, totals, rows


def _label(markdown_cell: str, /) -> str:
    return markdown_cell.split("<br>", 1)[0].split("[^", 1)[0].strip("*")


def _check_html(page: str, badges: Path, generated: str, /) -> None:
    headers, keys, totals, rows = _html_rows(page)
    for name, (reported, findings) in _findings().items():
        mine = llamacpp_results.page_column(generated, name)
        release = _plain(mine[0].split("<br>")[1])
        index = headers.index((reported, release))
        assert totals[index] == _plain(mine[1]), name
        for clause, cell in mine[2].items():
            shown = re.match(r'<span class="outcome">([^<]*)</span>', rows[clause][index])
            assert shown is not None, clause
            assert html.unescape(shown[1]) == _label(cell), (name, clause)
        on_page = _entries(mine[2][_CLAUSE])
        cell = rows[_CLAUSE][index]
        for finding in findings:
            raw = f"property {finding['test']}"
            entry = html.escape(raw)
            if finding["outcome"] != "deviation":
                assert entry not in cell
                continue
            reason = html.escape(f"{on_page[raw][1]}; its page: docs/{finding['page']}")
            link = finding["link"]
            shown_entry = (
                f'<a href="{html.escape(link)}">{entry}</a>'
                if WEB_ADDRESS.fullmatch(link)
                else entry
            )
            assert f"{shown_entry}: {reason}" in cell.split("<br>"), finding["test"]
        # No finding of the other record column is in this one.
        others = [f for other, (_, fs) in _findings().items() if other != name for f in fs]
        assert not any(f"property {f['test']}" in html.unescape(cell) for f in others)
        # Its badge, named by its column (the sdist one's by the ggml adapter's name), says
        # what the page's section says.
        document: dict[str, Any] = json.loads(
            (badges / f"{keys[index]}.json").read_text(encoding="utf-8")
        )
        assert f"{document['message']} ({document['color']})" == _badge_message(mine[3]), name
        if name == llamacpp_results.PREBUILT_NAME:
            assert f"`{keys[index]}.json`" in mine[3]


def check_report_gives_the_generators_columns(
    folder: Path, ggml: Path, reports: Sequence[Path], /
) -> None:
    """``report`` over ``reports`` gives the llama.cpp columns the generator gives for ``ggml``."""
    markdown, page, badges = report_pages(folder, reports)
    generated = llamacpp_results.markdown(ggml)
    _check_markdown(markdown, generated)
    _check_html(page, badges, generated)


def _ggml_report(folder: Path, /) -> Path:
    """A ggml vectors report of the pinned release: a pass with its bound, and two skips."""
    cases = [
        {"id": "replay-rounds-1", "clauses": ["RB-REPLAY-1"], "outcome": "passed",
         "detail": "exact: every value the model's", "distance": 0.0, "bound": 1e-06},
        {"id": "replay-rebuild-2", "clauses": ["RB-REPLAY-1", "RB-REPLAY-2"],
         "outcome": "skipped", "detail": "not offered: no pipeline float64"},
        {"id": "model-3", "clauses": [_CLAUSE], "outcome": "skipped",
         "detail": "not offered: the adapter's describe names no model"},
    ]  # fmt: skip
    document = {
        "implementation": "ggml_adapter.py",
        "spec_version": "1.0.0",
        "describe": {
            "name": llamacpp_results.GGML_NAME,
            "release": llamacpp_results.RELEASE,
            "usize_bits": 64,
        },
        "cases": cases,
        "conforming": [],
    }
    path = folder / "ggml-vectors.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_report_over_the_record_reports_gives_the_committed_pages_llama_cpp_columns(
    tmp_path: Path,
) -> None:
    ggml = _ggml_report(tmp_path)
    written = llamacpp_results.write_record_reports(tmp_path)
    assert [path.name for path in written] == [p.name for p in llamacpp_results.RECORD_REPORTS]
    check_report_gives_the_generators_columns(tmp_path / "out", ggml, [ggml, *written])


def test_each_record_report_is_a_check_report_of_its_column_that_says_it_is_a_record(
    tmp_path: Path,
) -> None:
    for name, path in zip(
        llamacpp_results.NAMES, llamacpp_results.write_record_reports(tmp_path), strict=True
    ):
        report = read_report(path)
        reported, findings = _findings()[name]
        assert report.name == reported
        assert report.command.startswith("check (profile none: the llama.cpp tier's record")
        assert [result.name for result in report.results] == [f["test"] for f in findings]
        assert {result.clauses for result in report.results} == {(_CLAUSE,)}
        for result, finding in zip(report.results, findings, strict=True):
            assert result.outcome == finding["outcome"]
            assert (result.known is not None) == (finding["outcome"] == "deviation")
            if result.known is not None:
                assert result.known.link in {finding["link"], ""}
                assert result.known.reason.endswith(f"; its page: docs/{finding['page']}")
                assert (ROOT / "docs" / finding["page"]).is_file()


def test_the_page_of_a_folder_with_the_record_reports_is_the_ggml_reports_page(
    tmp_path: Path,
) -> None:
    # The generator joins the records itself, so their reports beside the ggml one
    # change nothing: a page made from every file of the folder is the committed kind.
    ggml = _ggml_report(tmp_path)
    written = llamacpp_results.write_record_reports(tmp_path)
    assert llamacpp_results.markdown(ggml, *written) == llamacpp_results.markdown(ggml)


def test_ci_builds_its_html_page_from_the_folder_the_record_reports_are_written_to() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    folder = llamacpp_results.REPORTS.relative_to(ROOT)
    step = script[script.index("ssm-rollback-spec report ") :].split("\n\n", 1)[0]
    assert f"{folder}/*.json" in step
    assert "--html build/results/index.html" in step
    assert {path.parent for path in llamacpp_results.RECORD_REPORTS} == {llamacpp_results.REPORTS}
    assert llamacpp_results.REPORT.parent == llamacpp_results.REPORTS
