# SPDX-License-Identifier: MIT OR Apache-2.0
"""A non-Python runtime's replay over the protocol: the Rust adapter passes, wrong builds fail."""

from __future__ import annotations

import json
import re
import subprocess
from typing import TYPE_CHECKING, Any, Final

import pytest

from ssm_rollback_spec import corpus
from tests.child import ROOT, run_cargo, run_module, wrong_target

if TYPE_CHECKING:
    from pathlib import Path

REPLAY: Final = ROOT / "vectors" / "replay"
PROTOCOL_PAGE: Final = ROOT / "docs" / "protocol-replay.md"
BATCH_PAGE: Final = ROOT / "docs" / "protocol-replay-batch.md"
#: What the Rust adapter's describe says its replay computes (adapters/rust/src/main.rs).
RUST_OFFER: Final = corpus.ReplayOffer(
    pipelines=frozenset({"float64", "transformers-bf16"}),
    layouts=frozenset({"pre-conv", "post-conv"}),
    designs=frozenset({"seed-row", "minimal-pre-conv", "replayssm", "post-conv-with-conv-window"}),
)


def _offered() -> list[corpus.ReplayCase]:
    return [
        c for c in corpus.load_replay_cases(REPLAY) if corpus.not_offered(c, RUST_OFFER) is None
    ]


def _report(tmp_path: Path, adapter: str, /, *arguments: str) -> tuple[int, dict[str, Any]]:
    report = tmp_path / "report.json"
    finished = run_module(
        "ssm_rollback_spec.tools.cli",
        "vectors",
        "run",
        "--impl-cmd",
        adapter,
        *arguments,
        "--json",
        str(report),
        timeout=600,
    )
    assert "Traceback" not in finished.stdout + finished.stderr
    return finished.returncode, json.loads(report.read_text(encoding="utf-8"))


