# SPDX-License-Identifier: MIT OR Apache-2.0
"""A runtime team's first hour, from the installed wheel in a folder outside the clone."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from typing import TYPE_CHECKING, Any, Final

import pytest

from tests.child import run_cargo, wrong_target
from tests.installed import clean_environment

if TYPE_CHECKING:
    from pathlib import Path

    from tests.installed import Installed

#: What README.md ("Vendoring") says to copy.
VENDORED: Final = (
    "__init__.py",
    "py.typed",
    "first_write_wins.py",
    "rollback.py",
    "model.py",
    "argparse_mode.py",
)
MODULE: Final = "host_runtime._vendor.rollback_spec.rollback"
OPTION: Final = (
    "test_parse.py::test_the_command_line_option_beside_the_implementation_takes_what_the_"
    "parse_takes"
)
ROUND_TRIP: Final = "test_parse.py::test_parse_and_str_round_trip_both_ways"


def _vendor(installed: Installed, folder: Path, /) -> Path:
    """A runtime's folder holding ``host_runtime/`` with the contract vendored into it."""
    site = installed.python.parent.parent
    [package] = site.glob("lib/python*/site-packages/ssm_rollback_spec")
    vendored = folder / "host_runtime" / "_vendor" / "rollback_spec"
    vendored.mkdir(parents=True)
    for parent in (folder / "host_runtime", folder / "host_runtime" / "_vendor"):
        (parent / "__init__.py").write_text("", encoding="utf-8")
    for name in VENDORED:
        shutil.copyfile(package / name, vendored / name)
    return vendored


def _run(installed: Installed, folder: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(installed.command), *arguments],
        cwd=folder,
        env=clean_environment(),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def _report(path: Path, /) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def test_a_vendored_copy_is_checked_from_the_folder_that_holds_it(
    installed: Installed, tmp_path: Path
) -> None:
    _vendor(installed, tmp_path)
    finished = _run(
        installed, tmp_path, "check", "--impl-module", MODULE, "--race-budget", "0",
        "--clause", "RB-PARSE", "--json", "reports/check.json",
    )  # fmt: skip
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr
    passed = {r["property"] for r in _report(tmp_path / "reports" / "check.json")["properties"]}
    # The option beside the vendored rollback is judged too.
    assert OPTION in passed


@pytest.mark.slow
def test_a_wrong_error_text_in_a_vendored_rollback_fails_exactly_rb_parse_2(
    installed: Installed, tmp_path: Path
) -> None:
    vendored = _vendor(installed, tmp_path)
    rollback = vendored / "rollback.py"
    text = rollback.read_text(encoding="utf-8")
    assert text.count("unknown ssm-rollback-mode '") == 1
    rollback.write_text(text.replace("unknown ssm-rollback-mode '", "unknown mode '"), "utf-8")
    finished = _run(
        installed, tmp_path, "check", "--impl-module", MODULE, "--race-budget", "0",
        "--clause", "RB-MODE", "--clause", "RB-PARSE", "--clause", "RB-PROTO",
        "--json", "check.json",
    )  # fmt: skip
    assert finished.returncode == 1, finished.stdout[-3000:] + finished.stderr
    report = _report(tmp_path / "check.json")
    assert {c for c, outcome in report["clauses"].items() if outcome == "failed"} == {"RB-PARSE-2"}
    failed = [row for row in report["properties"] if row["outcome"] == "failed"]
    assert failed
    assert all(row["clauses"] == ["RB-PARSE-2"] for row in failed)
    for forbidden in ("Traceback", "Hypothesis", "Falsifying", "@reproduce_failure", "Skipping"):
        assert forbidden not in finished.stdout
    for row in failed:
        assert "\nreproduce: " in row["detail"], row["detail"]
    # A Python-API failure's reproduce line runs, and shows the wrong text.
    [api] = [
        row
        for row in failed
        if row["property"] == "test_parse.py::test_parse_and_str_round_trip_both_ways"
    ]
    line = api["detail"].split("\nreproduce: ")[1].splitlines()[0]
    reproduced = subprocess.run(
        ["/bin/sh", "-c", line], cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env=clean_environment() | {"PATH": f"{installed.python.parent}:/usr/bin:/bin"}, check=False,
    )  # fmt: skip
    assert reproduced.returncode == 1
    assert "UnknownSsmRollbackModeError: unknown mode '" in reproduced.stderr


