# SPDX-License-Identifier: MIT OR Apache-2.0
"""``report``: the reports of check and vectors run side by side, byte-stable, with badges."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import jsonschema
import pytest

from adapters.engines.registry import ENGINES
from ssm_rollback_spec import __version__
from ssm_rollback_spec.harness import outcome_recorder
from ssm_rollback_spec.harness.clauses import CLAUSES
from ssm_rollback_spec.harness.files import MAX_FILE_BYTES
from ssm_rollback_spec.harness.pytest_plugin import MEASURED
from ssm_rollback_spec.harness.versions import CURRENT
from ssm_rollback_spec.results import (
    WEB_ADDRESS,
    read_tier_report,
    tier_reports,
)
from ssm_rollback_spec.results.engines_page import (
    NOTE,
    markdown,
    part,
    parts,
    with_parts,
    without_parts,
)
from ssm_rollback_spec.results.matrix import SECTIONS
from ssm_rollback_spec.results.page import REASONS_HEADING
from ssm_rollback_spec.tools.cli import main
from tests.child import ROOT, run_module
from tests.e2e import results as e2e_results
from tests.fakes import FAKES
from tests.kernels import results as kernels_results
from tests.llamacpp import results as llamacpp_results

if TYPE_CHECKING:
    from collections.abc import Sequence

REPLAY_ADAPTER: Final = str(FAKES / "replay_adapter.py")
LINK: Final = "https://github.com/example/runtime/issues/7"
_CLAUSE: Final = "RB-REPLAY-14"


def _check_report(
    name: str, release: str | None, properties: list[dict[str, Any]]
) -> dict[str, Any]:
    described: dict[str, Any] = {"name": name, "usize_bits": 64}
    if release is not None:
        described["release"] = release
    return {
        "implementation": f"/home/someone/{name} --serve",
        "profile": "ci",
        "spec_version": "1.0.0",
        "describe": described,
        "properties": properties,
        "conforming": [],
    }


def _property(name: str, clauses: list[str], outcome: str, detail: str = "") -> dict[str, Any]:
    return {
        "property": name,
        "clauses": clauses,
        "outcome": outcome,
        "detail": detail,
        "seconds": 17.25,
    }


def _write(folder: Path, name: str, document: object) -> str:
    path = folder / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return str(path)


def _sections(page: str, /) -> list[tuple[str, dict[str, str]]]:
    """Each implementation's section: its heading, and its clause rows' outcomes by clause."""
    found = []
    for section in page.split("\n### ")[1:]:
        heading = re.sub(r"^<a id=\"[^\"]*\"></a>", "", section.split("\n", 1)[0])
        rows = {}
        for row in section.splitlines():
            if match := re.match(r"\| \[(RB-[A-Z]+-\d+)\]\([^)]*\) \| (.*) \|$", row):
                rows[match[1]] = match[2]
        found.append((heading, rows))
    return found


def _cells(page: str, /) -> dict[str, list[str]]:
    """Each clause some implementation was judged on: its cell in each section, or —."""
    sections = _sections(page)
    cited = {clause for _, rows in sections for clause in rows}
    return {
        clause: [rows.get(clause, "—") for _, rows in sections]
        for clause in CLAUSES
        if clause in cited
    }


def _run(capsys: pytest.CaptureFixture[str], *arguments: str) -> tuple[int, str, str]:
    status = main(["report", *arguments])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture
def reports(tmp_path: Path) -> list[str]:
    """Two implementations: one with every kind of known failure, one plain."""
    failing = 'reproduce: printf \'%s\\n\' \'{"op":"parse","text":"x|y"}\' | ./adapter'
    first = _check_report(
        "my-runtime <rollback>",
        "1.4.2",
        [
            _property("test_parse.py::a", ["RB-PARSE-1"], "failed", f"wrong\n{failing}"),
            _property("test_parse.py::b", ["RB-PARSE-2"], "deviation", "deviates knowingly")
            | {"known": {"entry": "clause RB-PARSE-2", "reason": "folds case", "link": LINK}},
            _property("test_sizes.py::c", ["RB-SIZE-1"], "deviation", "deviates knowingly")
            | {"known": {"entry": "clause RB-SIZE-1", "reason": "wraps", "link": ""}},
            _property("test_sizes.py::d", ["RB-SIZE-2"], "passed"),
            _property("test_races.py::e", ["RB-PUB-4"], "timed-out", "no verdict in time"),
        ],
    )
    first["conforming"] = [
        {"entry": "property test_sizes.py::d", "reason": "was off", "link": LINK}
    ]
    second = _check_report("other-runtime", None, [_property("t::f", ["RB-MODE-1"], "passed")])
    vectors = {
        "implementation": "other",
        "spec_version": "1.0.0",
        "describe": {"name": "other-runtime", "usize_bits": 64},
        "cases": [
            {"id": "replay-1", "clauses": ["RB-REPLAY-1"], "outcome": "passed", "detail": "",
             "distance": 0.00305, "bound": 0.01},
            {"id": "replay-2", "clauses": ["RB-REPLAY-1"], "outcome": "passed", "detail": "",
             "distance": 0.0001, "bound": 0.01},
        ],
    }  # fmt: skip
    return [_write(tmp_path, f"{n}.json", d) for n, d in enumerate((first, second, vectors))]


def test_the_page_opens_with_one_row_per_implementation_and_its_failing_clauses(
    capsys: pytest.CaptureFixture[str], reports: list[str]
) -> None:
    status, page, _ = _run(capsys, *reports, "--spec-url", "../SPEC.md")
    assert status == 0
    overview = page.split("\n\n## ")[0].splitlines()
    assert overview[2] == (
        "| Implementation | Release | Clauses judged | Fails, deviates or not run |"
    )
    assert overview[4].startswith(
        "| [my-runtime &lt;rollback&gt;](#impl-my-runtime-rollback-1-4-2)"
        " | 1.4.2 | 1 FAIL, 2 DEVIATION, 1 PASS, 1 timed-out | "
    )
    assert overview[4].endswith(
        " | [RB-PARSE-1](../SPEC.md#rb-parse-1), [RB-PARSE-2](../SPEC.md#rb-parse-2),"
        " [RB-SIZE-1](../SPEC.md#rb-size-1), [RB-SIZE-2](../SPEC.md#rb-size-2) |"
    )
    assert overview[5] == (
        "| [other-runtime](#impl-other-runtime) | release not stated | 2 PASS | none |"
    )
    assert len(overview) == 6
    # No header of 250 characters: the overview's is one line of four short cells.
    assert max(len(cell) for cell in overview[2].split(" | ")) < 30


def test_each_section_lists_only_its_judged_clauses_failures_first_and_no_all_dash_row(
    capsys: pytest.CaptureFixture[str], reports: list[str]
) -> None:
    _, page, _ = _run(capsys, *reports, "--spec-url", "../SPEC.md")
    (mine, my_rows), (other, other_rows) = _sections(page)
    assert mine == "my-runtime &lt;rollback&gt;, 1.4.2"
    # FAIL, then the deviations, then the outcome the page does not know, then a pass,
    # each outcome in SPEC.md's order.
    assert list(my_rows) == ["RB-PARSE-1", "RB-PARSE-2", "RB-SIZE-1", "RB-PUB-4", "RB-SIZE-2"]
    assert (other, list(other_rows)) == (
        "other-runtime, release not stated",
        ["RB-MODE-1", "RB-REPLAY-1"],
    )
    assert all(cell != "—" for rows in (my_rows, other_rows) for cell in rows.values())
    assert "| [RB-CELL-1]" not in page
    assert "—" not in page.split("## Reading the page")[0]


def test_a_cell_gives_the_outcome_the_distance_against_the_bound_and_the_reproduce_line(
    capsys: pytest.CaptureFixture[str], reports: list[str]
) -> None:
    _, page, _ = _run(capsys, *reports)
    cells = _cells(page)
    assert cells["RB-REPLAY-1"][1] == "**PASS**<br>largest relative error 0.00305 (bound 0.01)"
    assert cells["RB-PARSE-1"][0] == (
        "**FAIL**<br>*fails, not listed*<br>"
        '`reproduce: printf \'%s\\n\' \'{"op":"parse","text":"x\\|y"}\' \\| ./adapter`'
    )
    assert cells["RB-MODE-1"] == ["—", "**PASS**"]
    _, bounded, _ = _run(capsys, *reports, "--bounds-only")
    assert _cells(bounded)["RB-REPLAY-1"][1] == "**PASS**<br>within bound 0.01"
    assert "0.00305" not in bounded


def test_known_failures_are_told_apart_and_a_link_is_shown(
    capsys: pytest.CaptureFixture[str], reports: list[str]
) -> None:
    _, page, _ = _run(capsys, *reports)
    lines = {clause: " | ".join(cells) for clause, cells in _cells(page).items()}
    assert (
        f"**DEVIATION**<br>*fails, known, linked*<br>[clause RB-PARSE-2]({LINK}): folds case"
        in lines["RB-PARSE-2"]
    )
    assert (
        "**DEVIATION**<br>*fails, known, not linked*<br>clause RB-SIZE-1: wraps"
        in lines["RB-SIZE-1"]
    )
    assert "*fails, not listed*" in lines["RB-PARSE-1"]
    assert (
        f"**PASS**<br>*listed, but now passes*<br>[property test\\_sizes.py::d]({LINK}): was off"
        in lines["RB-SIZE-2"]
    )
    assert f"- listed, but now passes: [property test\\_sizes.py::d]({LINK}): was off" in page


def test_an_outcome_the_page_does_not_know_is_shown_as_it_is(
    capsys: pytest.CaptureFixture[str], reports: list[str], tmp_path: Path
) -> None:
    html_page = tmp_path / "page.html"
    _, page, _ = _run(capsys, *reports, "--markdown", "-", "--html", str(html_page))
    assert "| [RB-PUB-4](SPEC.md#rb-pub-4) | **timed-out** |" in page
    assert '<td class="other"><span class="outcome">timed-out</span></td>' in (
        html_page.read_text(encoding="utf-8")
    )


def test_the_same_reports_give_the_same_bytes_in_any_order_and_folder(
    capsys: pytest.CaptureFixture[str], reports: list[str], tmp_path: Path
) -> None:
    outputs = []
    for order, folder in ((reports, "a"), (reports[::-1], "b/c")):
        out = tmp_path / folder
        _run(capsys, *order, "--markdown", str(out / "page.md"), "--html", str(out / "page.html"),
             "--badges", str(out / "badges"))  # fmt: skip
        outputs.append({p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*.*"))})
    assert outputs[0] == outputs[1]
    assert sorted(map(str, outputs[0])) == [
        "badges/my-runtime-rollback-1-4-2.json",
        "badges/other-runtime.json",
        "page.html",
        "page.md",
    ]
    text = b"".join(outputs[0].values()).decode()
    assert "someone" not in text
    assert "17.25" not in text  # a property's seconds


def test_each_implementation_gets_an_endpoint_badge(
    capsys: pytest.CaptureFixture[str], reports: list[str], tmp_path: Path
) -> None:
    status, _, _ = _run(capsys, *reports, "--badges", str(tmp_path / "badges"), "--html", "-")
    badges = {p.name: json.loads(p.read_text()) for p in (tmp_path / "badges").iterdir()}
    assert status == 0
    assert badges == {
        "my-runtime-rollback-1-4-2.json": {
            "schemaVersion": 1,
            "label": "ssm-rollback-spec",
            "message": "1/5 clauses pass, 1 fail, 2 deviation, 1 timed-out, "
            "1 listed, but now passes",
            "color": "red",
        },
        "other-runtime.json": {
            "schemaVersion": 1,
            "label": "ssm-rollback-spec",
            "message": "2/2 clauses pass",
            "color": "brightgreen",
        },
    }


def test_every_sections_title_is_spec_mds_heading() -> None:
    text = (ROOT / "SPEC.md").read_text(encoding="utf-8")
    found: dict[str, str] = {}
    section = ""
    for line in text.splitlines():
        if line.startswith("## "):
            # A subtitle after a colon is the page's in parentheses.
            title, colon, subtitle = line[3:].partition(": ")
            section = f"{title} ({subtitle})" if colon else title
        elif match := re.fullmatch(r"### (RB-[A-Z]+)-\d+", line):
            found.setdefault(match[1], section)
    assert found == SECTIONS


NOT_A_REPORT: Final = "{path}: not a report of check or vectors run: "
CASE: Final = '{"id": "c", "clauses": [], "outcome": "passed"'
JAVASCRIPT: Final = '{"entry": "clause RB-MODE-1", "reason": "r", "link": "javascript:alert(1)"}'
BAD_FILES: Final = [
    (None, "{path}: No such file or directory"),
    ("{", ("{path}: not JSON: Expecting property name enclosed in double quotes: "
     "line 1 column 2 (char 1)")),
    ("[]", f"{NOT_A_REPORT}the document must be an object"),
    ('{"implementation": "x"}',
     f'{NOT_A_REPORT}it must hold "properties" (check) or "cases" (vectors run)'),
    ('{"implementation": "x", "cases": [{"id": "c", "clauses": "RB-MODE-1"}]}',
     f"{NOT_A_REPORT}cases[0].clauses must be a list of strings"),
    ('{"implementation": "x", "cases": [], "describe": {"name": 3}}',
     f"{NOT_A_REPORT}describe.name must be a string"),
    (f'{{"implementation": "x", "cases": [{CASE}, "distance": "far"}}]}}',
     f"{NOT_A_REPORT}cases[0].distance must be a number"),
    (f'{{"implementation": "x", "cases": [{CASE}, "known": {JAVASCRIPT}}}]}}',
     f"{NOT_A_REPORT}cases[0].known.link must be an http(s) URL"),
    ("too big", f"{{path}}: larger than {MAX_FILE_BYTES} bytes"),
]  # fmt: skip


@pytest.mark.parametrize(("content", "line"), BAD_FILES)
def test_a_file_that_is_not_a_report_gets_one_clear_line_and_status_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str | None, line: str
) -> None:
    path = tmp_path / "report.json"
    if content == "too big":
        with path.open("wb") as file:
            file.truncate(MAX_FILE_BYTES + 1)
    elif content is not None:
        path.write_text(content, encoding="utf-8")
    status, out, err = _run(capsys, str(path))
    assert status == 2
    assert out == ""
    assert err == f"ssm-rollback-spec: error: {line.format(path=path)}\n"


def test_a_deviation_link_must_be_a_web_address(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    entry = {"clause": "RB-MODE-1", "reason": "r", "link": "javascript:alert(1)"}
    path = _write(tmp_path, "deviations.json", {"deviations": [entry]})
    status = main(["vectors", "run", "--deviations", path])
    assert status == 2
    assert capsys.readouterr().err == (
        f"ssm-rollback-spec: error: --deviations {path}: deviations[0] (clause RB-MODE-1): "
        "the link must be an http(s) URL\n"
    )


@pytest.mark.slow
def test_the_reports_of_vectors_run_and_check_name_the_implementation_its_link_and_distance(
    tmp_path: Path,
) -> None:
    deviations = _write(tmp_path, "deviations.json", {"deviations": [
        {"clause": "RB-REPLAY-4", "reason": "post-conv not yet", "link": LINK},
        {"clause": "RB-SIZE-1", "reason": "was off once"},
    ]})  # fmt: skip
    adapter = f"python {REPLAY_ADAPTER}"
    vectors = tmp_path / "vectors.json"
    run_module("ssm_rollback_spec.tools.cli", "vectors", "run", "--impl-cmd", adapter,
               "--clause", "RB-REPLAY", "--clause", "RB-SIZE-1", "--deviations", deviations,
               "--json", str(vectors), timeout=300)  # fmt: skip
    check = tmp_path / "check.json"
    finished = run_module("ssm_rollback_spec.tools.cli", "check", "--clause", "RB-MODE-1",
                          "--json", str(check), timeout=300)  # fmt: skip
    assert finished.returncode == 0, finished.stderr
    document = json.loads(vectors.read_text(encoding="utf-8"))
    reference = {
        "name": "ssm_rollback_spec.rollback (Python reference)",
        "usize_bits": 64,
        "protocol": str(CURRENT),
    }
    assert document["describe"] == reference | {"release": __version__}
    assert json.loads(check.read_text(encoding="utf-8"))["describe"] == document["describe"]
    assert document["conforming"] == [
        {"entry": "clause RB-SIZE-1", "reason": "was off once", "link": ""}
    ]
    known = [case["known"] for case in document["cases"] if case["outcome"] == "deviation"]
    assert known
    assert {json.dumps(k) for k in known} == {
        json.dumps({"entry": "clause RB-REPLAY-4", "reason": "post-conv not yet", "link": LINK})
    }
    exact = [c for c in document["cases"] if c["id"].startswith("replay-rebuild-000-float64")]
    assert [(c["outcome"], c["distance"], c["bound"]) for c in exact] == [("passed", 0.0, 1e-12)]
    page = run_module("ssm_rollback_spec.tools.cli", "report", str(vectors), str(check)).stdout
    assert "| [RB-REPLAY-4](SPEC.md#rb-replay-4) | **DEVIATION**<br>" in page
    assert f"*fails, known, linked*<br>[clause RB-REPLAY-4]({LINK}): post-conv not yet" in page
    # The overview row and the section both name the implementation and its release.
    assert "(Python reference)](#impl-" in page
    assert "ssm\\_rollback\\_spec.rollback (Python reference), " + __version__ in page


def test_the_html_page_runs_no_script_and_fetches_nothing(
    capsys: pytest.CaptureFixture[str], reports: list[str]
) -> None:
    status, page, _ = _run(capsys, *reports, "--html", "-")
    assert status == 0
    assert page.startswith("<!DOCTYPE html>\n")
    lowered = page.lower()
    assert "<script" not in lowered
    assert " src=" not in lowered
    assert "url(" not in lowered
    assert "@import" not in lowered
    # The only address off the page is the runtime's issue a deviation entry names.
    assert set(re.findall(r'href="(https?://[^"]*)"', page)) == {LINK}


def test_the_committed_engines_page_has_each_engines_pinned_release() -> None:
    # The kernels tier checks the page against a fresh run; this says at once
    # when an engine's pinned release moved and the page was not regenerated.
    page = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    headings = [heading for heading, _ in _sections(page)]
    # The engines' kernels; the llama.cpp tier checks its own (tests/llamacpp/results.py).
    # The older vLLM releases of docs/engines.md's real-bugs table are implementations of their own.
    pinned = [h for h in headings if "(adapters/engines)" in h and "unsupported" not in h]
    releases = [heading.rsplit(", ", 1)[1] for heading in pinned]
    assert releases == sorted(engine.wheel.requirement for engine in ENGINES.values())
    assert all(rows for _, rows in _sections(page))


def test_the_committed_engines_page_holds_no_verdict_the_hosts_scheduler_decides() -> None:
    # A race is seen or not as the host schedules it
    # (docs/protocol-race-evidence.md): the page a drift test compares byte for byte
    # must hold none, so its runs send no race.
    page = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    assert "RB-PUB-4" not in _cells(page)
    assert "NOT OBSERVED**" not in page


def test_names_that_differ_only_in_case_get_a_badge_and_an_anchor_each(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    same = [_property("t::a", ["RB-MODE-1"], "passed")]
    paths = [
        _write(tmp_path, f"{name}.json", _check_report(name, "1.0", same))
        for name in ("My Runtime", "my-runtime")
    ]
    status, page, _ = _run(capsys, *paths, "--html", "-", "--badges", str(tmp_path / "badges"))
    assert status == 0
    assert sorted(p.name for p in (tmp_path / "badges").iterdir()) == [
        "my-runtime-1-0-2.json",
        "my-runtime-1-0.json",
    ]
    assert re.findall(r'<section id="([^"]+)"', page) == [
        "impl-my-runtime-1-0",
        "impl-my-runtime-1-0-2",
    ]


_ROWS_PAST: Final = "test_replay.py::test_the_rows_past_the_accepted_ones_change_nothing"


def test_a_check_report_gives_a_replay_propertys_distance_and_one_without_still_reads(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    passed = _property(_ROWS_PAST, ["RB-REPLAY-2"], "passed")
    measured = passed | {"distance": 0.00125, "bound": 0.002}
    past = _property(_ROWS_PAST, ["RB-REPLAY-2"], "failed") | {"distance": 0.03, "bound": 0.02}
    paths = [
        _write(tmp_path, "new.json", _check_report("new-runtime", "2.0", [measured])),
        # A report written before check kept distances.
        _write(tmp_path, "old.json", _check_report("old-runtime", "1.0", [passed])),
        _write(tmp_path, "past.json", _check_report("past-runtime", "0.9", [past])),
    ]
    status, page, _ = _run(capsys, *paths)
    assert status == 0
    assert _cells(page)["RB-REPLAY-2"] == [
        "**PASS**<br>largest relative error 0.00125 (bound 0.002)",
        "**PASS**",
        "**FAIL**<br>largest relative error 0.03 (bound 0.02)<br>*fails, not listed*",
    ]
    status, page, _ = _run(capsys, *paths, "--bounds-only")
    assert status == 0
    assert _cells(page)["RB-REPLAY-2"] == [
        "**PASS**<br>within bound 0.002",
        "**PASS**",
        "**FAIL**<br>*fails, not listed*",
    ]


def _logged(*measured: list[float]) -> dict[str, Any]:
    """What check's plugin records of a passing property that measured ``measured``."""
    report = pytest.TestReport(
        _ROWS_PAST,
        ("test_replay.py", 1, _ROWS_PAST),
        {},
        "passed",
        None,
        "call",
        user_properties=[("clause", "RB-REPLAY-2"), *((MEASURED, pair) for pair in measured)],
    )
    outcome_recorder.pytest_runtest_logreport(report)
    result: dict[str, Any] = dict(outcome_recorder._results.pop())  # noqa: SLF001 - the plugin's record
    return result


