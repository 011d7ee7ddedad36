# SPDX-License-Identifier: MIT OR Apache-2.0
"""``report``: the reports of check and vectors run side by side, byte-stable, with badges."""

from __future__ import annotations

import hashlib
import html
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

from adapters.engines.registry import ENGINES
from ssm_rollback_spec import __version__
from ssm_rollback_spec.harness import outcome_recorder
from ssm_rollback_spec.harness.clauses import CLAUSES
from ssm_rollback_spec.harness.files import MAX_FILE_BYTES
from ssm_rollback_spec.harness.pytest_plugin import MEASURED
from ssm_rollback_spec.harness.versions import CURRENT
from ssm_rollback_spec.releases import LLAMA_CPP_COMMIT
from ssm_rollback_spec.results import WEB_ADDRESS, Report, read_report
from ssm_rollback_spec.results.matrix import SECTIONS, Standing
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


def _cells(page: str, /) -> dict[str, list[str]]:
    """Each clause row's cells, by clause, from the markdown table."""
    found = {}
    for row in page.splitlines():
        if match := re.match(r"\| \[(RB-[A-Z]+-\d+)\]", row):
            found[match[1]] = row.removesuffix(" |").split(" | ")[1:]
    return found


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


def test_the_page_has_every_clause_as_a_row_and_every_implementation_as_a_column(
    capsys: pytest.CaptureFixture[str], reports: list[str]
) -> None:
    status, page, _ = _run(capsys, *reports, "--spec-url", "../SPEC.md")
    assert status == 0
    rows = [line for line in page.splitlines() if line.startswith("| [RB-")]
    assert sorted(_cells(page), key=CLAUSES.index) == list(CLAUSES)
    assert len(rows) == len(CLAUSES)
    assert rows[0].startswith("| [RB-MODE-1](../SPEC.md#rb-mode-1) | ")
    header = next(line for line in page.splitlines() if line.startswith("| Clause |"))
    assert header == (
        "| Clause | my-runtime &lt;rollback&gt;<br>1.4.2 | other-runtime<br>release not stated |"
    )
    assert all(row.count(" | ") == 2 for row in rows)


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
    assert cells["RB-MODE-1"][0] == "—"
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
    assert "| [RB-PUB-4](SPEC.md#rb-pub-4) | **timed-out** | — |" in page
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
            section = line[3:]
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
    assert "ssm\\_rollback\\_spec.rollback (Python reference)<br>" + __version__ in page


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


def test_the_committed_engines_page_has_every_clause_and_each_engines_pinned_release() -> None:
    # The kernels tier checks the page against a fresh run; this says at once
    # when an engine's pinned release moved and the page was not regenerated.
    page = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    header = next(line for line in page.splitlines() if line.startswith("| Clause |"))
    columns = header.strip("| ").split(" | ")[1:]
    # The engines' kernels columns; the llama.cpp tier checks its own (tests/llamacpp/results.py).
    # The older vLLM releases of docs/engines.md's real-bugs table are columns of their own.
    pinned = [c for c in columns if "(adapters/engines)" in c and "unsupported" not in c]
    releases = [cell.split("<br>")[1] for cell in pinned]
    assert releases == sorted(engine.wheel.requirement for engine in ENGINES.values())
    assert sorted(_cells(page), key=CLAUSES.index) == list(CLAUSES)


