# SPDX-License-Identifier: MIT OR Apache-2.0
"""What a command checks before its run: output paths, the --impl-cmd split, the first reply."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Final

import pytest

from ssm_rollback_spec.tools.errors import CliError, ExitStatus
from ssm_rollback_spec.tools.preflight import (
    FLUSH_HINT,
    adapter_argv,
    first_reply,
    prepare_directory,
    prepare_file,
)
from tests.fakes import FAKES

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

REFERENCE: Final = [sys.executable, "-m", "ssm_rollback_spec.harness.adapter"]
BROKEN: Final = str(FAKES / "broken_adapter.py")


def _refusal(call: Callable[..., object], *arguments: object) -> CliError:
    with pytest.raises(CliError) as raised:
        call(*arguments)
    assert raised.value.status is ExitStatus.USAGE
    return raised.value


def test_an_output_file_gets_its_missing_folders_and_is_not_left_behind(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "report.json"
    prepare_file("--json", str(target))
    assert target.parent.is_dir()
    assert not target.exists()


def test_an_output_file_that_exists_keeps_its_content(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("kept", encoding="utf-8")
    prepare_file("--json", str(target))
    assert target.read_text(encoding="utf-8") == "kept"


def test_standard_output_and_an_absent_flag_touch_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    prepare_file("--json", "-")
    prepare_file("--json", None)
    prepare_directory("--export-failures", None)
    assert list(tmp_path.iterdir()) == []


def test_an_output_file_that_is_a_folder_is_refused_naming_the_flag(tmp_path: Path) -> None:
    refused = _refusal(prepare_file, "--junit-xml", str(tmp_path))
    assert str(refused) == f"--junit-xml {tmp_path}: Is a directory"


def test_an_output_file_below_a_file_is_refused_as_not_a_folder(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    target = blocker / "report.json"
    refused = _refusal(prepare_file, "--json", str(target))
    assert str(refused) == f"--json {target}: Not a directory"
    assert blocker.read_text(encoding="utf-8") == ""


def test_an_output_folder_is_made_with_its_parents(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b"
    prepare_directory("--export-failures", str(target))
    assert target.is_dir()


def test_an_output_folder_that_is_a_file_is_refused_as_not_a_folder(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    refused = _refusal(prepare_directory, "--export-failures", str(blocker))
    assert str(refused) == f"--export-failures {blocker}: Not a directory"


def test_the_adapter_command_is_split_once_by_shell_rules() -> None:
    assert adapter_argv("./adapter --flag 'two words' \"x y\"") == [
        "./adapter",
        "--flag",
        "two words",
        "x y",
    ]


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("", "--impl-cmd: the adapter command is empty"),
        ("   ", "--impl-cmd: the adapter command is empty"),
        ("'open", '--impl-cmd: cannot split adapter command "\'open": No closing quotation'),
    ],
)
def test_an_unusable_adapter_command_is_one_line_naming_the_flag(
    command: str, message: str
) -> None:
    assert str(_refusal(adapter_argv, command)) == message


def test_the_first_reply_is_the_adapters_describe() -> None:
    described = first_reply("reference", REFERENCE, 60.0)
    assert described is not None
    assert described["usize_bits"] == 64
    assert described["name"] == "ssm_rollback_spec.rollback (Python reference)"


def test_an_adapter_that_cannot_start_is_one_usage_error() -> None:
    refused = _refusal(first_reply, "/no/such/adapter --x", ["/no/such/adapter", "--x"], 5.0)
    assert str(refused) == (
        "--impl-cmd '/no/such/adapter --x': the adapter cannot be started: "
        "[Errno 2] No such file or directory: '/no/such/adapter'"
    )


def test_a_file_named_without_a_folder_is_shown_how_to_run_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my-adapter").write_text("#!/bin/sh\n", encoding="utf-8")
    refused = _refusal(first_reply, "my-adapter", ["my-adapter"], 5.0)
    assert str(refused).endswith(
        ": the adapter cannot be started: [Errno 2] No such file or directory: 'my-adapter'"
        " (to run the file my-adapter in this folder, write ./my-adapter)"
    )


def test_an_adapter_that_breaks_on_describe_is_said_once_without_the_flush_hint() -> None:
    refused = _refusal(first_reply, "broken crash", [sys.executable, BROKEN, "crash"], 60.0)
    said = str(refused)
    assert said.startswith(
        "--impl-cmd 'broken crash': the adapter broke on its first request (describe),"
        " so nothing was checked:\n"
    )
    assert "exited (code 3) without replying" in said
    assert "broken adapter: about to crash" in said
    assert FLUSH_HINT not in said


def test_an_adapter_silent_on_describe_is_asked_whether_it_flushed() -> None:
    refused = _refusal(first_reply, "broken", [sys.executable, BROKEN, "no-flush"], 1.0)
    said = str(refused)
    assert "sent no reply within 1 s (hang)" in said
    assert said.endswith(f"\n{FLUSH_HINT}")