def test_check_keeps_the_distance_nearest_its_bound_of_all_a_property_measured() -> None:
    assert "distance" not in _logged()
    # Judged by its bound, not by its size: 0.001 is far past 1e-06, 0.003 well within 0.02.
    nearest = _logged([0.0, 1e-12], [0.003, 0.02], [0.001, 1e-06], [0.0, 0.02])
    assert (nearest["distance"], nearest["bound"]) == (0.001, 1e-06)
    within = _logged([0.0, 1e-12], [0.003, 0.02], [0.0015, 0.002])
    assert (within["distance"], within["bound"]) == (0.0015, 0.002)
    # Every reply exact: the loosest bound, the most the property allowed.
    exact = _logged([0.0, 1e-12], [0.0, 1e-06])
    assert (exact["distance"], exact["bound"]) == (0.0, 1e-06)
    assert exact["outcome"] == "passed"
    assert exact["clauses"] == ["RB-REPLAY-2"]


def test_a_page_written_is_summed_up_in_one_line_on_stderr(
    capsys: pytest.CaptureFixture[str], reports: list[str], tmp_path: Path
) -> None:
    page = tmp_path / "page.html"
    status, out, err = _run(capsys, *reports, "--html", str(page))
    assert (status, out) == (0, "")
    clauses = len(CLAUSES)
    assert err == (
        f"ssm-rollback-spec report: {len(reports)} reports of 2 implementations over"
        f" {clauses} clauses;"
        f" wrote {page}\n"
    )
    # A page on stdout stays the page alone.
    status, out, err = _run(capsys, *reports)
    assert "| Clause |" in out
    assert "wrote" not in out
    assert err.endswith("; wrote the page to stdout\n")


