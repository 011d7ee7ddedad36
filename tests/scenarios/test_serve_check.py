# SPDX-License-Identifier: MIT OR Apache-2.0
"""serve-check as its users meet it: toy engines right and wrong on purpose, and bad input.

Every server is the toy engine (``tests/fakes/openai_engine.py``) on a thread
of this process, on loopback, through the command line's ``main``. The
verdicts hold over several seeds, not one.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import socket
import sys
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, Final

import pytest
from junitparser import JUnitXml

from ssm_rollback_spec.results.reports import read_report
from ssm_rollback_spec.tools.cli import main
from tests.fakes.openai_engine import Config, serving

if TYPE_CHECKING:
    from pathlib import Path

#: The seeds each verdict is drawn over: seed 0 every day, the others with the long
#: runs (the same behaviour, more workloads; serve-check's --self-test holds twelve).
SEEDS: Final = (0, pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow))
#: A small workload: the toy's vocabulary, 12 requests.
SMALL: Final = ("--vocab-size", "64", "--requests", "12", "--block-size", "8")
PREFIX: Final = "ssm-rollback-spec: error:"


def _serve_check(
    capsys: pytest.CaptureFixture[str],
    reference: Config,
    target: Config,
    *extra: str,
    calibrate: Config | None = None,
) -> tuple[int, list[str], str]:
    with contextlib.ExitStack() as stack:
        urls = ["--reference", stack.enter_context(serving(reference))]
        urls += ["--target", stack.enter_context(serving(target))]
        if calibrate is not None:
            urls += ["--calibrate", stack.enter_context(serving(calibrate))]
        status = main(["serve-check", *urls, *SMALL, *extra])
    out, err = capsys.readouterr()
    return status, out.splitlines(), err


@pytest.mark.parametrize("seed", SEEDS)
def test_a_correct_speculating_engine_passes(capsys: pytest.CaptureFixture[str], seed: int) -> None:
    status, out, _ = _serve_check(capsys, Config(), Config(spec="ngram"), "--seed", str(seed))
    assert out[0].startswith("serve-check: PASS: ")
    assert status == 0


@pytest.mark.parametrize("seed", SEEDS)
def test_a_verify_path_that_rounds_otherwise_than_decoding_passes_when_calibrated(
    capsys: pytest.CaptureFixture[str], seed: int
) -> None:
    status, out, _ = _serve_check(
        capsys,
        Config(),
        Config(spec="ngram", verify_noise=1e-3),
        "--seed",
        str(seed),
        calibrate=Config(spec="never", verify_noise=1e-3),
    )
    assert out[0].startswith("serve-check: PASS: ")
    assert status == 0
    bound = next(line for line in out if line.startswith("noise bound: "))
    assert not bound.startswith("noise bound: 0 ")
    assert "never-drafting target against reference" in bound


@pytest.mark.parametrize("seed", SEEDS)
def test_uncalibrated_rounding_that_persists_in_the_state_fails_and_says_to_calibrate(
    capsys: pytest.CaptureFixture[str], seed: int
) -> None:
    # Without a never-drafting server the judge cannot tell a verify path's rounding,
    # carried in the recurrent state, from a small error that grows: it errs towards
    # failing, and says how to measure the rounding.
    status, out, _ = _serve_check(
        capsys, Config(), Config(spec="ngram", verify_noise=1e-3), "--seed", str(seed)
    )
    assert status == 1
    assert out[0].startswith("serve-check: FAIL: ")
    assert any(line.startswith("hint: no server calibrated the bound: ") for line in out)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("fault", ["one-token", "drift"])
def test_a_wrong_rollback_fails_with_a_shrunk_reproducer(
    capsys: pytest.CaptureFixture[str], seed: int, fault: str
) -> None:
    status, out, _ = _serve_check(
        capsys, Config(), Config(spec="ngram", fault=fault), "--seed", str(seed)
    )
    assert out[0].startswith("serve-check: FAIL: ")
    assert status == 1
    assert any(line.startswith("FAIL request ") for line in out)
    assert any(line.startswith("shrunk in ") for line in out)
    curls = [line for line in out if ": curl -s http://127.0.0.1:" in line]
    assert {line.split(":", 1)[0].rsplit(", ", 1)[1] for line in curls} == {"reference", "target"}
    for line in curls:
        assert shlex.split(line.split(": ", 1)[1])[0] == "curl"


def test_a_drafter_that_never_drafts_is_not_observed(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _serve_check(capsys, Config(), Config(spec="never"))
    assert out[0] == (
        "serve-check: NOT OBSERVED: the target accepted no drafts (0 drafted): "
        "nothing was rolled back past an accepted draft"
    )
    assert status == 3


@pytest.mark.parametrize(("fault", "status"), [("none", 0), ("one-token", 1)])
def test_llama_servers_dialect_works_end_to_end(
    capsys: pytest.CaptureFixture[str], fault: str, status: int
) -> None:
    got, out, _ = _serve_check(
        capsys, Config(dialect="llama.cpp"), Config(spec="ngram", dialect="llama.cpp", fault=fault)
    )
    assert got == status
    assert out[1].startswith("model 'toy-recurrent', dialect llama.cpp, ")
    assert any("timings.draft_n and timings.draft_n_accepted" in line for line in out)


def test_the_json_and_junit_reports_are_written_and_read_back(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report, junit = tmp_path / "serve.json", tmp_path / "serve.xml"
    status, _, _ = _serve_check(
        capsys,
        Config(),
        Config(spec="ngram", fault="one-token"),
        "--json",
        str(report),
        "--junit-xml",
        str(junit),
    )
    assert status == 1
    document = json.loads(report.read_text("utf-8"))
    assert document["verdict"] == "FAIL"
    assert document["reproducer"]
    read = read_report(report)
    assert read.command == "serve-check"
    assert read.release == "0.0.0-toy"
    assert len(read.results) == 12
    assert any(result.outcome == "failed" for result in read.results)
    ET.parse(junit)  # noqa: S314 - our own file
    suites = JUnitXml.fromfile(str(junit))
    cases = [case for suite in suites for case in suite]
    assert len(cases) == 12
    assert any(not case.is_passed for case in cases)


# Bad input and faults: one line on stderr, a non-zero exit.


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_url_nothing_answers_at_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    with serving(Config()) as reference:
        status = main(["serve-check", "--reference", reference, "--target", url])
    err = capsys.readouterr().err
    assert (
        err == f"{PREFIX} --target {url}: nothing answers there ([Errno 111] Connection refused)\n"
    )
    assert status == 2


def test_a_target_that_is_not_a_url_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["serve-check", "--reference", "http://127.0.0.1:1", "--target", "localhost"])
    assert capsys.readouterr().err == (
        f"{PREFIX} --target 'localhost': not an http:// or https:// URL with a host\n"
    )
    assert status == 2


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            Config(not_openai=True),
            (
                "--target {target}: GET /v1/models did not answer with an OpenAI model list "
                '({{"data": [{{"id": ...}}, ...]}})'
            ),
        ),
        (
            Config(spec="ngram", model="other"),
            (
                "the servers serve different models: --reference serves 'toy-recurrent'; "
                "--target serves 'other'"
            ),
        ),
    ],
    ids=["not OpenAI", "another model"],
)
def test_a_target_that_cannot_be_judged_against_the_reference_is_one_line(
    capsys: pytest.CaptureFixture[str], target: Config, message: str
) -> None:
    with serving(Config()) as reference, serving(target) as url:
        status = main(["serve-check", "--reference", reference, "--target", url])
    assert capsys.readouterr().err == f"{PREFIX} {message.format(target=url)}\n"
    assert status == 2


def test_servers_of_different_vocabularies_are_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = _serve_check(
        capsys, Config(dialect="llama.cpp"), Config(spec="ngram", dialect="llama.cpp", vocab=96)
    )
    assert err == f"{PREFIX} the servers' models differ in n_vocab: --reference 64, --target 96\n"
    assert (status, out) == (2, [])


def test_a_target_that_dies_mid_run_fails_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _serve_check(capsys, Config(), Config(spec="ngram", die_after=5))
    assert out[0].startswith("serve-check: FAIL: the target server answered HTTP 500 to request ")
    assert out[0].endswith(
        ': {"error": "The size of tensor a (6) must match the size of tensor b (4)"}'
    )
    assert any(line.startswith("request 0, target: curl ") for line in out)
    assert status == 1


def test_a_reference_that_dies_mid_run_ends_it_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = _serve_check(capsys, Config(die_after=5), Config(spec="ngram"))
    assert err.startswith(f"{PREFIX} the reference server answered HTTP 500 to request ")
    assert err.endswith(": the reference must serve every request\n")
    assert err.count("\n") == 1
    assert (status, out) == (2, [])


def test_a_target_that_hangs_fails_at_the_deadline_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, _ = _serve_check(
        capsys, Config(), Config(spec="ngram", hang_after=5), "--timeout", "0.5"
    )
    assert out[0].startswith("serve-check: FAIL: the target server did not answer request ")
    assert out[0].endswith(" within 0.5 s")
    assert status == 1


def test_a_reference_that_hangs_ends_the_run_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = _serve_check(
        capsys, Config(hang_after=5), Config(spec="ngram"), "--timeout", "0.5"
    )
    assert err.startswith(f"{PREFIX} the reference server did not answer request ")
    assert err.endswith(" within 0.5 s: the reference must serve every request\n")
    assert (status, out) == (2, [])


def test_a_prompts_file_with_a_bad_line_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": [1, 2]}\n{"prompt": [1], "n": 2}\n', encoding="utf-8")
    status, out, err = _serve_check(
        capsys, Config(), Config(spec="ngram"), "--prompts", str(prompts)
    )
    assert err == f"{PREFIX} --prompts {prompts} line 2: unknown field 'n'\n"
    assert (status, out) == (2, [])


def test_a_target_command_that_exits_at_once_is_one_line_and_leaves_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    command = f"{shlex.quote(sys.executable)} -c 'import sys; print(\"no GPU\"); sys.exit(4)'"
    with serving(Config()) as reference:
        status = main(
            ["serve-check", "--reference", reference, "--target", url, "--target-cmd", command]
        )
    assert capsys.readouterr().err == (
        f"{PREFIX} --target: the target server's command exited with status 4 before "
        f"answering at {url}: no GPU\n"
    )
    assert status == 2


def test_a_target_that_dies_is_started_again_to_shrink_its_crash_to_one_request(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # The target dies on any prompt that holds token 63; the command started it, so it
    # starts it again and tries each request of the batch it died on alone.
    port = _closed_port()
    url = f"http://127.0.0.1:{port}"
    toy = [sys.executable, "-m", "ssm_rollback_spec.serving.toy", "--port", str(port)]
    command = shlex.join([*toy, "--spec", "ngram", "--die-on", "63"])
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        '{"prompt": [1, 2, 3, 1, 2, 3], "max_tokens": 8, "batch": 0}\n'
        '{"prompt": [5, 63, 7], "max_tokens": 8, "batch": 0}\n'
        '{"prompt": [9, 10], "max_tokens": 8, "batch": 0}\n',
        encoding="utf-8",
    )
    with serving(Config()) as reference:
        status = main(
            [
                "serve-check",
                "--reference",
                reference,
                "--target",
                url,
                "--target-cmd",
                command,
                "--prompts",
                str(prompts),
                "--vocab-size",
                "64",
            ]
        )
    out = capsys.readouterr().out.splitlines()
    assert status == 1
    assert out[0].startswith("serve-check: FAIL: the target server answered HTTP 500 to request")
    shrunk = out.index("requests (a --prompts file; sent at once):")
    assert out[shrunk - 1].startswith("shrunk in ")
    assert out[shrunk + 1] == '  {"prompt": [5, 63, 7], "max_tokens": 8, "batch": 0}'
    assert out[shrunk + 2].startswith("request 0, reference: curl -s ")
