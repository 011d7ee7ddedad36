# SPDX-License-Identifier: MIT OR Apache-2.0
"""The options several commands share: their types, their exclusions, the checks before a run."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Final

import pytest

from ssm_rollback_spec.harness.subprocess_driver import DEFAULT_TIMEOUT
from ssm_rollback_spec.tools.arguments import (
    add_impl_arguments,
    before_the_run,
    prepare_outputs,
    race_budget,
)
from ssm_rollback_spec.tools.errors import CliError

if TYPE_CHECKING:
    from pathlib import Path

REFERENCE: Final = [sys.executable, "-m", "ssm_rollback_spec.harness.adapter"]


def _parser(*, python: bool) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cmd")
    add_impl_arguments(parser, python=python)
    return parser


def _refused(
    parser: argparse.ArgumentParser, arguments: list[str], capsys: pytest.CaptureFixture[str]
) -> str:
    with pytest.raises(SystemExit) as raised:
        parser.parse_args(arguments)
    assert raised.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_a_race_budget_takes_zero_and_fractions_but_not_less_than_zero() -> None:
    assert race_budget("0") == 0.0
    assert race_budget("1.5") == 1.5
    with pytest.raises(argparse.ArgumentTypeError) as raised:
        race_budget("-1")
    assert str(raised.value) == "must be a number of seconds from 0 to 86400, got '-1'"


def test_the_adapter_timeout_defaults_and_refuses_zero_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = _parser(python=False)
    assert parser.parse_args([]).impl_timeout == DEFAULT_TIMEOUT
    assert parser.parse_args(["--impl-timeout", "2.5"]).impl_timeout == 2.5
    assert _refused(parser, ["--impl-timeout", "0"], capsys) == (
        "cmd: error: argument --impl-timeout: must be a number of seconds above 0"
        " and at most 86400, got '0'"
    )


def test_an_adapter_command_and_a_python_module_exclude_each_other(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = _parser(python=True)
    chosen = parser.parse_args(["--impl-module", "pkg.mod:Impl"])
    assert (chosen.impl_module, chosen.impl_cmd) == ("pkg.mod:Impl", None)
    assert _refused(parser, ["--impl-cmd", "./a", "--impl-module", "m"], capsys) == (
        "cmd: error: argument --impl-module: not allowed with argument --impl-cmd"
    )


def test_a_command_without_python_implementations_has_no_impl_module(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = _parser(python=False)
    assert parser.parse_args(["--impl-cmd", "./a b"]).impl_cmd == "./a b"
    assert _refused(parser, ["--impl-module", "m"], capsys) == (
        "cmd: error: unrecognized arguments: --impl-module m"
    )


def test_every_output_is_checked_before_any_work_and_the_first_bad_one_named(
    tmp_path: Path,
) -> None:
    made = tmp_path / "new" / "report.json"
    with pytest.raises(CliError) as raised:
        prepare_outputs(("--json", str(made)), ("--plot", str(tmp_path)), ("--html", None))
    assert str(raised.value) == f"--plot {tmp_path}: Is a directory"
    assert made.parent.is_dir()


def _namespace(tmp_path: Path, *, impl_cmd: str | None) -> argparse.Namespace:
    return argparse.Namespace(
        json=str(tmp_path / "json" / "report.json"),
        junit_xml=str(tmp_path / "junit" / "report.xml"),
        impl_cmd=impl_cmd,
        impl_timeout=60.0,
    )


def test_before_a_run_without_an_adapter_the_outputs_folders_are_made(tmp_path: Path) -> None:
    arguments = _namespace(tmp_path, impl_cmd=None)
    assert before_the_run(arguments, None, export=str(tmp_path / "failures")) is None
    assert sorted(path.name for path in tmp_path.iterdir()) == ["failures", "json", "junit"]


def test_before_a_run_with_an_adapter_its_describe_is_returned(tmp_path: Path) -> None:
    described = before_the_run(_namespace(tmp_path, impl_cmd="reference"), REFERENCE)
    assert described is not None
    assert described["usize_bits"] == 64


def test_a_bad_output_is_refused_before_the_adapter_is_started(tmp_path: Path) -> None:
    # Started first, this adapter would be refused as one that cannot start.
    arguments = _namespace(tmp_path, impl_cmd="/no/such/adapter")
    arguments.json = str(tmp_path)
    with pytest.raises(CliError) as raised:
        before_the_run(arguments, ["/no/such/adapter"])
    assert str(raised.value) == f"--json {tmp_path}: Is a directory"