def test_a_report_given_twice_is_read_once_with_a_warning(
    capsys: pytest.CaptureFixture[str], reports: list[str], tmp_path: Path
) -> None:
    once = tmp_path / "once.md"
    twice = tmp_path / "twice.md"
    _run(capsys, *reports, "--markdown", str(once))
    status, _, err = _run(capsys, reports[0], *reports, "--markdown", str(twice))
    assert status == 0
    assert err.splitlines()[0] == (
        f"ssm-rollback-spec report: warning: {reports[0]} is given twice; read once"
    )
    assert twice.read_bytes() == once.read_bytes()


def test_two_reports_of_one_command_for_one_release_are_combined_with_a_warning(
    capsys: pytest.CaptureFixture[str], reports: list[str], tmp_path: Path
) -> None:
    copy = tmp_path / "copy.json"
    copy.write_bytes(Path(reports[0]).read_bytes())
    status, _, err = _run(capsys, reports[0], str(copy), "--markdown", str(tmp_path / "p.md"))
    assert status == 0
    assert err.splitlines()[0] == (
        f"ssm-rollback-spec report: warning: {copy} and {reports[0]} are both check (profile ci)"
        " reports of my-runtime <rollback> 1.4.2; their cells are combined, each clause its"
        " worse outcome"
    )
    # Reports of different implementations, or commands, are no such pair.
    _, _, err = _run(capsys, *reports, "--markdown", str(tmp_path / "q.md"))
    assert "warning" not in err


