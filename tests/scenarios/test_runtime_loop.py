# SPDX-License-Identifier: MIT OR Apache-2.0
"""The runtime team's loop, over the protocol: run, read, export, pin, deviate.

Each test drives the command line against a deliberately wrong adapter (the
self-test's wrong implementations, served by ``python -m ssm_rollback_spec.harness.adapter``)
or the reference, as a runtime team would.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from typing import TYPE_CHECKING, Any, Final

import jsonschema
import pytest

from ssm_rollback_spec import model
from ssm_rollback_spec.harness import protocol
from ssm_rollback_spec.harness.oracle import allowed_replies
from ssm_rollback_spec.tools.outcomes import CONFORMS
from ssm_rollback_spec.tools.shipped import corpus_directory
from tests.child import ROOT, run_module
from tests.fakes import FAKES
from tests.fakes.wrong import import_path
from tests.once import once_per_run
from tests.properties.strategies import as_calls
from tests.scenarios.test_strength import python_text_in

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

BROKEN: Final = str(FAKES / "broken_adapter.py")
#: How many times a race's reproduction is pasted before its bug must have shown.
RACE_PASTES: Final = 50
CORPUS: Final = corpus_directory()


def _adapter(wrong: str, /) -> str:
    return (
        f"{sys.executable} -m ssm_rollback_spec.harness.adapter --impl-module {import_path(wrong)}"
    )


def _cli(*arguments: str) -> subprocess.CompletedProcess[str]:
    return run_module("ssm_rollback_spec.tools.cli", *arguments, timeout=900)


def _json(path: Path, /) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def _deviations(tmp_path: Path, *entries: Mapping[str, str]) -> str:
    path = tmp_path / "deviations.json"
    path.write_text(json.dumps({"deviations": list(entries)}), encoding="utf-8")
    return str(path)


# --- selection ---------------------------------------------------------------


def _collected(*arguments: str) -> list[str]:
    finished = run_module(
        "pytest", "tests/properties", "--collect-only", "-q", "-p", "no:cacheprovider", *arguments
    )
    assert finished.returncode == 0, finished.stdout[-2000:]
    return [line for line in finished.stdout.splitlines() if "::" in line]


def test_k_and_clause_select_the_same_properties_by_clause_id() -> None:
    by_keyword = _collected("-k", "RB-SIZE-3")
    assert by_keyword
    assert by_keyword == _collected("--clause", "RB-SIZE-3")
    assert len(_collected("--clause", "RB-SIZE")) > len(by_keyword)


def test_check_runs_only_the_chosen_clause(tmp_path: Path) -> None:
    finished = _cli("check", "--clause", "RB-SIZE-3", "--json", str(tmp_path / "r.json"))
    assert finished.returncode == 0, finished.stdout[-3000:]
    report = _json(tmp_path / "r.json")
    assert report["properties"]
    assert all("RB-SIZE-3" in p["clauses"] for p in report["properties"])


def test_check_k_runs_only_the_properties_whose_names_match(tmp_path: Path) -> None:
    finished = _cli(
        "check", "-k", "ring_bytes and not usize_max", "--clause", "RB-SIZE",
        "--json", str(tmp_path / "r.json"),
    )  # fmt: skip
    assert finished.returncode == 0, finished.stdout[-3000:]
    assert {row["property"] for row in _json(tmp_path / "r.json")["properties"]} == {
        "test_sizes.py::test_ring_bytes_is_the_exact_value_or_overflow",
        "test_sizes.py::test_ring_bytes_of_real_dimensions",
        "test_sizes.py::test_ring_bytes_never_shrinks_as_an_argument_grows",
    }


def test_vectors_run_runs_only_the_chosen_family(tmp_path: Path) -> None:
    finished = _cli("vectors", "run", "--clause", "RB-SIZE", "--json", str(tmp_path / "r.json"))
    assert finished.returncode == 0, finished.stdout[-3000:]
    cases = _json(tmp_path / "r.json")["cases"]
    assert cases
    assert all(any(c.startswith("RB-SIZE-") for c in case["clauses"]) for case in cases)


# --- reading a failure, exporting it, pinning it -----------------------------


def _fail_a_check(where: Path, /) -> None:
    finished = _cli(
        "check",
        "--impl-cmd",
        _adapter("LastWriteWins"),
        "--clause",
        "RB-PUB",
        # The failures to read and export are the published mode's; the races
        # in fresh processes would only spend their budget, and the protocol's
        # property of the family passes, a fresh adapter for each example.
        "-k",
        "published_mode",
        "--race-budget",
        "0",
        "--export-failures",
        str(where / "exported"),
        "--json",
        str(where / "report.json"),
    )
    assert finished.returncode == 1, finished.stdout[-3000:] + finished.stderr
    (where / "stdout.txt").write_text(finished.stdout, encoding="utf-8")


@pytest.fixture(scope="module")
def failed_check(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, Path]:
    # Run once, whichever worker asks first: the tests only read it.
    where = once_per_run(tmp_path_factory, "failed-check", _fail_a_check)
    output = (where / "stdout.txt").read_text(encoding="utf-8")
    return output, where / "report.json", where / "exported"


def test_failures_come_first_and_are_listed_at_the_end(
    failed_check: tuple[str, Path, Path],
) -> None:
    output, report, _ = failed_check
    lines = output.splitlines()
    assert lines[1].startswith("FAIL  ")
    failed = _json(report)["failed"]
    assert failed
    closing = output.split("\nfailed:\n", 1)[1].splitlines()
    for name in failed:
        assert any(line.startswith(f"  {name}  [RB-") for line in closing), name


def test_a_protocol_failure_shows_no_python_only_text(failed_check: tuple[str, Path, Path]) -> None:
    output, _, _ = failed_check
    for python_only in ("SubprocessDriver(", "Explanation:", "reproduce_failure", "Verbosity"):
        assert python_only not in output
    assert python_text_in(output) == []


def test_each_failure_ends_with_a_reproduction_anyone_can_paste(
    failed_check: tuple[str, Path, Path],
) -> None:
    output, _, _ = failed_check
    reproductions = re.findall(r"^ +reproduce: (printf .*)$", output, re.MULTILINE)
    assert reproductions
    for line in reproductions:
        request = json.loads(line.split("'%s\\n' ", 1)[1].split(" | ", 1)[0].strip("'"))
        # A trace shows its bug every time. A race shows it only when its
        # threads interleave as they did in the run, so it is pasted again
        # until it does (the adapter releases its racers together, so each
        # order comes up often).
        pastes = 1 if request["op"] == "trace" else RACE_PASTES
        replies = []
        for _ in range(pastes):
            replies.append(_paste(line))
            if not _allowed(request, replies[-1]):
                break
        assert not _allowed(request, replies[-1]), (line, replies)


def _paste(line: str, /) -> dict[str, object]:
    # As a user pastes it: into a shell.
    finished = subprocess.run(  # noqa: S602
        line,
        shell=True,
        executable="/bin/bash",
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return protocol.decode_reply(finished.stdout.strip())


def _allowed(request: dict[str, Any], reply: dict[str, object], /) -> bool:
    if request["op"] != "race_cells":
        return any(protocol.reply_matches(reply, ok) for ok in allowed_replies(request))
    # race_cells is judged round by round: each round one winner's mode for all.
    winners = model.allowed_race_outcomes(as_calls(request["events"]))
    rounds = reply.get("ok")
    return isinstance(rounds, list) and all(tuple(r) in winners for r in rounds)


def test_exported_failures_are_a_schema_valid_corpus_that_pins_the_bug(
    failed_check: tuple[str, Path, Path], tmp_path: Path
) -> None:
    _, report, exported = failed_check
    assert _json(report)["exported"]
    schema = _json(exported / "schema.json")
    for name in ("manifest.json", "exported.json"):
        jsonschema.validate(_json(exported / name), schema)
    for case in _json(exported / "exported.json")["cases"]:
        assert case["expected"] == allowed_replies(case["request"])
        assert re.fullmatch(r"(trace|race)-[0-9a-f]{12}", case["id"]), case["id"]
    wrong = _cli(
        "vectors", "run", "--vectors", str(exported), "--impl-cmd", _adapter("LastWriteWins")
    )
    assert wrong.returncode == 1, wrong.stdout
    reference = _cli(
        "vectors", "run", "--vectors", str(exported), "--json", str(tmp_path / "r.json")
    )
    assert reference.returncode == 0, reference.stdout + reference.stderr
    # An exported race the reference's threads did not run at once is not observed.
    tally = _json(tmp_path / "r.json")["counts"]
    assert tally["passed"] + tally["not-observed"] == len(_json(report)["exported"])


# --- deviations --------------------------------------------------------------


def test_a_listed_deviation_that_fails_is_reported_not_failed(tmp_path: Path) -> None:
    deviations = _deviations(tmp_path, {"clause": "RB-SIZE-2", "reason": "k, not k - 1, in 1.4"})
    finished = _cli(
        "vectors", "run", "--impl-cmd", _adapter("KInsteadOfKMinusOne"), "--clause", "RB-SIZE",
        "--deviations", deviations, "--json", str(tmp_path / "r.json"),
    )  # fmt: skip
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr
    report = _json(tmp_path / "r.json")
    assert report["counts"]["failed"] == 0
    assert report["counts"]["deviation"] > 0
    assert report["clauses"]["RB-SIZE-2"] == "deviation"
    assert "DEVIATION  ring-k2  [RB-SIZE-2]" in finished.stdout
    assert "deviates knowingly (clause RB-SIZE-2): k, not k - 1, in 1.4" in finished.stdout


def test_a_listed_deviation_that_conforms_fails_the_run(tmp_path: Path) -> None:
    deviations = _deviations(
        tmp_path,
        {"clause": "RB-SIZE-2", "reason": "k, not k - 1"},
        {"case": "parse-upper", "reason": "we fold case"},
    )
    finished = _cli(
        "vectors", "run", "--impl-cmd", _adapter("KInsteadOfKMinusOne"),
        "--clause", "RB-SIZE", "--clause", "RB-PARSE", "--deviations", deviations,
    )  # fmt: skip
    assert finished.returncode == 1
    assert f"{CONFORMS}: case parse-upper" in finished.stdout.splitlines()


def test_a_deviation_entry_that_matches_nothing_is_a_usage_error(tmp_path: Path) -> None:
    deviations = _deviations(tmp_path, {"case": "no-such-case", "reason": "?"})
    finished = _cli("vectors", "run", "--deviations", deviations)
    assert finished.returncode == 2
    # Refused before the run: no case was sent, nothing was reported.
    assert finished.stdout == ""
    assert finished.stderr == (
        f"ssm-rollback-spec: error: --deviations {deviations}: "
        "case no-such-case matches nothing this run checks\n"
    )


def test_check_reports_a_listed_property_as_a_deviation(tmp_path: Path) -> None:
    prop = "test_sizes.py::test_ring_bytes_is_the_exact_value_or_overflow"
    deviations = _deviations(tmp_path, {"property": prop, "reason": "k, not k - 1"})
    finished = _cli(
        "check", "--impl-cmd", _adapter("KInsteadOfKMinusOne"), "--clause", "RB-SIZE-2",
        "--deviations", deviations, "--json", str(tmp_path / "r.json"),
    )  # fmt: skip
    outcomes = {p["property"]: p["outcome"] for p in _json(tmp_path / "r.json")["properties"]}
    assert outcomes[prop] == "deviation"
    # Whatever else failed still fails the run.
    assert finished.returncode == (1 if "failed" in outcomes.values() else 0)


_MALFORMED: Final = [
    ("[]", 'must be {"deviations": [{"clause" | "property" | "case": NAME, "reason": TEXT}]}'),
    (
        '{"deviations": [{"clause": "RB-SIZE-2"}]}',
        "deviations[0] (clause RB-SIZE-2) must give a reason",
    ),
    (
        '{"deviations": [{"clause": "RB-NOPE-1", "reason": "x"}]}',
        "deviations[0]: SPEC.md has no clause 'RB-NOPE-1'",
    ),
    (
        '{"deviations": [{"case": "a", "property": "b", "reason": "x"}]}',
        'deviations[0] must name one of "clause", "property" or "case"',
    ),
    (
        '{"deviations": [{"case": "a", "reason": "x"}, {"case": "a", "reason": "y"}]}',
        "listed more than once: case a",
    ),
]


@pytest.mark.parametrize(("document", "message"), _MALFORMED)
def test_a_malformed_deviation_list_gets_one_line(
    tmp_path: Path, document: str, message: str
) -> None:
    path = tmp_path / "deviations.json"
    path.write_text(document, encoding="utf-8")
    finished = _cli("vectors", "run", "--deviations", str(path))
    assert finished.returncode == 2
    assert finished.stderr == f"ssm-rollback-spec: error: --deviations {path}: {message}\n"


# --- broken adapters, end to end ---------------------------------------------


@pytest.mark.parametrize("command", ["check", "vectors run"])
def test_an_adapter_that_never_flushes_is_one_usage_error_with_the_flush_hint(
    tmp_path: Path, command: str
) -> None:
    report = tmp_path / "r.json"
    adapter = f"{sys.executable} {BROKEN} no-flush"
    finished = _cli(
        *command.split(), "--impl-cmd", adapter, "--impl-timeout", "0.5", "--json", str(report)
    )
    assert finished.returncode == 2, finished.stdout + finished.stderr
    assert finished.stdout == ""
    assert finished.stderr == (
        f"ssm-rollback-spec: error: --impl-cmd {shlex.quote(adapter)}: the adapter broke on "
        "its first request (describe), so nothing was checked:\n"
        f"adapter {adapter} sent no reply within 0.5 s (hang)\n"
        "  op: describe\n"
        '  request: {"op": "describe"}\n'
        "  came back: (nothing)\n"
        "  stderr tail:\n"
        "    (empty)\n"
        "did the adapter flush stdout after each reply? A reply left in a buffer looks like a "
        "hang.\n"
    )
    assert not report.exists()


@pytest.mark.parametrize("command", ["check", "vectors run"])
def test_an_adapter_that_cannot_start_is_one_line_and_exit_2(tmp_path: Path, command: str) -> None:
    # A file in the current folder, named without ./: a shell would not run it either.
    (tmp_path / "my-adapter").write_text("#!/bin/sh\n", encoding="utf-8")
    (tmp_path / "my-adapter").chmod(0o755)
    finished = subprocess.run(
        [sys.executable, "-m", "ssm_rollback_spec.tools.cli", *command.split(),
         "--impl-cmd", "my-adapter"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert finished.returncode == 2
    assert finished.stdout == ""
    assert finished.stderr == (
        "ssm-rollback-spec: error: --impl-cmd my-adapter: the adapter cannot be started: "
        "[Errno 2] No such file or directory: 'my-adapter' "
        "(to run the file my-adapter in this folder, write ./my-adapter)\n"
    )


def test_the_cases_after_an_adapter_broke_are_summed_up_in_one_line(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    finished = _cli(
        "vectors", "run", "--impl-cmd", f"{sys.executable} {BROKEN} crash ring_bytes",
        "--json", str(report),
    )  # fmt: skip
    assert finished.returncode == 1, finished.stdout + finished.stderr
    cases = _json(report)["cases"]
    not_run = [case for case in cases if case["outcome"] == "not-run"]
    [broke_on] = {case["detail"] for case in not_run}
    assert len(not_run) > 1
    items = finished.stdout.partition("\nclauses:\n")[0].splitlines()
    shown = [line for line in items if line.startswith("NOT RUN")]
    assert shown == [f"NOT RUN  {len(not_run)} items: {broke_on}"]
