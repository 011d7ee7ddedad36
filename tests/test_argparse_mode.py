# SPDX-License-Identifier: MIT OR Apache-2.0
"""The --ssm-rollback-mode option for argparse command lines."""

from __future__ import annotations

import argparse

import pytest
from hypothesis import example, given

from ssm_rollback_spec import model
from ssm_rollback_spec.argparse_mode import add_ssm_rollback_mode_argument
from ssm_rollback_spec.rollback import SsmRollbackMode
from tests.properties.strategies import mode_texts


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="serve", exit_on_error=True)
    add_ssm_rollback_mode_argument(parser)
    return parser


def test_the_default_is_snapshot() -> None:
    assert _parser().parse_args([]).ssm_rollback_mode is SsmRollbackMode.SNAPSHOT


def test_a_mode_name_parses_to_the_mode() -> None:
    parsed = _parser().parse_args(["--ssm-rollback-mode", "replay"])
    assert parsed.ssm_rollback_mode is SsmRollbackMode.REPLAY


@given(text=mode_texts)
@example(text="")
@example(text="-x")
def test_a_bad_value_fails_with_the_parse_errors_exact_text(text: str) -> None:
    expected = model.parse(text)
    if not isinstance(expected, model.Rejected):
        return
    parser = _parser()
    messages: list[str] = []
    parser.error = messages.append  # type: ignore[method-assign, assignment]
    parser.parse_args([f"--ssm-rollback-mode={text}"])
    # argparse's error() exits; replaced, it goes on, so only the first counts.
    assert messages[0] == f"argument --ssm-rollback-mode: {expected.message}"


def test_the_error_reaches_stderr_with_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _parser().parse_args(["--ssm-rollback-mode", "Replay"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "serve: error: argument --ssm-rollback-mode: "
        "unknown ssm-rollback-mode 'Replay' (valid: snapshot, replay)"
    )
