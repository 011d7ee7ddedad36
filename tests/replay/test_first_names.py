# SPDX-License-Identifier: MIT OR Apache-2.0
"""An adapter is sent only the names its protocol had: protocol 2's first ``replay`` still passes.

The adapter is ``tests/fakes/first_replay_adapter.py``: the oldest ``describe``
there was (``{"name", "usize_bits"}``, no ``replay`` member) over the two
pipelines of the page that first said ``replay``, by their first names. It is
run against the whole shipped replay corpus, as an outside adapter written
then is (docs/protocol-replay.md, "Which names an adapter is sent").
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, Final

from ssm_rollback_spec.corpus.replay_offer import (
    FIRST_OFFER,
    FIRST_PIPELINES,
    NOT_A_FIRST_PIPELINE,
    replay_offer,
    split_offered,
)
from ssm_rollback_spec.harness.replay_wire import ENGINE_PIPELINES
from tests.child import run_module
from tests.fakes.first_replay_adapter import DESCRIBE, reply
from tests.properties.replay_reference import SMALL_REPLAY
from tests.replay.shipped import shipped_replay_cases

if TYPE_CHECKING:
    from pathlib import Path

ADAPTER: Final = f"{sys.executable} -m tests.fakes.first_replay_adapter"


def test_the_first_adapter_refuses_the_current_name_as_the_outside_adapter_did() -> None:
    refused = reply(json.dumps(SMALL_REPLAY | {"pipeline": "transformers-bf16"}), None)
    assert refused == {
        "error": {
            "kind": "bad-request",
            "message": 'field \'pipeline\' must be "float64" or "bf16-rows-fp32-state", '
            'got "transformers-bf16"',
        }
    }


def test_a_describe_with_no_replay_member_is_offered_the_first_pipelines_by_their_first_names() -> (
    None
):
    offer = replay_offer({"ok": DESCRIBE})
    assert offer == FIRST_OFFER
    assert FIRST_PIPELINES == ("float64", "bf16-rows-fp32-state")
    sent, skipped = split_offered(shipped_replay_cases(), offer)
    # A refusal may name a pipeline no protocol had (refusals.json): it is sent as it is.
    named = {str(case.request["pipeline"]) for case in sent if not case.refused}
    assert named == set(FIRST_PIPELINES)
    assert not any(case.pipeline in ENGINE_PIPELINES for case in sent)
    # Each later pipeline's replay is skipped, saying why (a batch may be, first, for its form).
    later = [
        case
        for case in shipped_replay_cases()
        if case.pipeline in ENGINE_PIPELINES and case.request["op"] == "replay"
    ]
    details = {result.case_id: result.detail for result in skipped}
    assert [details[case.case_id] for case in later] == [
        NOT_A_FIRST_PIPELINE.format(case.pipeline) for case in later
    ]
    assert NOT_A_FIRST_PIPELINE.format("vllm-bf16") == (
        "not offered: the adapter's describe lists no pipelines, so it is sent only the "
        "first ones of protocol 2 (float64, bf16-rows-fp32-state), not vllm-bf16"
    )


def test_an_adapter_of_protocol_2s_first_names_passes_the_whole_shipped_replay_corpus(
    tmp_path: Path,
) -> None:
    report = tmp_path / "report.json"
    finished = run_module(
        "ssm_rollback_spec.tools.cli", "vectors", "run", "--impl-cmd", ADAPTER,
        "--clause", "RB-REPLAY", "--json", str(report), timeout=600,
    )  # fmt: skip
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr
    document: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    outcomes = {case["id"]: case["outcome"] for case in document["cases"]}
    assert set(outcomes.values()) == {"passed", "skipped"}
    # Every case of the first pipelines that replay alone answers is sent, and passes:
    # the BF16 ones by the name the adapter knows.
    first = [
        case.case_id
        for case in shipped_replay_cases()
        if case.pipeline in {"float64", "transformers-bf16"} and case.request["op"] == "replay"
    ]
    assert {outcomes[case] for case in first} == {"passed"}
    assert sum("transformers-bf16" in case for case in first) == 17
