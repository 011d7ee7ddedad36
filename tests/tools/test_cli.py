# SPDX-License-Identifier: MIT OR Apache-2.0
"""The command line: its report, its exit codes, and one clear line for every bad input."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from typing import TYPE_CHECKING, Final

import junitparser
import pytest

from ssm_rollback_spec import SPEC_VERSION, __version__
from ssm_rollback_spec.harness.clauses import REPLAY_PROFILE_CLAUSES
from ssm_rollback_spec.tools.outcomes import Row, clause_summary, print_report
from ssm_rollback_spec.tools.shipped import corpus_directory
from tests.child import ROOT, run_module
from tests.fakes import FAKES
from tests.traceability import spec_clauses

if TYPE_CHECKING:
    from pathlib import Path

WRONG_ADAPTER: Final = str(FAKES / "wrong_adapter.py")
CORPUS = corpus_directory()


def test_check_against_the_reference_reports_every_property_and_clause(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    finished = run_module("ssm_rollback_spec.tools.cli", "check", "--json", str(report))
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr
    assert finished.stdout.startswith(
        "ssm-rollback-spec check: ssm_rollback_spec.rollback (in-process), "
        f"profile ci, spec {SPEC_VERSION}"
    )
    document = json.loads(report.read_text(encoding="utf-8"))
    assert document["counts"]["failed"] == 0
    # The reference has no replay kernel and no model: the opt-in replay and
    # model properties skip, saying so.
    skipped = [p for p in document["properties"] if p["outcome"] == "skipped"]
    assert {p["property"].split("::")[0] for p in skipped} == {"test_replay.py", "test_model.py"}
    assert {p["detail"] for p in skipped} == {
        "replay is opt-in, and this implementation does not offer it",
        "replay_batch is opt-in, and this implementation does not offer it",
        "model is opt-in, and this implementation's describe names no model",
    }
    assert document["counts"]["passed"] == len(document["properties"]) - len(skipped)
    normative = [clause for clause in spec_clauses() if clause not in REPLAY_PROFILE_CLAUSES]
    # The malformed replay requests cite RB-PROTO-4, which other properties pass.
    replay = {clause for p in skipped for clause in p["clauses"]} - set(normative)
    assert replay <= set(REPLAY_PROFILE_CLAUSES)
    assert sorted(document["clauses"]) == sorted([*normative, *replay])
    assert {document["clauses"][clause] for clause in normative} == {"passed"}
    assert {document["clauses"][clause] for clause in replay} == {"skipped"}
    for clause in normative:
        assert f"PASS  {clause}\n" in finished.stdout
    # The 29 opt-in skips are three lines and their reasons, not a page above the first pass.
    lines = finished.stdout.splitlines()
    first_pass = next(i for i, line in enumerate(lines) if line.startswith("PASS  "))
    assert first_pass == 7, lines[:first_pass]


def test_the_version_names_the_spec_version() -> None:
    finished = run_module("ssm_rollback_spec.tools.cli", "--version")
    assert finished.stdout.strip() == f"ssm-rollback-spec {__version__} (spec {SPEC_VERSION})"


@pytest.mark.parametrize(
    ("arguments", "line"),
    [
        (
            [],
            "the following arguments are required: COMMAND (see ssm-rollback-spec --help)",
        ),
        (
            ["check", "--impl-timeout", "0"],
            (
                "--impl-timeout: must be a number of seconds above 0 and at most 86400, "
                "got '0' (see ssm-rollback-spec check --help)"
            ),
        ),
        (
            ["vectors", "run", "--impl-timeout", "nan"],
            (
                "--impl-timeout: must be a number of seconds above 0 and at most 86400, "
                "got 'nan' (see ssm-rollback-spec vectors run --help)"
            ),
        ),
        (
            ["check", "--impl-timeout", "inf"],
            (
                "--impl-timeout: must be a number of seconds above 0 and at most 86400, "
                "got 'inf' (see ssm-rollback-spec check --help)"
            ),
        ),
        (
            ["check", "--impl-timeout", "1e308"],
            (
                "--impl-timeout: must be a number of seconds above 0 and at most 86400, "
                "got '1e308' (see ssm-rollback-spec check --help)"
            ),
        ),
        (
            ["check", "--race-budget", "-1"],
            (
                "--race-budget: must be a number of seconds from 0 to 86400, got '-1'"
                " (see ssm-rollback-spec check --help)"
            ),
        ),
        (
            ["check", "--profile", "fast"],
            (
                "--profile: invalid choice: 'fast' "
                "(choose from 'dev', 'ci', 'thorough', 'crosshair', 'interpreter')"
                " (see ssm-rollback-spec check --help)"
            ),
        ),
        (["check", "--impl-cmd", ""], "--impl-cmd: the adapter command is empty"),
        (
            ["check", "--impl-cmd", "x", "--impl-module", "y"],
            (
                "--impl-module: not allowed with argument --impl-cmd"
                " (see ssm-rollback-spec check --help)"
            ),
        ),
        (
            ["check", "--impl-module", "no_such_module_here"],
            (
                "--impl-module: cannot import no_such_module_here: "
                "ModuleNotFoundError: No module named 'no_such_module_here' "
                f"(searched the current folder, {ROOT}, then this Python's installed packages)"
            ),
        ),
        (
            ["check", "--impl-module", "json"],
            (
                "--impl-module: json lacks USIZE_MAX, SsmReplayBytesOverflowError, "
                "SsmRollbackMode, SsmRollbackModeTypeError, UnknownSsmRollbackModeError, "
                "UsizeRangeError, "
                "UsizeTypeError, VerifyRollbackUnsupportedError, parse_ssm_rollback_mode, "
                "require_verify_rollback_supported, set_ssm_rollback_mode, ssm_replay_ring_bytes, "
                "ssm_replay_row_bytes, ssm_rollback_mode "
                "(the public names of ssm_rollback_spec.rollback)"
            ),
        ),
        (
            ["check", "--clause", "RB-NOPE-1"],
            (
                "--clause: unknown clause 'RB-NOPE-1': give an ID such as RB-SIZE-3 or a family "
                "(RB-MODE, RB-PARSE, RB-PUB, RB-CELL, RB-SIZE, RB-VERIFY, RB-PY, RB-PROTO, "
                "RB-REPLAY)"
            ),
        ),
        (
            ["check", "-k", "fresh_cells and"],
            (
                "-k: cannot read 'fresh_cells and': at column 16: expected not OR left "
                "parenthesis OR identifier; got end of input"
            ),
        ),
        (["check", "-k", " "], "-k: the expression is empty"),
        (
            ["check", "-k", "fresh_cells", "--clause", "RB-SIZE"],
            "-k: 'fresh_cells' matches no property among those citing RB-SIZE",
        ),
        (
            ["vectors", "run", "--deviations", "/nonexistent.json"],
            "--deviations /nonexistent.json: No such file or directory",
        ),
        (
            ["vectors", "run", "--clause", "RB-NOPE"],
            (
                "--clause: unknown clause 'RB-NOPE': give an ID such as RB-SIZE-3 or a family "
                "(RB-MODE, RB-PARSE, RB-PUB, RB-CELL, RB-SIZE, RB-VERIFY, RB-PY, RB-PROTO, "
                "RB-REPLAY)"
            ),
        ),
        (
            ["check", "--clause", "RB-REPLAY-5", "--clause", "RB-REPLAY-9"],
            (
                "--clause: RB-REPLAY-5, RB-REPLAY-9 has no property in "
                "check: vectors run and the replay model (tests/replay) judge it"
            ),
        ),
        (
            ["vectors", "run", "--clause", "RB-PY-1"],
            f"--clause: no case of {CORPUS} cites RB-PY-1",
        ),
        (
            ["vectors", "run", "--vectors", "/nonexistent"],
            "--vectors /nonexistent: /nonexistent/manifest.json: No such file or directory",
        ),
        (
            ["vectors", "run", "--impl-cmd", "'open"],
            '--impl-cmd: cannot split adapter command "\'open": No closing quotation',
        ),
        (
            ["vectors", "run", "--bogus"],
            "unrecognized arguments: --bogus (see ssm-rollback-spec vectors run --help)",
        ),
        (
            ["report", "--html"],
            "--html: expected one argument (see ssm-rollback-spec report --help)",
        ),
    ],
)
def test_bad_input_gets_one_clear_line_and_status_2(arguments: list[str], line: str) -> None:
    finished = run_module("ssm_rollback_spec.tools.cli", *arguments, timeout=120)
    assert finished.returncode == 2, finished.stdout + finished.stderr
    # One line, begun alike for a bad flag of any command and for a bad value or file.
    assert finished.stderr == f"ssm-rollback-spec: error: {line}\n"
    assert "Traceback" not in finished.stdout + finished.stderr


@pytest.mark.parametrize(("command", "item"), [("check", "property"), ("vectors run", "case")])
def test_the_junit_option_is_worded_for_each_commands_items(command: str, item: str) -> None:
    finished = run_module("ssm_rollback_spec.tools.cli", *command.split(), "--help")
    assert finished.returncode == 0
    flat = " ".join(finished.stdout.split())
    assert f"one testcase per {item}, skips and deviations" in flat
    assert "propertie," not in flat


def test_clauses_sort_by_family_then_number() -> None:
    rows = [Row(f"p{number}", [clause], "passed") for number, clause in enumerate(_SHUFFLED)]
    assert list(clause_summary(rows)) == [
        "RB-PUB-1",
        "RB-REPLAY-1",
        "RB-REPLAY-2",
        "RB-REPLAY-10",
        "RB-SIZE-3",
    ]


def test_skips_sharing_a_reason_are_one_line_so_the_passes_come_soon(
    capsys: pytest.CaptureFixture[str],
) -> None:
    opt_in = "replay is opt-in, and this implementation does not offer it"
    rows = [
        *(Row(f"replay-{n}", [f"RB-REPLAY-{n}", "RB-PROTO-4"], "skipped", opt_in) for n in (10, 2)),
        Row("alone", ["RB-REPLAY-14"], "skipped", "model is opt-in"),
        Row("parse", ["RB-PARSE-1"], "passed"),
    ]
    print_report(rows, show_passes=True)
    lines = capsys.readouterr().out.splitlines()
    assert lines[:5] == [
        "SKIP  2 items  [RB-PROTO-4, RB-REPLAY-2, RB-REPLAY-10]",
        f"      {opt_in}",
        "SKIP  alone  [RB-REPLAY-14]",
        "      model is opt-in",
        "PASS  parse  [RB-PARSE-1]",
    ]
    # The clauses still each get their line, and the tally counts every item.
    assert "SKIP  RB-REPLAY-10" in lines
    assert lines[-1] == "1 passed, 3 skipped, 0 deviation, 0 not-run, 0 failed"


_SHUFFLED: Final = ("RB-REPLAY-10", "RB-SIZE-3", "RB-REPLAY-2", "RB-PUB-1", "RB-REPLAY-1")


def test_a_vectors_failure_in_junit_has_a_reproduce_line_and_no_made_up_times(
    tmp_path: Path,
) -> None:
    report = tmp_path / "reports" / "vectors.xml"
    command = f"{sys.executable} {WRONG_ADAPTER} lenient-integers"
    finished = run_module(
        "ssm_rollback_spec.tools.cli", "vectors", "run", "--impl-cmd", command,
        "--clause", "RB-PROTO-4", "--junit-xml", str(report),
    )  # fmt: skip
    assert finished.returncode == 1, finished.stdout[-3000:] + finished.stderr
    [suite] = list(junitparser.JUnitXml.fromfile(str(report)))
    assert suite.time > 0
    # A case of a pipelined batch has no time of its own, so none is written.
    text = report.read_text(encoding="utf-8")
    assert text.count(" time=") == 1
    assert '<testsuite name="ssm-rollback-spec vectors run"' in text
    # The refusals of replay cite RB-PROTO-4 too: skipped, this adapter offers no replay.
    results = [result for case in suite for result in case.result]
    failures = [result for result in results if isinstance(result, junitparser.Failure)]
    assert failures
    assert all(
        isinstance(result, junitparser.Skipped) for result in results if result not in failures
    )
    for failure in failures:
        last = (failure.text or "").splitlines()[-1]
        assert last.startswith("reproduce: printf '%s\\n' ")
        assert last.endswith(f" | {command}")


def test_check_runs_the_adapter_argv_its_preflight_split_once(tmp_path: Path) -> None:
    # A wrapper that records the arguments of each start, then runs the reference.
    starts = tmp_path / "starts.jsonl"
    wrapper = tmp_path / "wrapper.py"
    wrapper.write_text(
        "import json, runpy, sys\n"
        f"with open({str(starts)!r}, 'a', encoding='utf-8') as log:\n"
        "    log.write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "sys.argv = sys.argv[:1]\n"
        "runpy.run_module('ssm_rollback_spec.harness.adapter', run_name='__main__')\n",
        encoding="utf-8",
    )
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(wrapper))} 'two words' \"it's\" ''"
    finished = run_module(
        "ssm_rollback_spec.tools.cli", "check", "--impl-cmd", command, "--clause", "RB-SIZE-1"
    )
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr
    recorded = [json.loads(line) for line in starts.read_text(encoding="utf-8").splitlines()]
    # The preflight's describe, then the suite's adapter: the same argument vector.
    assert len(recorded) >= 2
    assert all(arguments == ["two words", "it's", ""] for arguments in recorded), recorded


def test_the_suite_takes_an_adapter_argv_or_a_command_not_both() -> None:
    both = ("--impl-argv=adapter", "--impl-cmd=adapter")
    finished = run_module("pytest", "tests/properties", "-p", "no:cacheprovider", *both)
    assert finished.returncode == pytest.ExitCode.USAGE_ERROR
    assert "ERROR: --impl-argv excludes --impl-cmd and --impl-module" in finished.stderr


@pytest.mark.parametrize(
    ("command", "unloaded"),
    [
        (["vectors", "where"], ["check", "size", "results"]),
        (["size", "--help"], ["check", "vectors", "results"]),
        (["--help"], ["check", "vectors", "size", "results"]),
    ],
    ids=["vectors", "size", "help"],
)
def test_a_command_loads_no_other_commands_module(command: list[str], unloaded: list[str]) -> None:
    # Each command pulls in its own floors (the suite, the sizing), which a
    # run of another command must not pay for at its start.
    probe = (
        "import contextlib, io, json, sys\n"
        "from ssm_rollback_spec.tools import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        f"    cli.main({command!r})\n"
        "print(json.dumps([name.rsplit('.', 1)[1] for name in sys.modules\n"
        "    if name.startswith('ssm_rollback_spec.tools.')]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout))
    assert command[0].lstrip("-") in loaded | {"help"}
    assert loaded.isdisjoint(unloaded), sorted(loaded)