@pytest.mark.slow
def test_a_changed_error_text_in_a_vendored_argparse_mode_fails_check(
    installed: Installed, tmp_path: Path
) -> None:
    vendored = _vendor(installed, tmp_path)
    option = vendored / "argparse_mode.py"
    text = option.read_text(encoding="utf-8")
    assert text.count("raise argparse.ArgumentTypeError(str(error))") == 1
    option.write_text(
        text.replace(
            "raise argparse.ArgumentTypeError(str(error))",
            'raise argparse.ArgumentTypeError(f"bad mode: {text}")',
        ),
        "utf-8",
    )
    finished = _run(
        installed, tmp_path, "check", "--impl-module", MODULE, "--race-budget", "0",
        "--clause", "RB-PARSE", "--json", "check.json",
    )  # fmt: skip
    assert finished.returncode == 1, finished.stdout[-3000:] + finished.stderr
    report = _report(tmp_path / "check.json")
    assert report["failed"] == [OPTION]
    assert report["clauses"]["RB-PARSE-2"] == "failed"


@pytest.mark.parametrize("command", [("check",), ("vectors", "run")])
def test_an_adapter_that_cannot_start_is_one_line_and_exit_2_installed(
    installed: Installed, tmp_path: Path, command: tuple[str, ...]
) -> None:
    finished = _run(installed, tmp_path, *command, "--impl-cmd", "./no-such-adapter")
    assert finished.returncode == 2
    assert finished.stdout == ""
    assert finished.stderr == (
        "ssm-rollback-spec: error: --impl-cmd ./no-such-adapter: the adapter cannot be "
        "started: [Errno 2] No such file or directory: './no-such-adapter'\n"
    )


@pytest.mark.slow
def test_one_row_short_in_replay_shows_the_exchange_and_blames_only_what_it_breaks(
    installed: Installed, tmp_path: Path, cargo: str
) -> None:
    built = run_cargo(cargo, "build", feature="replay-one-short")
    assert built.returncode == 0, built.stderr
    adapter = str(wrong_target("replay-one-short") / "release" / "ssm-rollback-adapter")
    finished = _run(
        installed, tmp_path, "check", "--impl-cmd", adapter, "--clause", "RB-REPLAY",
        "--json", "check.json",
    )  # fmt: skip
    assert finished.returncode == 1, finished.stdout[-3000:] + finished.stderr
    report = _report(tmp_path / "check.json")
    failed = [row for row in report["properties"] if row["outcome"] == "failed"]
    assert failed
    for row in failed:
        lines = row["detail"].splitlines()
        assert lines[0] == "the replayed states are not the model's within the bound"
        # The single-sequence replay and the batch one, whose pool reads one row short too.
        assert re.match(r'  request: \{"op":"replay(_batch)?",', lines[1]), lines[1]
        assert lines[3].startswith("  wrong:   states[")
        assert "the bound for " in lines[4]
        assert re.match(r"""reproduce: printf '%s\\n' '\{"op":"replay(_batch)?",""", lines[-1])
        assert lines[-1].endswith(f" | {adapter}")
    # Each failure is blamed on the clauses its failing requests check.
    random = [row for row in failed if "shipped" not in row["property"]]
    assert all(
        set(row["clauses"]) <= {"RB-REPLAY-1", "RB-REPLAY-6", "RB-REPLAY-12"} for row in random
    )
    assert "please report" not in finished.stdout
