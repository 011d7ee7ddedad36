# SPDX-License-Identifier: MIT OR Apache-2.0
"""Against adapters as people write them: wire mistakes are rejected, output is actionable.

Each wrong adapter (``tests/fakes/wrong_adapter.py``) makes one mistake of a JSON
layer; ``check`` and ``vectors run`` must each reject it, and every line
``check`` prints over the protocol must be free of Python text, so that a
C++ or Node team can act on it. ``check`` and ``vectors run`` must agree on
each clause they both judge, and their JUnit reports must parse.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING, Final

import junitparser
import pytest

from ssm_rollback_spec.harness.clauses import REPLAY_PROFILE_CLAUSES
from ssm_rollback_spec.harness.failures import show_output
from ssm_rollback_spec.tools.check import REPLAY_PROPERTY_CLAUSES
from tests.child import ROOT, run_module
from tests.fakes import FAKES

if TYPE_CHECKING:
    from pathlib import Path

WRONG_ADAPTER: Final = str(FAKES / "wrong_adapter.py")

#: Python text that would tell an adapter's authors nothing: reprs, asserts,
#: Hypothesis's own report, enum members, Python dicts and source lines.
PYTHON_TEXT: Final = re.compile(
    r"Falsifying|Failing explicit example|Traceback|\bassert\b|AssertionError|"
    r"<\w+\.\w+|\{'|\['|\bNone\b|\bTrue\b|\bFalse\b|Driver\(|impl=|reproduce_failure|"
    r"Explanation:|\.py:\d+|ErrorKind|NonConformingReply|AdapterFailure"
)

#: Each mistake, and the clause family whose properties must catch it.
MISTAKES: Final = {
    "lenient-integers": "RB-PROTO-4",
    "no-event-bound": "RB-PROTO-4",
    "no-depth-bound": "RB-PROTO-4",
    "nul-cut": "RB-PARSE-1",
}


def _wrong(mistake: str, /) -> str:
    # -S: no site-packages to scan, so a fresh process per trace starts fast.
    return f"{sys.executable} -S {WRONG_ADAPTER} {mistake}"


def _cli(*arguments: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HYPOTHESIS_PROFILE": "ci"}
    for name in (
        "SSM_ROLLBACK_IMPL_CMD",
        "SSM_ROLLBACK_IMPL_MODULE",
        "HYPOTHESIS_STORAGE_DIRECTORY",
    ):
        env.pop(name, None)
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "ssm_rollback_spec.tools.cli", *arguments],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def python_text_in(output: str, /) -> list[str]:
    """The lines of ``output`` that hold Python text."""
    return [line for line in output.splitlines() if PYTHON_TEXT.search(line)]


def _failures(output: str, /) -> list[str]:
    # Each FAIL line with the indented lines that follow it.
    blocks = re.findall(r"^FAIL  .*\n(?:      .*\n)*", output, re.MULTILINE)
    return [block for block in blocks if not block.startswith("FAIL  RB-")]


def _require_actionable(output: str, /) -> None:
    assert python_text_in(output) == [], output[-4000:]
    failures = _failures(output)
    assert failures, output[-3000:]
    for block in failures:
        for part in ("request: ", "reply:   ", "allowed: ", "reproduce: printf '%s\\n' "):
            assert part in block, block


def test_the_pattern_finds_python_text() -> None:
    found = python_text_in(
        "ok line\nassert None == 'bad-request'\n<ErrorKind.BAD_REQUEST: 'bad-request'>\n"
        "Falsifying explicit example: f(impl=SubprocessDriver('x'))\n{'op': 'parse'}\n"
    )
    assert len(found) == 4


@pytest.mark.slow
@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_a_wire_mistake_is_rejected_by_check_with_actionable_output(
    mistake: str, tmp_path: Path
) -> None:
    where = tmp_path / "cwd"
    where.mkdir()
    finished = _cli(
        "check", "--impl-cmd", _wrong(mistake), "--clause", MISTAKES[mistake],
        "--race-budget", "0", "--json", str(tmp_path / "check.json"), cwd=where,
    )  # fmt: skip
    assert finished.returncode == 1, finished.stdout[-3000:] + finished.stderr
    _require_actionable(finished.stdout)
    # Nothing is written into the folder check runs in (no .hypothesis/).
    assert list(where.iterdir()) == []
    # The vectors of the same clauses fail them too; check, which blames the
    # clause the wrong part of a reply breaks, names no clause they do not.
    ran = _cli(
        "vectors", "run", "--impl-cmd", _wrong(mistake), "--clause", MISTAKES[mistake],
        "--json", str(tmp_path / "vectors.json"),
    )  # fmt: skip
    assert ran.returncode == 1, ran.stdout[-3000:]
    by_check = json.loads((tmp_path / "check.json").read_text(encoding="utf-8"))["clauses"]
    by_vectors = json.loads((tmp_path / "vectors.json").read_text(encoding="utf-8"))["clauses"]
    failed_by_check = {clause for clause, outcome in by_check.items() if outcome == "failed"}
    assert failed_by_check
    assert failed_by_check <= {c for c, outcome in by_vectors.items() if outcome == "failed"}


@pytest.mark.slow
@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_a_wire_mistake_is_rejected_by_the_vectors(mistake: str) -> None:
    finished = _cli("vectors", "run", "--impl-cmd", _wrong(mistake))
    assert finished.returncode == 1, finished.stdout[-3000:] + finished.stderr
    assert python_text_in(finished.stdout) == []
    assert re.search(r"^FAIL  [a-z]", finished.stdout, re.MULTILINE)


def test_a_failed_race_over_cells_shows_the_reply_the_adapter_sent() -> None:
    finished = _cli(
        "check", "--impl-cmd", _wrong("mixed-round"), "--clause", "RB-PUB-4",
        "-k", "fresh_cells", "--race-budget", "0",
    )  # fmt: skip
    assert finished.returncode == 1, finished.stdout[-3000:]
    _require_actionable(finished.stdout)
    [block] = [b for b in _failures(finished.stdout) if "fresh_cells" in b]
    # The reply as sent, {"ok": [ROUND, ...]} (shortened past 2,000
    # characters), and the round that mixed.
    # The reply as the adapter wrote it, not re-encoded.
    assert 'reply:   {"ok":[["' in block, block
    assert re.search(r"wrong:   round \d+ \(counting from 0\) returned \[", block), block


@pytest.mark.slow
def test_check_and_the_vectors_agree_on_every_clause_and_write_junit(
    rust_adapter: str, tmp_path: Path
) -> None:
    check_json, vectors_json = tmp_path / "check.json", tmp_path / "vectors.json"
    check_xml, vectors_xml = tmp_path / "check.xml", tmp_path / "vectors.xml"
    # A one-second race budget: the budget's verdict is the same, and cheap.
    checked = _cli(
        "check", "--impl-cmd", rust_adapter, "--json", str(check_json),
        "--junit-xml", str(check_xml), "--race-budget", "1",
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout[-3000:]
    assert python_text_in(checked.stdout) == []
    ran = _cli(
        "vectors", "run", "--impl-cmd", rust_adapter, "--json", str(vectors_json),
        "--junit-xml", str(vectors_xml),
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-3000:]
    by_check = json.loads(check_json.read_text(encoding="utf-8"))["clauses"]
    by_vectors = json.loads(vectors_json.read_text(encoding="utf-8"))["clauses"]
    # The replay corpus cites draft clauses no replay property does (the
    # conv state's inputs, ReplaySSM's fold): only the vectors judge those.
    only_vectors = set(by_vectors) - set(by_check)
    assert only_vectors <= REPLAY_PROFILE_CLAUSES - REPLAY_PROPERTY_CLAUSES, only_vectors
    # A race the host's scheduler never ran is no verdict, and never a pass
    # (docs/protocol-race-evidence.md); the rest agree.
    unseen = {
        c for report in (by_check, by_vectors) for c, o in report.items() if o == "not-observed"
    }
    assert unseen <= {"RB-PUB-4"}, unseen
    assert {c: by_check[c] for c in by_vectors if c in by_check.keys() - unseen} == {
        c: outcome for c, outcome in by_vectors.items() if c in by_check.keys() - unseen
    }
    # What check skips over the protocol is what only the Python API shows: the
    # Rust adapter offers the model operation too (RB-REPLAY-14), with its tiny model.
    assert by_check["RB-REPLAY-14"] == by_vectors["RB-REPLAY-14"] == "passed"
    skipped = sorted(c for c, outcome in by_check.items() if outcome == "skipped")
    assert all(c.startswith(("RB-CELL-", "RB-PY-")) for c in skipped), skipped
    assert not set(skipped) & set(by_vectors)
    for path, report in ((check_xml, check_json), (vectors_xml, vectors_json)):
        _require_junit(path, json.loads(report.read_text(encoding="utf-8")))


def _require_junit(path: Path, report: dict[str, object], /) -> None:
    rows = report.get("properties") or report["cases"]
    assert isinstance(rows, list)
    [suite] = list(junitparser.JUnitXml.fromfile(str(path)))
    cases = list(suite)
    assert len(cases) == len(rows) == suite.tests
    for case, row in zip(cases, rows, strict=True):
        name = row.get("property") or row["id"]
        assert case.name == f"{name} [{', '.join(row['clauses'])}]"
        outcome = {junitparser.Skipped: "skipped", junitparser.Failure: "failed"}
        results = [outcome.get(type(result), "other") for result in case.result]
        expected = "skipped" if row["outcome"] == "not-observed" else row["outcome"]
        assert results == ([] if expected == "passed" else [expected]), name
        if expected == "skipped":
            assert case.result[0].message == row["detail"].splitlines()[0]


def test_a_deviation_is_a_skipped_testcase_with_its_reason(tmp_path: Path) -> None:
    deviations = tmp_path / "deviations.json"
    entry = {"case": "protocol-bad-integer-exponent", "reason": "our reader takes 1e2"}
    deviations.write_text(json.dumps({"deviations": [entry]}), encoding="utf-8")
    report = tmp_path / "vectors.xml"
    finished = _cli(
        "vectors", "run", "--impl-cmd", _wrong("lenient-integers"), "--clause", "RB-PROTO-4",
        "--deviations", str(deviations), "--junit-xml", str(report),
    )  # fmt: skip
    assert finished.returncode == 1, finished.stdout[-3000:]
    [suite] = list(junitparser.JUnitXml.fromfile(str(report)))
    by_name = {case.name: case for case in suite}
    [deviating] = by_name["protocol-bad-integer-exponent [RB-PROTO-4]"].result
    assert isinstance(deviating, junitparser.Skipped)
    assert deviating.message == (
        "deviates knowingly (case protocol-bad-integer-exponent): our reader takes 1e2"
    )
    [failed] = by_name["protocol-bad-integer-minus-zero [RB-PROTO-4]"].result
    assert isinstance(failed, junitparser.Failure)
    assert suite.failures == 2
    # The one deviation, beside the refusals of replay (RB-PROTO-4 too), which
    # this adapter does not offer.
    skipped = [r for case in suite for r in case.result if isinstance(r, junitparser.Skipped)]
    refusals = [r for r in skipped if r.message.startswith("not offered: ")]
    assert suite.skipped == len(skipped) == 1 + len(refusals)
    assert {r.message for r in refusals} == {
        "not offered: the adapter answered unknown-op to replay",
        "not offered: the adapter answered unknown-op to replay_batch",
    }


def test_the_reference_passes_every_case_the_wire_mistakes_fail() -> None:
    finished = run_module(
        "ssm_rollback_spec.tools.cli", "vectors", "run", "--clause", "RB-PROTO-4", timeout=300
    )
    assert finished.returncode == 0, finished.stdout[-3000:]


# --- the protocol page's decisions, pinned on the shipped adapters ----------


def _serve(argv: list[str], data: bytes, /) -> list[dict[str, object]]:
    finished = subprocess.run(argv, input=data, capture_output=True, timeout=60, check=False)
    assert finished.returncode == 0, finished.stderr
    return [json.loads(line) for line in finished.stdout.decode("utf-8").splitlines()]


def _adapters(rust_adapter: str, /) -> list[list[str]]:
    return [[sys.executable, "-m", "ssm_rollback_spec.harness.adapter"], [rust_adapter]]


def test_a_last_line_without_a_newline_is_still_a_request(rust_adapter: str) -> None:
    for argv in _adapters(rust_adapter):
        replies = _serve(argv, b'{"op":"parse","text":"replay"}\n{"op":"parse","text":"snapshot"}')
        assert replies == [{"ok": "replay"}, {"ok": "snapshot"}], argv


def test_a_line_that_is_not_utf8_is_bad_request_and_the_adapter_serves_on(
    rust_adapter: str,
) -> None:
    data = b'{"op":"parse","text":"re\xffplay"}\n{"op":"parse","text":"replay"}\n'
    for argv in _adapters(rust_adapter):
        refused, served = _serve(argv, data)
        assert refused["error"]["kind"] == "bad-request", argv  # type: ignore[index]
        assert served == {"ok": "replay"}, argv


@pytest.fixture(scope="module")
def c_racy_adapter(tmp_path_factory: pytest.TempPathFactory) -> str:
    compiler = shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler (cc) to build tests/fakes/c-racy")
    built = tmp_path_factory.mktemp("c-racy") / "c-racy-adapter"
    source = FAKES / "c-racy" / "adapter.c"
    compiled = subprocess.run(
        [compiler, "-O2", "-Wall", "-Werror", "-pthread", "-o", str(built), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert compiled.returncode == 0, compiled.stderr
    return str(built)


@pytest.mark.slow
def test_the_racy_c_adapter_is_right_but_for_its_races(c_racy_adapter: str) -> None:
    # Everything but the races passes, so the race-power benchmark measures
    # the race alone; its races are the only thing left to catch it.
    races = ("test_concurrent_calls", "test_a_budget_of_races")
    finished = run_module(
        "pytest", "tests/properties", "-q", "-p", "no:cacheprovider",
        f"--impl-cmd={c_racy_adapter}", "--race-budget=0",
        "-k", " and ".join(f"not {name}" for name in races), timeout=300,
    )  # fmt: skip
    assert finished.returncode == 0, finished.stdout[-3000:]
    # Every case but the races of RB-PUB-4, which a racy cell may lose.
    families = ("RB-MODE", "RB-PARSE", "RB-SIZE", "RB-VERIFY", "RB-PROTO")
    clauses = (*families, "RB-PUB-1", "RB-PUB-2", "RB-PUB-3")
    ran = _cli("vectors", "run", "--impl-cmd", c_racy_adapter, *(f"--clause={c}" for c in clauses))
    assert ran.returncode == 0, ran.stdout[-3000:]


def test_every_option_docs_ci_uses_is_one_the_commands_take() -> None:
    page = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    # Every option on the page but those of the build steps (cargo, apt-get).
    ours = [line for line in page.splitlines() if not re.search(r"cargo|apt-get", line)]
    used = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", "\n".join(ours)))
    assert {"--impl-cmd", "--junit-xml", "--json", "--race-budget"} <= used
    commands = (["check"], ["vectors", "run"], ["report"])
    helps = [_cli(*command, "--help").stdout for command in commands]
    for option in used:
        assert any(option in text for text in helps), option


@pytest.mark.slow
def test_a_race_on_a_pool_of_16_threads_is_allowed() -> None:
    # 256 events on 16 threads: the protocol allows a pool (docs/protocol.md).
    finished = _cli("vectors", "run", "--impl-cmd", _wrong("pool-of-16"), "--clause", "RB-PUB-4")
    assert finished.returncode == 0, finished.stdout[-3000:]
    ran = _cli("vectors", "run", "--impl-cmd", _wrong("pool-of-16"), "--clause", "RB-PROTO-4")
    assert ran.returncode == 0, ran.stdout[-3000:]


def test_what_an_adapter_wrote_shows_as_written_or_as_a_json_string() -> None:
    assert show_output(b"this is not json\n") == "this is not json"
    assert show_output(b'{"ok":"replay"}\n{"ok":"replay"}\n') == (
        '{"ok":"replay"}\n    {"ok":"replay"}'
    )
    assert show_output(b"bell\x07\n") == '"bell\\u0007\\n"'
    assert show_output(b"\xff\n") == '"\ufffd\\n"'
    assert show_output(b"\n") == '"\\n"'


def test_an_adapter_that_breaks_the_protocol_gets_actionable_output() -> None:
    broken = f"{sys.executable} -S {FAKES / 'broken_adapter.py'} non-json parse"
    finished = _cli("check", "--impl-cmd", broken, "--clause", "RB-MODE-1", "--race-budget", "0")
    assert finished.returncode == 1, finished.stdout[-3000:]
    assert python_text_in(finished.stdout) == [], finished.stdout[-3000:]
    failures = _failures(finished.stdout)
    assert failures
    for block in failures:
        for part in ("request: ", "came back: this is not json", "allowed: ", "reproduce: "):
            assert part in block, block
