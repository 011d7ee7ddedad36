# SPDX-License-Identifier: MIT OR Apache-2.0
"""The protocol's versions, and a describe that names the one it implements (docs/protocol.md)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, Final

import pytest

from ssm_rollback_spec.corpus.replay_offer import (
    FIRST_OFFER,
    NOT_IN_ITS_VERSION,
    ReplayOfferError,
    replay_offer,
    split_offered,
)
from ssm_rollback_spec.harness.adapter import REFERENCE_DESCRIBE
from ssm_rollback_spec.harness.versions import (
    CHANGES,
    CURRENT,
    RENAME,
    ProtocolVersion,
    ProtocolVersionError,
    described_version,
)
from tests.child import run_module
from tests.fakes.versioned_adapter import describe
from tests.replay.shipped import shipped_replay_cases

ROOT: Final = Path(__file__).resolve().parents[2]
ADAPTER: Final = f"{sys.executable} -m tests.fakes.versioned_adapter"


def _described(version: str, /) -> dict[str, object]:
    return {"name": "an adapter", "usize_bits": 64, "protocol": version}


def test_a_describe_names_its_version_or_none() -> None:
    assert described_version({"name": "an adapter", "usize_bits": 64}) is None
    assert described_version(_described("2.3")) == ProtocolVersion(2, 3)
    assert described_version(_described(str(CURRENT))) == CURRENT
    assert ProtocolVersion(2, 3) < RENAME < ProtocolVersion(2, 10) <= CURRENT


@pytest.mark.parametrize("version", ["2", "2.", "3.0", "1.9", "2.03", "2.1.0", " 2.1", "v2.1", ""])
def test_a_version_of_another_shape_is_refused(version: str) -> None:
    with pytest.raises(ProtocolVersionError, match=r'must be a text "2\.N"'):
        described_version(_described(version))


def test_a_version_that_is_not_a_text_is_refused() -> None:
    with pytest.raises(ProtocolVersionError, match=r"got 2\.3"):
        described_version({"protocol": 2.3})


def test_a_version_newer_than_the_suite_is_one_line_naming_both() -> None:
    newer = f"2.{CURRENT.minor + 1}"
    with pytest.raises(ProtocolVersionError) as raised:
        described_version(_described(newer))
    message = str(raised.value)
    assert "\n" not in message
    assert f"protocol {newer}, newer than this suite knows ({CURRENT})" in message


def test_the_reference_names_the_current_version() -> None:
    assert REFERENCE_DESCRIBE["protocol"] == str(CURRENT)
    assert ProtocolVersion(2, len(CHANGES) - 1) == CURRENT


def test_the_protocol_page_names_the_current_version_and_one_line_per_version() -> None:
    page = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
    assert page.splitlines()[1] == f"# The adapter protocol, version {CURRENT}"
    section = page.partition("\n## Changes\n")[2].partition("\n## ")[0]
    versions = re.findall(r"^- \*\*(2\.\d+)\*\*", section, re.MULTILINE)
    assert versions == [f"2.{minor}" for minor in range(len(CHANGES))]


def test_a_version_before_the_rename_is_sent_the_old_name() -> None:
    before = replay_offer({"ok": describe("2.3")})
    after = replay_offer({"ok": describe(str(RENAME))})
    sent_before, _ = split_offered(shipped_replay_cases(), before)
    sent_after, _ = split_offered(shipped_replay_cases(), after)
    named_before = {case.request["pipeline"] for case in sent_before if not case.refused}
    named_after = {case.request["pipeline"] for case in sent_after if not case.refused}
    assert named_before == {"float64", "bf16-rows-fp32-state"}
    assert named_after == {"float64", "transformers-bf16"}
    # With no replay member, a version is sent what the first offer is.
    assert replay_offer({"ok": _described("2.1")}).pipelines == FIRST_OFFER.pipelines


def test_a_version_is_sent_nothing_it_did_not_have() -> None:
    listed = {
        "pipelines": ["float64", "vllm-bf16", "ggml-f32"],
        "layouts": ["pre-conv"],
        "designs": [],
        "batch": ["prompt-chunks", "prefix-hits"],
    }
    offer = replay_offer({"ok": _described("2.2") | {"replay": listed}})
    assert offer.pipelines == {"float64", "vllm-bf16"}
    assert offer.batch == frozenset()
    _, skipped = split_offered(shipped_replay_cases(), offer)
    details = {result.detail for result in skipped}
    assert NOT_IN_ITS_VERSION.format("2.2", "pipeline ggml-f32", "2.8") in details
    assert NOT_IN_ITS_VERSION.format("2.2", "replay_batch", "2.7") in details
    assert replay_offer({"ok": _described("2.11") | {"replay": listed}}).batch == set(
        listed["batch"]
    )


def test_a_malformed_version_is_a_replay_offer_error() -> None:
    with pytest.raises(ReplayOfferError, match="describe's protocol"):
        replay_offer({"ok": _described("two")})


@pytest.mark.parametrize("command", ["vectors", "check"])
def test_an_adapter_newer_than_the_suite_is_refused_in_one_line(command: str) -> None:
    newer = f"2.{CURRENT.minor + 1}"
    arguments = ["run"] if command == "vectors" else []
    finished = run_module(
        "ssm_rollback_spec.tools.cli", command, *arguments,
        "--impl-cmd", f"{ADAPTER} {newer}", timeout=300,
    )  # fmt: skip
    assert finished.returncode == 2
    lines = finished.stderr.strip().splitlines()
    assert len(lines) == 1, finished.stderr
    assert f"implements protocol {newer}, newer than this suite knows ({CURRENT})" in lines[0]
    assert "Traceback" not in finished.stdout + finished.stderr


@pytest.mark.parametrize(("version", "status"), [("2.3", 0), (str(RENAME), 1)])
def test_only_the_version_decides_the_name_an_adapter_is_sent(
    tmp_path: Path, version: str, status: int
) -> None:
    report = tmp_path / "report.json"
    finished = run_module(
        "ssm_rollback_spec.tools.cli", "vectors", "run", "--impl-cmd", f"{ADAPTER} {version}",
        "--clause", "RB-REPLAY-1", "--json", str(report), timeout=600,
    )  # fmt: skip
    assert finished.returncode == status, finished.stdout[-3000:] + finished.stderr
    document: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    assert document["describe"]["protocol"] == version
    failed = [case for case in document["cases"] if case["outcome"] == "failed"]
    assert all("transformers-bf16" in case["id"] for case in failed)
    assert bool(failed) == (status == 1)
