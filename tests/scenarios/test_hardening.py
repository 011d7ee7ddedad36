# SPDX-License-Identifier: MIT OR Apache-2.0
"""Every input from a runtime, a file or a user gets an answer, in time.

Each reproducer of the hardening issue is a regression test here; the fuzz
and CLI properties then try the same shapes of input at large.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ssm_rollback_spec import corpus, rollback
from ssm_rollback_spec.harness import protocol
from ssm_rollback_spec.harness.adapter import respond, serve
from ssm_rollback_spec.harness.failures import AdapterFailure, Breakage
from ssm_rollback_spec.harness.files import (
    MAX_FILE_BYTES,
    MAX_FILE_DEPTH,
    JsonFileError,
    read_json_file,
)
from ssm_rollback_spec.harness.subprocess_driver import SubprocessDriver
from ssm_rollback_spec.tools.cli import main
from tests.child import ROOT
from tests.fakes import FAKES
from tests.fakes.broken_adapter import HOLDERS_ENV
from tests.properties.strategies import texts

if TYPE_CHECKING:
    from collections.abc import Iterator

BROKEN: Final = str(FAKES / "broken_adapter.py")
PYTHON_ADAPTER: Final = [sys.executable, "-m", "ssm_rollback_spec.harness.adapter"]
QWEN3_NEXT: Final = ROOT / "examples" / "qwen3-next-80b-a3b-instruct.config.json"
REVIEW: Final = ["--num-drafts", "3", "--mtp-slots", "1"]


def _serve(data: bytes) -> list[dict[str, object]]:
    replies = io.BytesIO()
    serve(rollback, io.BytesIO(data), replies)
    return [protocol.decode_reply(line) for line in replies.getvalue().decode().splitlines()]


def _bad_request(message: str) -> dict[str, object]:
    return protocol.error_reply(protocol.ErrorKind.BAD_REQUEST, message)


# --- the adapter -------------------------------------------------------------


def test_a_lone_surrogate_is_refused_and_the_adapter_serves_on() -> None:
    replies = _serve(b'{"op":"parse","text":"\\ud800"}\n{"op":"describe"}\n')
    assert replies[0] == _bad_request("a string holds a lone surrogate, which is not Unicode")
    assert "ok" in replies[1]


@pytest.mark.parametrize("field", ["op", "mode"])
def test_a_lone_surrogate_anywhere_a_reply_would_echo_is_refused(field: str) -> None:
    request = {"op": "verify_entry", "mode": "snapshot"} | {field: "\ud800"}
    line = json.dumps(request).encode() + b"\n"
    assert _serve(line) == [_bad_request("a string holds a lone surrogate, which is not Unicode")]


def test_deep_nesting_is_refused_at_the_bound_and_one_past() -> None:
    def nested(depth: int) -> bytes:
        # A request object holding depth - 1 nested lists.
        inner = "[" * (depth - 1) + "]" * (depth - 1)
        return f'{{"op":"describe","x":{inner}}}\n'.encode()

    at_bound, past = _serve(nested(protocol.MAX_DEPTH) + nested(protocol.MAX_DEPTH + 1))
    assert "ok" in at_bound
    assert past == _bad_request(f"nested deeper than {protocol.MAX_DEPTH} levels")


def test_a_thousand_levels_of_nesting_get_a_reply() -> None:
    assert _serve(b"[" * 1000 + b"]" * 1000 + b"\n") == [
        _bad_request(f"nested deeper than {protocol.MAX_DEPTH} levels")
    ]


@pytest.mark.parametrize("op", ["trace", "race"])
def test_events_are_bounded_at_the_bound_and_one_past(op: str) -> None:
    def request(count: int) -> bytes:
        return json.dumps({"op": op, "events": [{"op": "get"}] * count}).encode() + b"\n"

    at_bound, past = _serve(request(protocol.MAX_EVENTS) + request(protocol.MAX_EVENTS + 1))
    assert at_bound == {"ok": ["snapshot"] * protocol.MAX_EVENTS}
    limit = protocol.MAX_EVENTS
    assert past == _bad_request(f"field 'events' holds {limit + 1} events, more than {limit}")


def test_a_race_of_thirty_thousand_events_is_refused_at_once() -> None:
    line = json.dumps({"op": "race", "events": [{"op": "get"}] * 30_000})
    assert respond(rollback, line) == _bad_request(
        f"field 'events' holds 30000 events, more than {protocol.MAX_EVENTS}"
    )


def test_a_race_whose_threads_cannot_start_is_an_error_reply(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started = 0
    real_start = threading.Thread.start

    def start_twice(thread: threading.Thread) -> None:
        nonlocal started
        started += 1
        if started > 2:
            raise RuntimeError("can't start new thread")
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", start_twice)
    line = json.dumps({"op": "race", "events": [{"op": "get"}] * 4})
    assert respond(rollback, line) == _bad_request(
        "could not start the race's threads: can't start new thread"
    )


def test_a_race_whose_barrier_breaks_is_an_error_reply(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_wait(_: threading.Barrier, timeout: float | None = None) -> int:
        del timeout
        raise threading.BrokenBarrierError

    monkeypatch.setattr(threading.Barrier, "wait", broken_wait)
    line = json.dumps({"op": "race", "events": [{"op": "get"}] * 3})
    assert respond(rollback, line) == _bad_request(
        "the race's threads did not all meet at its barrier"
    )


def test_a_line_longer_than_the_bound_is_refused_and_the_next_is_served() -> None:
    limit = protocol.MAX_LINE_BYTES
    # At the bound, newline included, the line is read; one byte more is not.
    padding = limit - len(b'{"op":"describe","x":""}\n')
    at_bound = b'{"op":"describe","x":"' + b"a" * padding + b'"}\n'
    past = b'{"op":"describe","x":"' + b"a" * (padding + 1) + b'"}\n'
    assert len(at_bound) == limit
    replies = _serve(at_bound + past + b'{"op":"describe"}\n')
    assert "ok" in replies[0]
    assert replies[1] == _bad_request(f"line longer than {limit} bytes")
    assert "ok" in replies[2]


def test_json_extensions_are_not_json() -> None:
    for constant in ("NaN", "Infinity", "-Infinity"):
        line = f'{{"op":"row_bytes","qkvz_elems":{constant},"nv":0}}'
        reply = respond(rollback, line)
        assert reply == _bad_request(f"not a JSON line: {constant} is not JSON"), constant


_NASTY_LINES: Final = [
    b"\xff\xfe\n",
    b'{"op":"parse","text":"\\ud800"}\n',
    b"[" * 5000 + b"\n",
    b"\n",
    b"\r\n",
    b'\xef\xbb\xbf{"op":"describe"}\n',
    b'{"op":"describe"}\r\n',
    b'{"op":"parse","op":"parse","text":"replay"}\n',
    b'{"op":"row_bytes","qkvz_elems":1e400,"nv":0}\n',
    b'{"op":"row_bytes","qkvz_elems":' + b"9" * 5000 + b',"nv":0}\n',
    b'{"op":"race","events":' + json.dumps([{"op": "get"}] * 5000).encode() + b"}\n",
]


@st.composite
def _request_lines(draw: st.DrawFn) -> bytes:
    shapes = st.one_of(
        st.binary(max_size=40),
        st.sampled_from(_NASTY_LINES),
        st.recursive(
            st.one_of(
                st.none(),
                st.booleans(),
                st.integers(-(2**70), 2**70),
                st.floats(),
                texts(max_size=10),
            ),
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts(), inner),
            max_leaves=8,
        ).map(lambda value: json.dumps({"op": "parse", "text": value}).encode()),
        st.builds(
            lambda op, depth: (
                json.dumps({"op": op}).encode()[:-1] + b',"x":' + b"[" * depth + b"]" * depth + b"}"
            ),
            st.sampled_from(["describe", "parse", "trace", "race"]),
            st.integers(0, 40),
        ),
    )
    line = draw(shapes).replace(b"\n", b" ")
    return line + draw(st.sampled_from([b"\n", b"\r\n"]))


@given(lines=st.lists(_request_lines(), min_size=1, max_size=6))
@example(lines=_NASTY_LINES)
def test_every_request_line_gets_exactly_one_well_formed_reply(lines: list[bytes]) -> None:
    replies = io.BytesIO()
    serve(rollback, io.BytesIO(b"".join(lines)), replies)
    written = replies.getvalue().splitlines()
    assert len(written) == len(lines)
    for line in written:
        protocol.decode_reply(line.decode("utf-8"))


def test_the_adapter_process_answers_every_nasty_line_and_exits_0() -> None:
    finished = subprocess.run(
        PYTHON_ADAPTER,
        input=b"".join(_NASTY_LINES) + b'{"op":"describe"}\n',
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    replies = finished.stdout.splitlines()
    assert len(replies) == len(_NASTY_LINES) + 1
    assert "ok" in protocol.decode_reply(replies[-1].decode())
    assert not finished.stderr


# --- the harness -------------------------------------------------------------


def _holder_pid(message: str) -> int:
    return int(re.search(r"holder (\d+)", message).group(1))  # type: ignore[union-attr]


def _recorded(holders: Path, /) -> list[int]:
    return [int(pid) for pid in holders.read_text(encoding="ascii").split()]


@pytest.fixture
def holders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Where the broken adapter records each detached holder it leaves; all ended after the test."""
    record = tmp_path / "holders"
    monkeypatch.setenv(HOLDERS_ENV, str(record))
    yield record
    # A child that left the adapter's group is the adapter's, not the
    # harness's: the test ends every one, whether its output names it or not.
    for pid in _recorded(record) if record.exists() else []:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_an_adapter_whose_detached_child_holds_its_output_is_reported_in_time(
    holders: Path,
) -> None:
    started = time.monotonic()
    driver = SubprocessDriver([sys.executable, BROKEN, "detached-holder"], timeout=2.0)
    assert driver.request({"op": "describe"})["ok"]
    with pytest.raises(AdapterFailure) as raised:
        driver.close()
    assert raised.value.breakage is Breakage.OUTPUT_HELD
    assert Breakage.OUTPUT_HELD.value in str(raised.value)
    # The adapter's stderr is in the report, naming the holder it left.
    assert _holder_pid(str(raised.value)) in _recorded(holders)
    # Bounded by the timeouts, with room to spare on a loaded machine.
    assert time.monotonic() - started < 30


