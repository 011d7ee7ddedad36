# SPDX-License-Identifier: MIT OR Apache-2.0
"""The harness survives a broken runtime: it fails clearly, never hangs, leaves nothing."""

from __future__ import annotations

import re
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pytest

from ssm_rollback_spec.harness.failures import AdapterFailure, Breakage
from ssm_rollback_spec.harness.subprocess_driver import SubprocessDriver
from tests.child import alive, run_module
from tests.fakes import FAKES

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Mapping

BROKEN: Final = str(FAKES / "broken_adapter.py")
ROOT: Final = Path(__file__).resolve().parents[2]
PARSE: Final = {"op": "parse", "text": "replay"}
TRACE: Final = {"op": "trace", "events": [{"op": "get"}]}


def _processes_running(fragment: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if fragment in command and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def _driver(how: str, *only: str, timeout: float = 1.0) -> SubprocessDriver:
    return SubprocessDriver([sys.executable, BROKEN, how, *only], timeout=timeout)


def _failure(driver: SubprocessDriver, request: Mapping[str, object]) -> str:
    with pytest.raises(AdapterFailure) as raised:
        driver.request(request)
    message = str(raised.value)
    assert f"op: {request['op']}" in message
    assert '"op": "' + str(request["op"]) + '"' in message
    assert "came back:" in message
    assert "stderr tail:" in message
    return message


def _said(breakage: Breakage, **details: object) -> str:
    return breakage.value.format(**details)


CASES: Final = [
    ("crash", _said(Breakage.EXITED_WITHOUT_REPLY, code=3), "broken adapter: about to crash"),
    ("hang", _said(Breakage.HANG, timeout=1), "broken adapter: hanging"),
    (
        "non-json",
        _said(Breakage.MALFORMED_REPLY, error="not a JSON line"),
        "came back: this is not json\n",
    ),
    (
        "wrong-shape",
        _said(Breakage.MALFORMED_REPLY, error='not {"ok": VALUE}'),
        '{"result": "snapshot"}',
    ),
    ("silent-exit", _said(Breakage.EXITED_WITHOUT_REPLY, code=0), "(end of output)"),
    ("exit-zero", _said(Breakage.EXITED_WITHOUT_REPLY, code=0), "broken adapter: leaving early"),
    ("stderr-flood", _said(Breakage.MALFORMED_REPLY, error=""), "noise\n    noise"),
]


@pytest.mark.parametrize(("how", "what", "shown"), CASES, ids=[case[0] for case in CASES])
def test_a_broken_adapter_fails_the_request_with_a_clear_message(
    how: str, what: str, shown: str
) -> None:
    started = time.monotonic()
    with _driver(how) as driver, pytest.raises(AdapterFailure) as raised:
        driver.request(PARSE)
    message = str(raised.value)
    assert "op: parse" in message
    assert '"op": "parse"' in message
    assert "came back:" in message
    assert "stderr tail:" in message
    assert raised.value.hung is (how == "hang")
    assert what in message
    assert shown in message
    # Generous: this bounds a hang, it does not measure speed.
    assert time.monotonic() - started < 60


def test_extra_lines_are_caught_before_the_next_request() -> None:
    driver = _driver("extra-lines", "parse")
    assert driver.request(PARSE) == {"ok": "replay"}
    message = _failure(driver, {"op": "describe"})
    assert Breakage.EXTRA_LINES.value in message
    assert '{"ok":"replay"}' in message
    driver.close()


def test_extra_lines_after_the_last_reply_fail_the_close() -> None:
    driver = _driver("extra-lines", "parse")
    assert driver.request(PARSE) == {"ok": "replay"}
    with pytest.raises(AdapterFailure, match=Breakage.EXTRA_LINES.value):
        driver.close()


def test_extra_lines_in_a_fresh_process_fail_its_request() -> None:
    with _driver("extra-lines", "trace") as driver:
        assert Breakage.EXTRA_LINES.value in _failure(driver, TRACE)


def test_a_hung_adapter_and_its_children_are_killed() -> None:
    driver = _driver("grandchild-hang")
    message = _failure(driver, PARSE)
    assert "(hang)" in message
    grandchild = int(re.search(r"grandchild (\d+)", message).group(1))  # type: ignore[union-attr]
    deadline = time.monotonic() + 10
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild), "the adapter's child outlived the failure"