def test_the_rust_adapter_describes_what_its_replay_computes(rust_adapter: str) -> None:
    finished = subprocess.run(
        [rust_adapter],
        input='{"op":"describe"}\n',
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert corpus.replay_offer(json.loads(finished.stdout)) == RUST_OFFER


def test_the_rust_adapter_reads_the_old_pipeline_name_as_the_new_one(rust_adapter: str) -> None:
    # bf16-rows-fp32-state stays an alias of transformers-bf16 while the protocol is 2.
    case = next(c for c in corpus.load_replay_cases(REPLAY) if c.pipeline == "transformers-bf16")
    lines = [json.dumps(case.request | {"pipeline": name}) for name in _BF16_NAMES]
    finished = subprocess.run(
        [rust_adapter],
        input="".join(f"{line}\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    new, old = finished.stdout.splitlines()
    assert "ok" in json.loads(new)
    assert old == new


#: The pipeline's name now, and the one it had before (docs/protocol.md, "Changes").
_BF16_NAMES: Final = ("transformers-bf16", "bf16-rows-fp32-state")


def test_the_rust_adapter_passes_every_replay_case_it_offers(
    tmp_path: Path, rust_adapter: str
) -> None:
    status, report = _report(tmp_path, rust_adapter, "--clause", "RB-REPLAY")
    replay = corpus.load_replay_cases(REPLAY)
    outcomes = {case["id"]: case["outcome"] for case in report["cases"]}
    offered = {case.case_id for case in _offered()}
    assert status == 0, report
    assert offered
    scripts = corpus.load_model_cases(REPLAY)
    assert outcomes == {
        case.case_id: "passed" if case.case_id in offered else "skipped" for case in replay
    } | {case.case_id: "passed" for case in scripts}


def test_each_wrong_rust_replay_build_fails_the_replay_cases(
    tmp_path: Path, wrong_replay_rust_adapter: tuple[str, str]
) -> None:
    feature, adapter = wrong_replay_rust_adapter
    status, report = _report(tmp_path, adapter)
    failed = [case for case in report["cases"] if case["outcome"] == "failed"]
    assert status == 1
    assert failed, feature
    assert all(case["id"].startswith("replay-") for case in failed)
    if feature == "replay-stale-rows":
        # Only a decode of many rounds shows rows left from an earlier round.
        assert {case["id"].split("-")[1] for case in failed} == {"rounds"}
    else:
        # Every case judged by the model's states: the refusals are refused as before,
        # and a batch against its sequences alone is one short both times.
        judged = [case for case in _offered() if not case.refused and not case.alone]
        assert len(failed) == len(judged)
    first = failed[0]["detail"].splitlines()[0]
    pattern = (
        r"states\[\d+\]\.(conv|h)(\[\d+\])+: expected \S+, got \S+: relative error \S+ "
        r"\(of max \|expected\| over states\[\d+\]\.(conv|h)\) exceeds \S+, the bound for "
        r"(float64|transformers-bf16) \((RB-REPLAY-\d+(, )?)+\)"
    )
    assert re.fullmatch(pattern, first), first


def test_the_documented_replay_exchange_is_what_the_rust_adapter_replies(
    rust_adapter: str,
) -> None:
    page = PROTOCOL_PAGE.read_text(encoding="utf-8")
    request = next(line[2:] for line in page.splitlines() if line.startswith('> {"op":"replay"'))
    documented = next(line for line in page.splitlines() if line.startswith('{"ok":{"states"'))
    _same_values(rust_adapter, request, documented)


def test_the_documented_replay_batch_exchange_is_what_the_rust_adapter_replies(
    rust_adapter: str,
) -> None:
    lines = BATCH_PAGE.read_text(encoding="utf-8").splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith('> {"op":"replay_batch"'))
    documented = next(line for line in lines[at:] if line.startswith('{"ok":{"states"'))
    assert len(json.loads(documented)["ok"]["states"]) == 4
    _same_values(rust_adapter, lines[at][2:], documented)


def _same_values(rust_adapter: str, request: str, documented: str, /) -> None:
    finished = subprocess.run(
        [rust_adapter], input=request + "\n", capture_output=True, text=True, timeout=60, check=True
    )
    reply = json.loads(finished.stdout)
    expected = json.loads(documented)

    def values(value: object) -> object:
        if isinstance(value, list):
            return [values(item) for item in value]
        if isinstance(value, dict):
            return {key: values(item) for key, item in value.items()}
        return float.fromhex(value) if isinstance(value, str) else value

    assert values(reply) == values(expected)


@pytest.mark.slow
def test_a_rust_pool_that_reads_slot_0_without_drafts_fails_the_batch_cases_only(
    tmp_path: Path, cargo: str
) -> None:
    feature = "replay-batch-slot-zero"
    built = run_cargo(cargo, "build", feature=feature)
    assert built.returncode == 0, built.stderr
    adapter = str(wrong_target(feature) / "release" / "ssm-rollback-adapter")
    status, report = _report(tmp_path, adapter, "--clause", "RB-REPLAY")
    failed = {case["id"] for case in report["cases"] if case["outcome"] == "failed"}
    assert status == 1
    assert failed
    assert {case_id.split("-")[1] for case_id in failed} == {"batch"}
    # check's batch properties, the shipped batches and the drawn ones, both fail it.
    document = tmp_path / "check.json"
    finished = run_module(
        "ssm_rollback_spec.tools.cli",
        "check",
        "--impl-cmd",
        adapter,
        "--clause",
        "RB-REPLAY-12",
        "--json",
        str(document),
        timeout=600,
    )
    outcomes = {
        row["property"]: row["outcome"]
        for row in json.loads(document.read_text(encoding="utf-8"))["properties"]
    }
    assert finished.returncode == 1
    assert outcomes == {
        "test_replay.py::test_every_shipped_batch_gives_each_sequence_its_own_replay": "failed",
        "test_replay.py::test_each_sequence_of_a_drawn_batch_is_its_own_replay_alone": "failed",
    }
    assert "replay-batch-000-float64-no-drafts-beside-drafts" in failed