def test_a_fresh_adapter_whose_detached_child_holds_its_output_fails_its_request(
    holders: Path,
) -> None:
    driver = SubprocessDriver([sys.executable, BROKEN, "detached-holder"], timeout=2.0)
    with pytest.raises(AdapterFailure) as raised:
        driver.request({"op": "trace", "events": [{"op": "get"}]})
    assert _holder_pid(str(raised.value)) in _recorded(holders)
    assert raised.value.breakage is Breakage.OUTPUT_HELD


def test_a_child_left_in_the_adapters_group_is_killed_and_the_run_goes_on() -> None:
    driver = SubprocessDriver([sys.executable, BROKEN, "group-holder"], timeout=2.0)
    assert driver.request({"op": "trace", "events": [{"op": "get"}]}) == {"ok": ["snapshot"]}
    assert driver.request({"op": "describe"})["ok"]
    driver.close()


def test_an_adapter_that_ignores_sigterm_is_killed_all_the_same() -> None:
    driver = SubprocessDriver([sys.executable, BROKEN, "ignore-sigterm"], timeout=0.5)
    with pytest.raises(AdapterFailure) as raised:
        driver.request({"op": "describe"})
    assert raised.value.breakage is Breakage.HANG


def test_vectors_run_against_a_detached_holder_ends_with_a_clear_report(
    tmp_path: Path, holders: Path
) -> None:
    report = tmp_path / "report.json"
    argv = ["vectors", "run", "--impl-cmd", f"{sys.executable} {BROKEN} detached-holder"]
    finished = subprocess.run(
        [
            sys.executable,
            "-m",
            "ssm_rollback_spec.tools.cli",
            *argv,
            "--impl-timeout",
            "2",
            "--json",
            str(report),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = finished.stdout + finished.stderr
    assert finished.returncode == 1, output[-3000:]
    assert Breakage.OUTPUT_HELD.value in output
    assert "Traceback" not in output
    assert _recorded(holders)


def test_a_corpus_request_that_cannot_be_sent_is_a_bad_corpus(tmp_path: Path) -> None:
    case = {
        "id": "parse-surrogate",
        "clauses": ["RB-PARSE-2"],
        "request": {"op": "parse", "text": "\ud800"},
        "expected": [{"error": {"kind": "bad-request"}}],
    }
    _write_corpus(tmp_path, [case])
    with pytest.raises(corpus.VectorError) as raised:
        corpus.load_cases(tmp_path)
    assert str(raised.value) == (
        "parse.json: case 'parse-surrogate': its request cannot be sent as UTF-8, it holds a "
        'lone surrogate: {"op": "parse", "text": "\\ud800"}'
    )


# --- files and flags ---------------------------------------------------------


def _write_corpus(directory: Path, cases: list[object]) -> None:
    text = json.dumps({"spec_version": "1.0.0", "protocol_version": 1, "cases": cases})
    (directory / "parse.json").write_text(text, encoding="ascii")
    digest = hashlib.sha256(text.encode("ascii")).hexdigest()
    manifest = {
        "spec_version": "1.0.0",
        "protocol_version": 1,
        "schema": "schema.json",
        "files": [{"path": "parse.json", "cases": len(cases), "sha256": digest}],
    }
    (directory / "manifest.json").write_text(json.dumps(manifest), encoding="ascii")


_GOOD_CASE: Final = {
    "id": "parse-x",
    "clauses": ["RB-PARSE-2"],
    "request": {"op": "parse", "text": "x"},
    "expected": [{"error": {"kind": "unknown-mode"}}],
}


@pytest.mark.parametrize(
    ("case", "message"),
    [
        (
            {k: v for k, v in _GOOD_CASE.items() if k != "clauses"},
            (
                "case 'parse-x': must be an object with exactly id, clauses, request and expected, "
                "and maybe line"
            ),
        ),
        (
            _GOOD_CASE | {"clauses": "RB-PARSE-2"},
            "case 'parse-x': its clauses must be a non-empty list of distinct clause IDs",
        ),
        (
            _GOOD_CASE | {"clauses": ["RB-NOPE-1"]},
            "case 'parse-x': it cites clauses SPEC.md does not have: ['RB-NOPE-1']",
        ),
        (_GOOD_CASE | {"request": []}, "case 'parse-x': its request must be an object"),
        (
            _GOOD_CASE | {"expected": [{"fine": 1}]},
            (
                "case 'parse-x': each expected reply must be "
                '{"ok": VALUE} or {"error": {"kind": KIND}}'
            ),
        ),
        (
            _GOOD_CASE | {"id": 7},
            "cases[1]: its id must be lower-case letters, digits and hyphens",
        ),
        (
            "not a case",
            (
                "cases[1]: must be an object with exactly id, clauses, request and expected, "
                "and maybe line"
            ),
        ),
    ],
)
def test_a_malformed_case_is_named_by_file_and_id(
    tmp_path: Path, case: object, message: str
) -> None:
    _write_corpus(tmp_path, [_GOOD_CASE | {"id": "parse-first"}, case])
    with pytest.raises(corpus.VectorError) as raised:
        corpus.load_cases(tmp_path)
    assert str(raised.value) == f"parse.json: {message}"


def _cli(*arguments: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(list(arguments))
        except SystemExit as stop:
            status = int(stop.code or 0)
    return status, out.getvalue(), err.getvalue()


def _bad_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    fifo = tmp_path / "fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    files: dict[str, tuple[Path, str]] = {
        "missing": (tmp_path / "missing.json", "No such file or directory"),
        "directory": (tmp_path, "not a regular file"),
        "fifo": (fifo, "not a regular file"),
        "dev-zero": (Path("/dev/zero"), "not a regular file"),
        "not-json": (tmp_path / "not.json", "not JSON: Expecting property name"),
        "deep": (tmp_path / "deep.json", f"nested deeper than {MAX_FILE_DEPTH} levels"),
        "too-deep-for-the-parser": (
            tmp_path / "deeper.json",
            f"nested deeper than {MAX_FILE_DEPTH} levels",
        ),
        "not-utf8": (tmp_path / "latin.json", "not UTF-8"),
        "too-large": (tmp_path / "large.json", f"larger than {MAX_FILE_BYTES} bytes"),
    }
    files["not-json"][0].write_text("{", encoding="utf-8")
    depth = MAX_FILE_DEPTH + 1
    files["deep"][0].write_text("[" * depth + "]" * depth, encoding="utf-8")
    files["too-deep-for-the-parser"][0].write_text("[" * 100_000, encoding="utf-8")
    files["not-utf8"][0].write_bytes(b'{"a": "\xe9"}')
    with files["too-large"][0].open("wb") as large:
        large.truncate(MAX_FILE_BYTES + 1)
    return files


_FILE_FLAGS: Final = {
    "--config": ["size", *REVIEW, "--config"],
    "--deviations": ["vectors", "run", "--deviations"],
}


@settings(max_examples=40)
@given(flag=st.sampled_from(sorted(_FILE_FLAGS)), kind=st.sampled_from(sorted(
    ["missing", "directory", "fifo", "dev-zero", "not-json", "deep", "too-deep-for-the-parser",
     "not-utf8", "too-large"]
)))  # fmt: skip
def test_a_bad_file_gets_exit_2_and_one_line_naming_it(
    tmp_path_factory: pytest.TempPathFactory, flag: str, kind: str
) -> None:
    path, problem = _bad_files(tmp_path_factory.mktemp("files"))[kind]
    status, out, err = _cli(*_FILE_FLAGS[flag], str(path))
    assert status == 2, out + err
    # The JSON and UTF-8 readers add where in the file; the rest is exact.
    assert err.startswith(f"ssm-rollback-spec: error: {flag} {path}: {problem}"), err
    assert err.count("\n") == 1, err


@pytest.mark.parametrize(
    "kind", ["missing", "directory", "fifo", "dev-zero", "not-json", "deep", "too-large"]
)
def test_a_bad_corpus_file_gets_exit_2_and_one_line(tmp_path: Path, kind: str) -> None:
    path, problem = _bad_files(tmp_path)[kind]
    corpus_dir = tmp_path / "corpus"
    corpus_dir.mkdir()
    manifest = corpus_dir / "manifest.json"
    if kind != "missing":
        # The manifest is the bad file itself, through a link.
        manifest.symlink_to(path)
    status, out, err = _cli("vectors", "run", "--vectors", str(corpus_dir))
    assert status == 2, out + err
    assert err.count("\n") == 1, err
    assert err.startswith(f"ssm-rollback-spec: error: --vectors {corpus_dir}: {manifest}: ")
    assert problem in err


@pytest.mark.parametrize(
    ("arguments", "line"),
    [
        (
            ["size", *REVIEW, "--gdn-layers", "1", "--key-heads", "0"],
            (
                "ssm-rollback-spec: error: --key-heads: must be at least 1, got 0"
                " (see ssm-rollback-spec size --help)"
            ),
        ),
        (
            ["size", "--num-drafts", "-1", "--mtp-slots", "1"],
            (
                "ssm-rollback-spec: error: --num-drafts: must not be negative: -1"
                " (see ssm-rollback-spec size --help)"
            ),
        ),
    ],
)
def test_a_bad_flag_value_gets_exit_2_and_one_line(arguments: list[str], line: str) -> None:
    status, _, err = _cli(*arguments)
    assert status == 2
    # The command, the flag, what was wrong, where to look: and nothing else.
    assert err == f"{line}\n"


@pytest.mark.parametrize("layers", [10**15, 2**64 - 1])
def test_a_config_whose_layer_count_is_huge_ends_at_once_in_one_line(
    tmp_path: Path, layers: int
) -> None:
    # Counting these layers one by one would never end.
    config = json.loads(QWEN3_NEXT.read_text(encoding="utf-8"))
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(config | {"num_hidden_layers": layers}), encoding="utf-8")
    status, _, err = _cli("size", "--config", str(path), *REVIEW)
    assert status == 2
    assert err == (
        "ssm-rollback-spec: error: the preflight reservation exceeds the runtime's 64-bit "
        f"usize with --num-drafts 3, --mtp-slots 1, --config {path}\n"
    )


def test_a_file_at_the_bounds_is_read_and_one_step_past_is_not(tmp_path: Path) -> None:
    at_size = tmp_path / "at-size.json"
    at_size.write_text('"' + "a" * (MAX_FILE_BYTES - 2) + '"', encoding="utf-8")
    assert read_json_file(at_size) == "a" * (MAX_FILE_BYTES - 2)
    past_size = tmp_path / "past-size.json"
    past_size.write_text('"' + "a" * (MAX_FILE_BYTES - 1) + '"', encoding="utf-8")
    with pytest.raises(JsonFileError) as raised:
        read_json_file(past_size)
    assert str(raised.value) == f"larger than {MAX_FILE_BYTES} bytes"
    at_depth = tmp_path / "at-depth.json"
    at_depth.write_text("[" * MAX_FILE_DEPTH + "]" * MAX_FILE_DEPTH, encoding="utf-8")
    assert read_json_file(at_depth)
    past_depth = tmp_path / "past-depth.json"
    depth = MAX_FILE_DEPTH + 1
    past_depth.write_text("[" * depth + "]" * depth, encoding="utf-8")
    with pytest.raises(JsonFileError) as raised:
        read_json_file(past_depth)
    assert str(raised.value) == f"nested deeper than {MAX_FILE_DEPTH} levels"
