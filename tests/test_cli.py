# SPDX-License-Identifier: MIT OR Apache-2.0
"""The command line: its report, its exit codes, and one clear line for every bad input."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from spec import SPEC_VERSION, __version__
from tests.child import run_module
from tests.traceability import spec_clauses

if TYPE_CHECKING:
    from pathlib import Path


def test_check_against_the_reference_reports_every_property_and_clause(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    finished = run_module("spec.cli", "check", "--json", str(report))
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr
    assert finished.stdout.startswith(
        f"ssm-rollback-spec check: spec/rollback.py (in-process), profile ci, spec {SPEC_VERSION}"
    )
    document = json.loads(report.read_text(encoding="utf-8"))
    assert document["counts"]["failed"] == 0
    assert document["counts"]["passed"] == len(document["properties"])
    assert sorted(document["clauses"]) == sorted(spec_clauses())
    assert set(document["clauses"].values()) == {"passed"}
    for clause in spec_clauses():
        assert f"PASS  {clause}\n" in finished.stdout


def test_the_version_names_the_spec_version() -> None:
    finished = run_module("spec.cli", "--version")
    assert finished.stdout.strip() == f"ssm-rollback-spec {__version__} (spec {SPEC_VERSION})"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ([], "the following arguments are required: COMMAND"),
        (["check", "--impl-timeout", "0"], "--impl-timeout must be positive, got 0"),
        (["check", "--profile", "fast"], "argument --profile: invalid choice: 'fast'"),
        (["check", "--impl-cmd", ""], "--impl-cmd: the adapter command is empty"),
        (["vectors", "run", "--skip", "ring-k0"], "write it as CASE_ID=REASON, with a reason"),
        (["vectors", "run", "--skip", "ring-k0= "], "write it as CASE_ID=REASON, with a reason"),
        (["vectors", "run", "--skip-file", "/nonexistent.json"], "--skip-file /nonexistent.json"),
        (
            ["vectors", "run", "--vectors", "/nonexistent"],
            "cannot read the vectors in /nonexistent",
        ),
        (["vectors", "run", "--impl-cmd", "'open"], "No closing quotation"),
    ],
)
def test_bad_input_gets_one_clear_line_and_status_2(arguments: list[str], message: str) -> None:
    finished = run_module("spec.cli", *arguments, timeout=120)
    assert finished.returncode == 2, finished.stdout + finished.stderr
    assert message in finished.stderr
    assert "Traceback" not in finished.stdout + finished.stderr


def test_a_skip_file_must_map_case_ids_to_reasons(tmp_path: Path) -> None:
    skips = tmp_path / "skips.json"
    skips.write_text('["ring-k0"]', encoding="utf-8")
    finished = run_module("spec.cli", "vectors", "run", "--skip-file", str(skips))
    assert finished.returncode == 2
    assert "must be a JSON object of case ID to reason" in finished.stderr


def test_a_skip_file_skips_with_its_reasons(tmp_path: Path) -> None:
    skips = tmp_path / "skips.json"
    skips.write_text('{"ring-k0": "our ring starts at k 1"}', encoding="utf-8")
    finished = run_module("spec.cli", "vectors", "run", "--skip-file", str(skips))
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "SKIP  ring-k0  [RB-SIZE-2]\n      our ring starts at k 1" in finished.stdout