def _reasoned_reports(folder: Path, /) -> list[str]:
    """One implementation that skips, is not observed racing, and fails a later clause."""
    report = _check_report(
        "reasoned",
        "2.0",
        [
            _property("t::a", ["RB-PARSE-1"], "passed"),
            _property("t::b", ["RB-PARSE-2"], "failed", "wrong text"),
            _property("t::c", ["RB-SIZE-1"], "skipped", "not offered: no usize op\nmore"),
            _property("t::d", ["RB-SIZE-2"], "skipped", ""),
            _property("t::e", ["RB-PUB-4"], "not-observed", "no race seen in 200 tries"),
        ],
    )
    return [_write(folder, "reasoned.json", report)]


def test_the_html_page_gives_totals_first_and_one_heading_per_family(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, page, _ = _run(capsys, *_reasoned_reports(tmp_path), "--html", "-")
    assert status == 0
    totals = re.search(r'<tr class="totals"><th scope="row">Totals</th><td>(.*?)</td></tr>', page)
    assert totals is not None
    uncited = len(CLAUSES) - 5
    assert totals[1] == f"1 FAIL, 1 NOT OBSERVED, 2 SKIP, 1 PASS, {uncited} —"
    assert page.index('class="totals"') < page.index('<tr id="rb-mode-1">')
    headings = re.findall(r'<th colspan="2" scope="rowgroup">(.*?)</th>', page)
    assert len(headings) == len(SECTIONS)
    assert headings[1] == "Parsing <code>--ssm-rollback-mode</code> (RB-PARSE)"
    # No row repeats its family's title.
    assert "Replay rollback (the replay profile)" not in page.replace(
        "Replay rollback (the replay profile) (RB-REPLAY)", ""
    )
    # Failures first within their family: RB-PARSE-2 before RB-PARSE-1.
    assert page.index('<tr id="rb-parse-2">') < page.index('<tr id="rb-parse-1">')
    # The explanation comes after the table.
    assert page.index("</table>") < page.index("<h2>Reading the table</h2>")


def test_every_skip_and_not_observed_cell_gives_its_reason_as_title_and_footnote(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _, page, _ = _run(capsys, *_reasoned_reports(tmp_path), "--html", "-")
    cells = re.findall(r'<td class="(skipped|not-observed)"(?: title="([^"]*)")?>(.*?)</td>', page)
    assert len(cells) == 3
    notes = dict(re.findall(r'<li id="(reason-\d+)">(.*?)</li>', page))
    for _, title, content in cells:
        [target] = re.findall(r'<sup><a href="#(reason-\d+)">\d+</a></sup>', content)
        assert title == notes[target]
    assert sorted(notes.values()) == [
        "no race seen in 200 tries",
        "not offered: no usize op",
        "the report states no reason",
    ]
    assert f'<h2 id="reasons">{REASONS_HEADING}</h2>' in page


def test_a_spec_url_makes_every_clause_link_absolute(
    capsys: pytest.CaptureFixture[str], reports: list[str]
) -> None:
    address = "https://example.org/spec/v1.0.0/SPEC.md"
    for flag in ("--html", "--markdown"):
        _, page, _ = _run(capsys, *reports, flag, "-", "--spec-url", address)
        linked = re.findall(r"(?:href=\"|\]\()([^\"#)]*)#(rb-[a-z]+-\d+)", page)
        # The HTML page's table has every clause; the markdown page those judged.
        shown = CLAUSES if flag == "--html" else list(_cells(page))
        assert {clause for _, clause in linked} == {clause.lower() for clause in shown}
        assert {target for target, _ in linked} == {address}


def test_an_implementation_spliced_in_or_out_gives_the_page_report_writes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # A tier moves its implementations into docs/results.md, row and section, so
    # the markdown page must be one that such a move leaves as report writes it.
    [reasoned] = _reasoned_reports(tmp_path)
    passing = [_property("t", ["RB-MODE-1"], "passed")]
    plain = _write(tmp_path, "plain.json", _check_report("alpha", "1", passing))
    late = _write(tmp_path, "late.json", _check_report("zeta", "9", passing))
    pages = []
    for chosen in ([plain, reasoned, late], [plain, late], [reasoned]):
        _, page, _ = _run(capsys, *chosen, "--markdown", "-")
        pages.append(page)
    every, others, alone = pages
    moved = part(alone, "reasoned, 2.0")
    assert moved is not None
    assert with_parts(others, [moved]) == every
    assert with_parts(every, [moved]) == every
    assert without_parts(every, ["reasoned, 2.0"]) == others
    assert [found.heading for found in parts(every)] == ["alpha, 1", "reasoned, 2.0", "zeta, 9"]


def test_every_skip_and_not_observed_markdown_cell_gives_its_reason_as_a_footnote(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _, page, _ = _run(capsys, *_reasoned_reports(tmp_path), "--markdown", "-")
    cells = _cells(page)
    notes = dict(re.findall(r"^(\[\^[a-z0-9-]+\]): (.*)$", page, flags=re.MULTILINE))
    reasons = {
        clause: [notes[label] for label in re.findall(r"\[\^[a-z0-9-]+\]", cell)]
        for clause, (cell,) in cells.items()
        if cell.startswith(("**SKIP**", "**NOT OBSERVED**"))
    }
    assert reasons == {
        "RB-PUB-4": ["no race seen in 200 tries"],
        "RB-SIZE-1": ["not offered: no usize op"],
        "RB-SIZE-2": ["the report states no reason"],
    }
    # Numbered within the implementation, in its section's order (worst first);
    # defined in its section.
    assert list(notes) == [f"[^reasoned-{_digest('reasoned-2-0')}-{n}]" for n in (1, 2, 3)]
    assert notes[f"[^reasoned-{_digest('reasoned-2-0')}-1]"] == "no race seen in 200 tries"
    assert page.index("reasoned, 2.0\n") < page.index(next(iter(notes)) + ":")


def _digest(key: str, /) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:4]


def _committed() -> str:
    return (ROOT / "docs" / "results.md").read_text(encoding="utf-8")


def test_every_implementation_of_the_committed_page_moved_out_and_in_gives_the_page() -> None:
    page = _committed()
    found = parts(page)
    assert len(found) == len({f.heading for f in found}) >= 9
    for moved in found:
        assert with_parts(without_parts(page, [moved.heading]), [moved]) == page, moved.heading


def test_the_committed_page_has_no_all_dash_row_and_no_long_header() -> None:
    page = _committed()
    assert "| Clause |" not in page.split("## Implementations")[0]
    assert all(rows and "—" not in rows.values() for _, rows in _sections(page))
    table = [line for line in page.splitlines() if line.startswith("| Implementation |")]
    assert len(table) == 1
    assert max(len(cell) for cell in table[0].split(" | ")) < 30


def test_the_committed_page_gives_each_tier_report_implementation_as_its_report_gives() -> None:
    # The tier reports the page is built from are committed; their implementations'
    # model-level line is theirs alone (the ggml report judges no model).
    page = _committed()
    for tier in (llamacpp_results.COMMITTED_REPORT, e2e_results.COMMITTED_REPORT):
        generated = markdown(tier_reports(read_tier_report(tier)))
        for made in parts(generated):
            committed = part(page, made.heading)
            assert committed is not None, made.heading
            assert (
                dict(_sections(f"\n{committed.section}"))[made.heading][_CLAUSE]
                == dict(_sections(f"\n{made.section}"))[made.heading][_CLAUSE]
            )
            if made.heading != llamacpp_results.NAME:
                assert committed == made, made.heading


def test_the_committed_tier_reports_are_valid_and_hold_each_finding_table_test() -> None:
    schema = json.loads(
        (ROOT / "spec" / "results" / "schemas" / "tier.schema.json").read_text(encoding="utf-8")
    )
    for tier, findings in (
        (llamacpp_results.COMMITTED_REPORT, llamacpp_results.FINDINGS),
        (e2e_results.COMMITTED_REPORT, e2e_results.FINDINGS),
    ):
        document = json.loads(tier.read_text(encoding="utf-8"))
        jsonschema.validate(document, schema)
        assert read_tier_report(tier)["tests"] == document["tests"]
        names = {test["test"] for test in document["tests"]}
        for finding in findings:
            file, _, test = finding["test"].partition("::")
            function, _, parameter = test.partition("[")
            assert any(
                name.startswith(f"{file}::{function}") and parameter.removesuffix("]") in name
                for name in names
            ), finding["test"]


def test_each_finding_table_names_its_tiers_own_tests_and_pages_that_exist() -> None:
    for folder, findings in (
        ("llamacpp", llamacpp_results.FINDINGS),
        ("e2e", e2e_results.FINDINGS),
    ):
        for finding in findings:
            file, _, test = finding["test"].partition("::")
            name, _, parameter = test.partition("[")
            source = (ROOT / "tests" / folder / file).read_text(encoding="utf-8")
            assert f"\ndef {name}(" in source, name
            assert parameter.removesuffix("]") in source, parameter
            if finding["page"]:
                assert (ROOT / finding["page"]).is_file(), finding["page"]
            assert finding["link"] == "" or WEB_ADDRESS.fullmatch(finding["link"])
            assert finding["detail"]


def test_the_llama_cpp_findings_are_the_tiers_own_cases_and_links() -> None:
    from tests.llamacpp import test_architectures, test_rollback  # noqa: PLC0415 - the tier's

    held = {
        f["test"].rsplit("[", 1)[1].removesuffix("]"): f["link"]
        for f in llamacpp_results.FINDINGS
        if f["test"].startswith("test_architectures.py::") and f["page"]
    }
    # A case llama.cpp has no report of says so in words, and links nothing.
    cases = test_architectures.CASES.items()
    assert held == {case: c.link if WEB_ADDRESS.fullmatch(c.link) else "" for case, c in cases}
    rollback = {
        f["test"].rsplit("[", 1)[1].removesuffix("]"): f["link"]
        for f in llamacpp_results.FINDINGS
        if f["test"].startswith("test_rollback.py::") and f["page"]
    }
    assert rollback == {
        "beside_other_sequences": test_rollback.DEVIATION_LINK,
        "whole_window": test_rollback.WHOLE_WINDOW_LINK,
    }


def test_the_e2e_findings_cite_every_page_the_tier_cites_but_the_one_the_note_names() -> None:
    source = (ROOT / "tests" / "e2e" / "test_speculation.py").read_text(encoding="utf-8")
    cited = set(re.findall(r"docs/findings/(vllm[a-z0-9_-]*\.md)", source))
    held = {f["page"].removeprefix("docs/findings/") for f in e2e_results.FINDINGS if f["page"]}
    outside = cited - held
    assert outside == {"vllm-cpu-one-token-prefill.md"}
    assert all(f"findings/{page}" in NOTE for page in outside)
    pins = (ROOT / "tests" / "e2e" / "requirements.txt").read_text(encoding="utf-8")
    assert f"\n{e2e_results.RELEASE}\n" in f"\n{pins}"


def test_no_static_record_of_outcomes_remains() -> None:
    for module in (llamacpp_results, e2e_results, kernels_results):
        names = set(vars(module))
        assert not names & {"RECORD", "PREBUILT_RECORD", "record_report", "write_record_report"}
    for findings in (llamacpp_results.FINDINGS, e2e_results.FINDINGS):
        assert all(set(finding) == {"test", "detail", "page", "link"} for finding in findings)
    sources = [
        (ROOT / "tests" / tier / "results.py").read_text(encoding="utf-8")
        for tier in ("llamacpp", "e2e", "kernels")
    ]
    assert not any('"outcome": "deviation"' in text or '"outcome": "passed",' in text
                   for text in sources[1:])  # fmt: skip


def test_the_older_vllm_releases_fail_their_real_bugs_batch_known_and_linked() -> None:
    from tests.kernels.test_vllm_batch import REAL_BUGS  # noqa: PLC0415 - the kernels tier's

    sections = dict(_sections(_committed()))
    for older in kernels_results.OLDER:
        bug = REAL_BUGS[older["bug"]]
        heading = (
            f"vllm engine kernels (adapters/engines), unsupported release, vllm=={bug.shipped}"
        )
        assert sections[heading]["RB-REPLAY-12"].startswith(
            "**DEVIATION**<br>*fails, known, linked*<br>"
            f"[case replay-batch-{bug.smallest}]({older['link']}): "
        )
        fixed = f"vllm engine kernels (adapters/engines), unsupported release, vllm=={bug.fixed}"
        assert sections[fixed]["RB-REPLAY-12"] == "**PASS**<br>within bound 0.004"
        # Judged on that one batch alone: no other clause but the refusals its file holds.
        assert list(sections[fixed]) == ["RB-PROTO-4", "RB-REPLAY-12"]
        assert list(sections[heading]) == ["RB-REPLAY-12", "RB-PROTO-4"]


def report_pages(folder: Path, reports: Sequence[Path], /) -> tuple[str, str, Path]:
    """``report`` over ``reports``: its markdown and HTML pages and its badges' folder."""
    badges = folder / "badges"
    markdown_path, html_path = folder / "page.md", folder / "page.html"
    arguments = [*map(str, reports), "--markdown", str(markdown_path), "--html", str(html_path)]
    arguments += ["--spec-url", "../SPEC.md", "--bounds-only", "--badges", str(badges)]
    assert main(["report", *arguments]) == 0
    return (
        markdown_path.read_text(encoding="utf-8"),
        html_path.read_text(encoding="utf-8"),
        badges,
    )


def check_report_gives_the_generators_columns(
    folder: Path, ggml: Path, reports: Sequence[Path], /
) -> None:
    """``report`` over ``reports`` gives the llama.cpp implementations the generator gives."""
    page, html_page, badges = report_pages(folder, reports)
    generated = llamacpp_results.markdown(ggml)
    for name in llamacpp_results.NAMES:
        mine = part(generated, name)
        assert mine is not None, name
        assert part(page, name) == mine, name
        # The HTML page and the badge say what the section says.
        assert f'<section id="impl-{mine.key}">' in html_page
        badge_file = badges / f"{mine.key}.json"
        document: dict[str, Any] = json.loads(badge_file.read_text(encoding="utf-8"))
        assert f": {document['message']} ({document['color']})" in mine.section


def test_report_over_the_committed_tier_reports_gives_the_generators_implementations(
    tmp_path: Path,
) -> None:
    ggml = tmp_path / "ggml-vectors.json"
    ggml.write_text(json.dumps({
        "implementation": "python adapters/llama-cpp/ggml_adapter.py", "spec_version": "1.0.0",
        "describe": {"name": llamacpp_results.GGML_NAME, "release": llamacpp_results.RELEASE},
        "cases": [{"id": "replay-1", "clauses": ["RB-REPLAY-1"], "outcome": "passed",
                   "detail": "", "distance": 0.0, "bound": 1e-6}],
    }), encoding="utf-8")  # fmt: skip
    check_report_gives_the_generators_columns(
        tmp_path / "out", ggml, [ggml, llamacpp_results.COMMITTED_REPORT]
    )


def test_ci_builds_its_html_page_after_the_tiers_from_the_folders_they_write() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    report = script.index("ssm-rollback-spec report ")
    step = script[report:].split("\n\n", 1)[0]
    for written in (llamacpp_results.REPORT, llamacpp_results.TIER_REPORT, e2e_results.TIER_REPORT):
        assert f"{written.parent.relative_to(ROOT)}/*.json" in step, written
    assert "--html build/results/index.html" in step
    # The tiers write their reports, so the page is built after them.
    assert script.index("python -m pytest -m e2e tests/e2e") < report
    assert script.index("tests/llamacpp") < report