def test_the_committed_engines_page_holds_no_verdict_the_hosts_scheduler_decides() -> None:
    # A race is seen or not as the host schedules it
    # (docs/protocol-race-evidence.md): the page a drift test compares byte for byte
    # must hold none, so its runs send no race.
    page = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    assert set(_cells(page)["RB-PUB-4"]) == {"—"}
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
    assert "Replay rollback: an executable model (draft)" not in page.replace(
        "Replay rollback: an executable model (draft) (RB-REPLAY)", ""
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
        assert {clause for _, clause in linked} == {clause.lower() for clause in CLAUSES}
        assert {target for target, _ in linked} == {address}


def test_a_column_spliced_in_or_out_gives_the_page_report_writes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # The llama.cpp tier moves its column into docs/results.md row by row, so
    # the markdown page must be one that such a move leaves as report writes it.
    from tests.llamacpp.results import page_column, with_column, without_column  # noqa: PLC0415

    [reasoned] = _reasoned_reports(tmp_path)
    passing = [_property("t", ["RB-MODE-1"], "passed")]
    plain = _write(tmp_path, "plain.json", _check_report("alpha", "1", passing))
    pages = []
    for chosen in ([plain, reasoned], [plain], [reasoned]):
        _, page, _ = _run(capsys, *chosen, "--markdown", "-")
        pages.append(page)
    both, alone, spliced = pages
    assert with_column(alone, page_column(spliced, "reasoned")) == both
    assert without_column(both, "reasoned") == alone


def test_the_markdown_page_gives_totals_first_one_row_per_family_and_failures_first(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, page, _ = _run(capsys, *_reasoned_reports(tmp_path), "--markdown", "-")
    assert status == 0
    rows = [line for line in page.splitlines() if line.startswith("| ")]
    uncited = len(CLAUSES) - 5
    assert rows[2] == f"| **Totals** | 1 FAIL, 1 NOT OBSERVED, 2 SKIP, 1 PASS, {uncited} — |"
    families = [row for row in rows[3:] if row.startswith("| **")]
    assert len(families) == len(SECTIONS)
    assert families[1] == "| **Parsing `--ssm-rollback-mode` (RB-PARSE)** |  |"
    # No row repeats its family's title.
    assert page.count("Replay rollback: an executable model (draft)") == 1
    # Failures first within their family: RB-PARSE-2 before RB-PARSE-1.
    clauses = [row.split("]")[0].removeprefix("| [") for row in rows[3:] if row.startswith("| [")]
    assert clauses.index("RB-PARSE-2") < clauses.index("RB-PARSE-1")
    # The explanation comes after the table.
    assert page.index(rows[-1]) < page.index("## Reading the table")


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
    # Numbered within the column, in SPEC.md's order; defined in its section.
    assert list(notes) == [f"[^reasoned-{_digest('reasoned-2-0')}-{n}]" for n in (1, 2, 3)]
    assert page.index("### reasoned, 2.0") < page.index(next(iter(notes)) + ":")


def _digest(key: str, /) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:4]


def test_every_column_of_the_committed_page_moved_out_and_in_gives_the_page() -> None:
    # The kernels tier keeps the other runs' columns from the committed page
    # (tests/kernels/results.py, with_other_tiers), so each must be one that
    # such a move leaves as the generator writes the page: its rows in order.
    page = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    found = llamacpp_results.columns(page)
    # Each real bug's two releases, llama.cpp's two columns and the e2e tier's.
    others = 2 * len(kernels_results.OLDER) + len(llamacpp_results.NAMES) + 1
    assert len(found) == len(ENGINES) + others
    for column in found:
        assert llamacpp_results.beside(page, column) == page, column[0]


def _committed_cell(header_start: str, clause: str, /) -> str:
    page = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    (column,) = [c for c in llamacpp_results.columns(page) if c[0].startswith(header_start)]
    return column[2][clause]


def _record_page() -> str:
    """The page the records give beside an empty ggml report of the pinned release."""
    ggml = Report(
        llamacpp_results.GGML_NAME, llamacpp_results.RELEASE, "vectors run", "1.0.0", (), ()
    )
    return llamacpp_results.render([ggml])


def _column_findings() -> dict[str, tuple[llamacpp_results.Finding, ...]]:
    """Each llama.cpp column's name, and the findings its RB-REPLAY-14 cell carries."""
    v050 = tuple(f for f in llamacpp_results.ARCHITECTURES_RECORD if llamacpp_results.on_v050(f))
    sdist = tuple(f for f in llamacpp_results.ARCHITECTURES_RECORD if f not in v050)
    return {
        llamacpp_results.NAME: (*llamacpp_results.RECORD, *sdist),
        llamacpp_results.PREBUILT_NAME: (*llamacpp_results.PREBUILT_RECORD, *v050),
    }


def test_the_committed_llama_cpp_columns_carry_the_records_model_level_findings() -> None:
    # The records give each llama.cpp build's RB-REPLAY-14 cell whatever the ggml report holds.
    rendered = _record_page()
    page = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    for name, findings in _column_findings().items():
        cell = _committed_cell(f"{name}<br>", "RB-REPLAY-14")
        assert cell == llamacpp_results.page_column(rendered, name)[2]["RB-REPLAY-14"], name
        assert cell.startswith("**DEVIATION**<br>*fails, known, linked*<br>")
        deviations = [finding for finding in findings if finding["outcome"] == "deviation"]
        assert deviations, name
        for finding in deviations:
            assert f"]({finding['page']}): " in cell
            assert f"llama.cpp: {finding['link']}" in cell
    assert llamacpp_results.RECORD_COMMAND in page
    assert llamacpp_results.PREBUILT_COMMAND in page


def test_the_committed_prebuilt_column_is_what_its_record_gives() -> None:
    # It has no run: header, totals, cells and section all come from the records.
    page = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    name = llamacpp_results.PREBUILT_NAME
    committed = llamacpp_results.page_column(page, name)
    assert committed == llamacpp_results.page_column(_record_page(), name)
    assert committed[0] == f"{name}<br>{llamacpp_results.PREBUILT_RELEASE}"
    assert committed[1] == f"1 DEVIATION, {len(CLAUSES) - 1} —"


def test_the_committed_llama_cpp_section_ends_in_the_architectures_table() -> None:
    page = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    section = llamacpp_results.page_column(page)[3]
    table = llamacpp_results.architectures_table()
    assert section.rstrip("\n").endswith(table.rstrip("\n"))
    assert page.count(llamacpp_results.ARCHITECTURES_TITLE) == 1
    rows = [line for line in table.splitlines() if line.startswith("`")]
    assert [row.split(" | ")[0].strip("`") for row in rows] == [
        architecture["arch"] for architecture in llamacpp_results.ARCHITECTURES
    ]
    # No row of it reads as a row of the page's table, which starts with a pipe.
    assert not any(line.startswith("|") for line in table.splitlines())
    # Each failing case is linked to the page its finding links.
    for architecture in llamacpp_results.ARCHITECTURES:
        (row,) = [r for r in rows if r.startswith(f"`{architecture['arch']}` |")]
        cells = row.split(" | ")
        assert cells[2].startswith("**PASS**")
        assert cells[3].startswith("**DEVIATION** ")
        assert cells[3].count("](") == len(architecture["fails"])
        later = cells[4:] if architecture["v050"] else []
        assert [cell.split(" ", 1)[0] for cell in later] == (
            ["**PASS**", "**DEVIATION**"] if architecture["v050"] else []
        )
        if not architecture["v050"]:
            assert all(cell.startswith("**SKIP**: ") for cell in cells[4:])


def test_the_architectures_table_is_the_architecture_tiers_own_cases() -> None:
    # tests/llamacpp/test_architectures.py judges what the table says, and fails its
    # cases on the architectures it names: the page turns red when either moves.
    from tests.llamacpp import test_architectures as tier  # noqa: PLC0415 - the tier's module

    assert [a["arch"] for a in llamacpp_results.ARCHITECTURES] == [g.value for g in tier.Generated]
    for architecture in llamacpp_results.ARCHITECTURES:
        arch = tier.Generated(architecture["arch"])
        assert architecture["v050"] == (arch in tier.IN_V050), arch
        fails = [case for case, held in tier.CASES.items() if arch in held.fails_on]
        assert list(architecture["fails"]) == fails, arch


def test_the_architectures_table_claims_drawn_rounds_only_where_the_tier_draws_them() -> None:
    # A cell that says drawn rounds PASS names a build whose drawn-rounds test the
    # tier has; a cell never says they were not run while the tier runs them.
    from tests.llamacpp import test_architectures as tier  # noqa: PLC0415 - the tier's module

    drawn = [name for name in dir(tier) if name.startswith("test_") and "drawn_rounds" in name]
    assert [name for name in drawn if "v050" in name], drawn
    # The sdist build's drawn rounds, each way.
    assert callable(
        tier.test_checkpoint_rollback_keeps_the_logits_of_plain_decoding_on_every_architecture
    )
    assert callable(
        tier.test_snapshot_rollback_of_one_sequence_keeps_the_logits_of_plain_decoding_on_every_architecture
    )
    table = llamacpp_results.architectures_table()
    assert "not run" not in table
    for row in (line for line in table.splitlines() if line.startswith("`")):
        cells = row.split(" | ")
        listed = cells[4].startswith("**PASS**")
        assert all(("drawn rounds" in cell) == listed for cell in cells[4:]), row
        assert all("drawn rounds" in cell for cell in cells[2:4]), row


def test_the_architectures_record_gives_both_builds_every_case_of_the_tier() -> None:
    from tests.llamacpp import test_architectures as tier  # noqa: PLC0415 - the tier's module

    source = (ROOT / "tests" / "llamacpp" / "test_architectures.py").read_text(encoding="utf-8")
    by_build: dict[bool, dict[str, str]] = {True: {}, False: {}}
    for finding in llamacpp_results.ARCHITECTURES_RECORD:
        name, _, parameter = finding["test"].removeprefix("test_architectures.py::").partition("[")
        assert callable(getattr(tier, name)), name
        if finding["outcome"] == "deviation":
            by_build[llamacpp_results.on_v050(finding)][parameter.removesuffix("]")] = finding[
                "link"
            ]
    expected = {case: held.link for case, held in tier.CASES.items()}
    assert by_build == {True: expected, False: expected}
    # The split by name: the module's v0.5.0 tests, and only they, say v050.
    v050 = {n for n in dir(tier) if n.startswith("test_") and "v050" in n}
    assert v050 == {
        f["test"].removeprefix("test_architectures.py::").partition("[")[0]
        for f in llamacpp_results.ARCHITECTURES_RECORD
        if llamacpp_results.on_v050(f)
    }
    assert "def on_v050(" in source


def test_every_llama_cpp_finding_links_a_page_that_exists() -> None:
    # A finding with no page of its own links the test that holds it; once its
    # page is written under docs/findings/, the record must link that page.
    docs = ROOT / "docs"
    for findings in _column_findings().values():
        for finding in findings:
            if finding["outcome"] == "deviation":
                assert (docs / finding["page"]).is_file(), finding["page"]
    past = [
        f for f in llamacpp_results.ARCHITECTURES_RECORD if f["test"].endswith("[past_the_window]")
    ]
    assert len(past) == 2
    written = sorted((docs / "findings").glob("llamacpp-dsv4-*.md"))
    for finding in past:
        if written:
            assert finding["page"] == f"findings/{written[0].name}"
        else:
            assert finding["page"] == "../tests/llamacpp/test_architectures.py"


def test_the_prebuilt_record_names_the_tiers_own_tests_links_and_release() -> None:
    from tests.llamacpp import test_prebuilt, test_rollback  # noqa: PLC0415 - the tier's modules

    source = (ROOT / "tests" / "llamacpp" / "test_prebuilt.py").read_text(encoding="utf-8")
    # test_prebuilt.py runs test_rollback.py's shrunk calls, with their links.
    links = {
        "beside_other_sequences": test_rollback.DEVIATION_LINK,
        "whole_window": test_rollback.WHOLE_WINDOW_LINK,
    }
    assert 'DEVIATION_ROUNDS, DEVIATION_LINK, id="beside_other_sequences"' in source
    assert 'WHOLE_WINDOW_ROUNDS, WHOLE_WINDOW_LINK, id="whole_window"' in source
    deviations = {}
    for finding in llamacpp_results.PREBUILT_RECORD:
        name, _, parameter = finding["test"].removeprefix("test_prebuilt.py::").partition("[")
        assert callable(getattr(test_prebuilt, name)), name
        if parameter:
            assert f'id="{parameter.removesuffix("]")}"' in source
        if finding["outcome"] == "deviation":
            deviations[parameter.removesuffix("]")] = finding["link"]
    assert deviations == links
    script = (ROOT / "adapters" / "llama-cpp" / "prebuilt.py").read_text(encoding="utf-8")
    pinned = re.search(r'^PINNED: Final = "([^"]+)"$', script, flags=re.MULTILINE)
    assert pinned is not None
    release = test_prebuilt._RELEASE  # noqa: SLF001 - the tier's pinned release
    stated = llamacpp_results.PREBUILT_RELEASE
    assert stated == f"node-llama-cpp=={pinned[1]} (llama.cpp {release})"
    assert f'"{pinned[1]}",' in source


def test_the_record_names_the_llama_cpp_tiers_own_tests_and_links() -> None:
    # tests/llamacpp/test_rollback.py runs what the record says it found.
    from tests.llamacpp import test_rollback  # noqa: PLC0415 - the llama.cpp tier's module

    source = (ROOT / "tests" / "llamacpp" / "test_rollback.py").read_text(encoding="utf-8")
    links = {"beside_other_sequences": test_rollback.DEVIATION_LINK}
    links["whole_window"] = test_rollback.WHOLE_WINDOW_LINK
    pages = {
        "beside_other_sequences": "findings/llamacpp-snapshot-beside-other-sequences.md",
        "whole_window": "findings/llamacpp-snapshot-whole-window.md",
    }
    deviations = {}
    for finding in llamacpp_results.RECORD:
        name, _, parameter = finding["test"].removeprefix("test_rollback.py::").partition("[")
        assert callable(getattr(test_rollback, name)), name
        if parameter:
            assert f'id="{parameter.removesuffix("]")}"' in source
        if finding["outcome"] == "deviation":
            deviations[parameter.removesuffix("]")] = (finding["link"], finding["page"])
    assert deviations == {key: (links[key], pages[key]) for key in links}
    assert f'llamacpp["commit"] == "{LLAMA_CPP_COMMIT}"' in source


def test_the_older_vllm_columns_fail_their_real_bugs_batch_known_and_linked() -> None:
    from tests.kernels.test_vllm_batch import REAL_BUGS  # noqa: PLC0415 - the kernels tier's

    for older in kernels_results.OLDER:
        bug = REAL_BUGS[older["bug"]]
        cell = _committed_cell(
            f"vllm engine kernels (adapters/engines), unsupported release<br>vllm=={bug.shipped}",
            "RB-REPLAY-12",
        )
        assert cell.startswith(
            "**DEVIATION**<br>*fails, known, linked*<br>"
            f"[case replay-batch-{bug.smallest}]({older['link']}): "
        )


def test_each_fixed_vllm_release_passes_the_batch_its_bug_failed_beside_it() -> None:
    from tests.kernels.test_vllm_batch import REAL_BUGS  # noqa: PLC0415 - the kernels tier's

    for older in kernels_results.OLDER:
        bug = REAL_BUGS[older["bug"]]
        header = f"vllm engine kernels (adapters/engines), unsupported release<br>vllm=={bug.fixed}"
        assert _committed_cell(header, "RB-REPLAY-12") == "**PASS**<br>within bound 0.004"
        # Judged on that one batch alone, as the release that shipped the bug is: no
        # other clause is run but the refusals that batch's file holds, not offered.
        page = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
        (column,) = [c for c in llamacpp_results.columns(page) if c[0] == header]
        (shipped,) = [c for c in llamacpp_results.columns(page) if c[0].endswith(bug.shipped)]
        assert column[1] == f"1 SKIP, 1 PASS, {len(CLAUSES) - 2} —"
        assert shipped[1] == f"1 DEVIATION, 1 SKIP, {len(CLAUSES) - 2} —"


def test_a_ggml_report_of_another_llama_cpp_than_the_record_is_refused() -> None:
    name = llamacpp_results.GGML_NAME
    moved = Report(name, "llama-cpp-python==0.4.0", "vectors run", "1.0", (), ())
    with pytest.raises(RuntimeError) as raised:
        llamacpp_results.with_record([moved])
    assert str(raised.value) == (
        "the llama.cpp tier's record is of llama-cpp-python==0.3.36 (llama.cpp 0c1e57098), its"
        " ggml report of llama-cpp-python==0.4.0: run the tier and update RECORD in"
        " tests/llamacpp/results.py"
    )


# The llama.cpp records as --json reports (write_record_reports): docs/results.md's
# llama.cpp columns are built from the ggml report and the tier's records, but the
# HTML page .ci/run builds reads reports alone. What report makes of the records'
# reports is held to what the page generator gives: every cell, the totals, the
# badge, and each finding's entry, where a report can only link a web address
# (llama.cpp's report; the finding page is named in the reason).

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


def _e2e_column(page: str, /) -> llamacpp_results.Column:
    return llamacpp_results.page_column(page, e2e_results.NAME)


def test_the_committed_page_has_the_e2e_tiers_column_as_its_record_gives() -> None:
    committed = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    generated = llamacpp_results.render([e2e_results.record_report()])
    assert _e2e_column(committed) == _e2e_column(generated)
    header, totals, cells, _ = _e2e_column(committed)
    assert header == f"{e2e_results.NAME}<br>{e2e_results.RELEASE}"
    assert totals == f"1 DEVIATION, {len(CLAUSES) - 1} —"
    assert cells[_CLAUSE].startswith("**DEVIATION**<br>*fails, known, linked*")
    # Each deviation of the record is on the page, linked to its finding page.
    for finding in e2e_results.RECORD:
        if finding["outcome"] == "deviation":
            assert f"]({finding['page']}): " in cells[_CLAUSE], finding["test"]


def test_the_e2e_record_names_the_tiers_own_tests_and_the_pages_they_cite() -> None:
    source = (ROOT / "tests" / "e2e" / "test_speculation.py").read_text(encoding="utf-8")
    cited = set(re.findall(r"docs/findings/(vllm[a-z0-9_-]*\.(?:md|py))", source))
    recorded: set[str] = set()
    for finding in e2e_results.RECORD:
        file, _, test = finding["test"].partition("::")
        name, _, parameter = test.partition("[")
        assert file == "test_speculation.py"
        assert f"\ndef {name}(" in source, name
        assert parameter.removesuffix("]") in source, parameter
        if finding["outcome"] == "deviation":
            assert (ROOT / "docs" / finding["page"]).is_file(), finding["page"]
            assert finding["link"] == "" or WEB_ADDRESS.fullmatch(finding["link"])
            recorded.add(finding["page"].removeprefix("findings/"))
            # The test cites the page it holds, by the page or by its reproducer.
            reproducer = finding["page"].removeprefix("findings/").replace("-", "_")
            assert {finding["page"].removeprefix("findings/"), reproducer.replace(".md", ".py")} & (
                cited | set(re.findall(r'"(vllm_[a-z0-9_]+\.py)"', source))
            ), finding["test"]
    # Every page the tier cites is a deviation of the record, or the one outside its clause,
    # which the page's note names.
    pages = {page for page in cited if page.endswith(".md")}
    outside = pages - recorded
    assert outside == {"vllm-cpu-one-token-prefill.md"}
    assert all(f"findings/{page}" in kernels_results.NOTE for page in outside)


def test_the_e2e_record_is_of_the_release_the_tier_installs() -> None:
    pins = (ROOT / "tests" / "e2e" / "requirements.txt").read_text(encoding="utf-8")
    assert f"\n{e2e_results.RELEASE}\n" in f"\n{pins}"
    assert f"vllm-cpu=={e2e_results.release()}" == e2e_results.RELEASE


def test_report_over_the_e2e_record_report_gives_the_committed_pages_column(
    tmp_path: Path,
) -> None:
    written = e2e_results.write_record_report(tmp_path / "e2e" / "record.json")
    report = read_report(written)
    assert report.command.startswith("check (profile none: the e2e tier's record")
    assert [r.name for r in report.results] == [f["test"] for f in e2e_results.RECORD]
    markdown, _, badges = report_pages(tmp_path / "out", [written])
    theirs, mine = _e2e_column(markdown), _e2e_column(llamacpp_results.render([report]))
    assert theirs[:2] == mine[:2]
    assert _resolved(theirs) == _resolved(mine)
    committed = _e2e_column((ROOT / "docs" / "results.md").read_text(encoding="utf-8"))
    (badge,) = badges.iterdir()
    document: dict[str, Any] = json.loads(badge.read_text(encoding="utf-8"))
    assert f"{document['message']} ({document['color']})" == _badge_message(committed[3])


def test_ci_builds_its_html_page_after_the_e2e_tier_with_its_record() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    folder = e2e_results.REPORT.parent.relative_to(ROOT)
    report = script.index("ssm-rollback-spec report ")
    assert f"{folder}/*.json" in script[report:].split("\n\n", 1)[0]
    # The tier writes the record, so the page is built after it.
    assert script.index("python -m pytest -m e2e tests/e2e") < report