def test_after_two_hangs_the_driver_stops_waiting() -> None:
    driver = _driver("hang", timeout=0.3)
    for _ in range(2):
        _failure(driver, PARSE)
    # Were a third adapter started, this command would fail differently.
    driver.argv = ["/nonexistent/adapter"]
    with pytest.raises(AdapterFailure, match=_said(Breakage.GAVE_UP, hangs=2)):
        driver.request(PARSE)


def test_one_bad_reply_does_not_poison_the_next_request() -> None:
    with _driver("non-json", "describe") as driver:
        _failure(driver, {"op": "describe"})
        assert driver.request(PARSE) == {"ok": "replay"}


def test_an_adapter_that_cannot_start_is_named() -> None:
    with (
        SubprocessDriver(["/nonexistent/adapter"]) as driver,
        pytest.raises(AdapterFailure) as raised,
    ):
        driver.request(PARSE)
    assert str(raised.value) == (
        "adapter /nonexistent/adapter cannot be started: "
        "[Errno 2] No such file or directory: '/nonexistent/adapter'"
    )
    assert raised.value.breakage is Breakage.CANNOT_START


def _check(*arguments: str) -> subprocess.CompletedProcess[str]:
    return run_module("ssm_rollback_spec.tools.cli", "check", *arguments, timeout=600)


@pytest.mark.slow
def test_check_against_an_adapter_that_hangs_on_one_op_finishes_and_fails() -> None:
    # Two families: one with the hanging op (RB-SIZE's ring_bytes), one without.
    finished = _check(
        "--impl-cmd",
        f"{sys.executable} {BROKEN} hang ring_bytes",
        "--impl-timeout",
        "0.5",
        "--clause",
        "RB-SIZE",
        "--clause",
        "RB-PARSE",
    )
    assert finished.returncode == 1, finished.stdout + finished.stderr
    assert "FAIL  test_sizes.py::test_ring_bytes_is_the_exact_value_or_overflow" in finished.stdout
    assert _said(Breakage.HANG, timeout=0.5) in finished.stdout
    assert "PASS  test_parse.py::test_each_mode_name_parses_to_itself[replay]" in finished.stdout
    assert "Traceback" not in finished.stdout + finished.stderr
    assert _processes_running(f"{BROKEN} hang ring_bytes") == [], "check left adapters running"


def test_check_against_an_adapter_that_crashes_at_once_is_one_usage_error() -> None:
    finished = _check("--impl-cmd", f"{sys.executable} {BROKEN} crash")
    assert finished.returncode == 2
    # Said once, before the run, instead of once per property.
    assert finished.stdout == ""
    command = shlex.quote(f"{sys.executable} {BROKEN} crash")
    assert finished.stderr.startswith(
        f"ssm-rollback-spec: error: --impl-cmd {command}: the adapter broke on its first "
        "request (describe), so nothing was checked:\n"
    )
    assert _said(Breakage.EXITED_WITHOUT_REPLY, code=3) in finished.stderr
    assert "Traceback" not in finished.stdout + finished.stderr


def test_a_pipelined_batch_gets_each_reply_in_order() -> None:
    requests = [{"op": "parse", "text": text} for text in ("replay", "x", "snapshot")] * 50
    with SubprocessDriver([sys.executable, "-m", "ssm_rollback_spec.harness.adapter"]) as driver:
        replies = driver.request_many(requests)
    assert all(isinstance(reply, dict) for reply in replies)
    assert [reply.get("ok") for reply in replies if isinstance(reply, dict)] == [
        "replay",
        None,
        "snapshot",
    ] * 50


def test_a_crash_mid_batch_fails_that_request_and_every_later_one() -> None:
    requests = [PARSE, PARSE, {"op": "describe"}, PARSE, PARSE]
    with _driver("crash", "describe") as driver:
        replies = driver.request_many(requests)
    assert replies[:2] == [{"ok": "replay"}, {"ok": "replay"}]
    failures = replies[2:]
    assert all(isinstance(failure, AdapterFailure) for failure in failures)
    assert "op: describe" in str(failures[0])
    assert _said(Breakage.EXITED_WITHOUT_REPLY, code=3) in str(failures[0])


def test_lines_left_over_before_a_batch_are_caught() -> None:
    with _driver("extra-lines", "parse") as driver:
        assert driver.request(PARSE) == {"ok": "replay"}
        [failure] = driver.request_many([{"op": "describe"}])
    assert isinstance(failure, AdapterFailure)
    assert Breakage.EXTRA_LINES.value in str(failure)
