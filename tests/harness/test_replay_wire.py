# SPDX-License-Identifier: MIT OR Apache-2.0
"""The replay wire keeps its names: what the previous revision sent and read still works.

``fixtures/protocol_2_before_the_rename.json`` was written by revision
114b79d's own code, the last before ``bf16-rows-fp32-state`` became
``transformers-bf16`` under the same protocol version 2: requests its replay
corpus loader built, with their expected states, and its adapters'
``describe`` replies. The rest of the wire format is tested in
``tests/replay/test_replay_protocol.py``.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any, Final, TypedDict

import pytest

from ssm_rollback_spec.corpus.replay_run import (
    replay_offer,
    split_offered,
)
from ssm_rollback_spec.harness.protocol import ProtocolError
from ssm_rollback_spec.harness.replay_wire import (
    PIPELINE_ALIASES,
    ReplayLayout,
    current_pipeline,
    decode_replay,
    decode_replay_batch,
)
from tests.properties.replay_reference import SMALL_DIMS, SMALL_REPLAY
from tests.replay.shipped import shipped_replay_cases

_FIXTURE: Final = Path(__file__).parent / "fixtures" / "protocol_2_before_the_rename.json"

#: Every rename under protocol version 2, as this test expects it (docs/protocol.md).
_RENAMED: Final = {"bf16-rows-fp32-state": "transformers-bf16"}


class _Request(TypedDict):
    case: str
    request: dict[str, Any]
    expected: list[dict[str, object]]
    tolerance: float


class _Describe(TypedDict):
    adapter: str
    reply: dict[str, object]


class _Recorded(TypedDict):
    recorded: str
    revision: str
    protocol_version: int
    pipelines: list[str]
    requests: list[_Request]
    describe: list[_Describe]


@functools.cache
def _recorded() -> _Recorded:
    recorded: _Recorded = json.loads(_FIXTURE.read_text(encoding="utf-8"))
    return recorded


def _renamed(request: dict[str, Any], /) -> dict[str, Any]:
    return request | {"pipeline": _RENAMED.get(request["pipeline"], request["pipeline"])}


def _describe(adapter: str, /) -> dict[str, object]:
    [reply] = [d["reply"] for d in _recorded()["describe"] if d["adapter"] == adapter]
    return reply


def test_the_aliases_are_the_renames_made_under_protocol_version_2() -> None:
    assert PIPELINE_ALIASES == _RENAMED
    assert _recorded()["protocol_version"] == 2
    assert [current_pipeline(name) for name in _recorded()["pipelines"]] == [
        "float64",
        "transformers-bf16",
        "vllm-bf16",
        "sglang-bf16",
        "fla-bf16",
    ]


@pytest.mark.parametrize("name", _recorded()["pipelines"])
def test_every_pipeline_name_the_previous_revision_accepted_is_still_accepted(name: str) -> None:
    assert decode_replay(SMALL_REPLAY | {"pipeline": name})["pipeline"] == current_pipeline(name)


def test_a_batch_request_takes_an_old_pipeline_name_as_its_current_one() -> None:
    entry = {"sequence": "a", "slot": 0, "checkpoint": SMALL_REPLAY["checkpoint"]}
    request = {
        "op": "replay_batch",
        "pipeline": "bf16-rows-fp32-state",
        "dims": SMALL_DIMS,
        "conv_weight": SMALL_REPLAY["conv_weight"],
        "slots": 1,
        "steps": [{"batch": [entry | SMALL_REPLAY["rounds"][0]]}],
    }
    assert decode_replay_batch(request)["pipeline"] == "transformers-bf16"


@pytest.mark.parametrize("recorded", _recorded()["requests"], ids=lambda r: r["case"])
def test_a_request_of_the_previous_revision_decodes_as_its_current_spelling_does(
    recorded: _Request,
) -> None:
    assert decode_replay(recorded["request"]) == decode_replay(_renamed(recorded["request"]))


@pytest.mark.parametrize("recorded", _recorded()["requests"], ids=lambda r: r["case"])
def test_a_request_of_the_previous_revision_expects_what_the_corpus_expects_now(
    recorded: _Request,
) -> None:
    # So a reply that passes today's case passes the previous revision's.
    [now] = [
        case for case in shipped_replay_cases() if case.request == _renamed(recorded["request"])
    ]
    assert (now.expected, now.tolerance) == (recorded["expected"], recorded["tolerance"])


def test_a_describe_of_the_previous_revision_listing_an_old_name_is_sent_that_name() -> None:
    old = replay_offer(_describe("adapters/rust/src/main.rs"))
    assert old is not None
    assert old.pipelines == {"float64", "transformers-bf16"}
    assert old.old_names == {("transformers-bf16", "bf16-rows-fp32-state")}
    current = copy.deepcopy(_describe("adapters/rust/src/main.rs"))
    current["ok"]["replay"]["pipelines"] = ["float64", "transformers-bf16"]  # type: ignore[index]
    now = replay_offer(current)
    sent_old, skipped_old = split_offered(shipped_replay_cases(), old)
    sent_now, skipped_now = split_offered(shipped_replay_cases(), now)
    assert [case.case_id for case in sent_old] == [case.case_id for case in sent_now]
    assert skipped_old == skipped_now
    # A refusal may name a pipeline no protocol had (refusals.json): it is sent as it is.
    spelled = {str(case.request["pipeline"]) for case in sent_old if not case.refused}
    assert spelled == {"float64", "bf16-rows-fp32-state"}
    now_spelled = {str(case.request["pipeline"]) for case in sent_now if not case.refused}
    assert now_spelled == {"float64", "transformers-bf16"}


@pytest.mark.parametrize(
    "adapter",
    [d["adapter"] for d in _recorded()["describe"] if d["adapter"] != "adapters/rust/src/main.rs"],
)
def test_a_describe_of_the_previous_revision_with_no_old_name_offers_the_same(
    adapter: str,
) -> None:
    offer = replay_offer(_describe(adapter))
    assert offer is not None
    assert offer.old_names == frozenset()
    sent, _ = split_offered(shipped_replay_cases(), offer)
    assert sent
    assert all(case.request["pipeline"] in offer.pipelines for case in sent)


def test_a_describe_listing_both_spellings_is_sent_the_current_one() -> None:
    both = {"pipelines": ["bf16-rows-fp32-state", "transformers-bf16"], "layouts": ["pre-conv"]}
    offer = replay_offer({"ok": {"replay": both | {"designs": []}}})
    assert offer is not None
    assert offer.pipelines == {"transformers-bf16"}
    assert offer.old_names == frozenset()


@pytest.mark.parametrize(("pipeline", "shown"), [("bf16", '"bf16"'), (["float64"], '["float64"]')])
def test_a_pipeline_never_accepted_is_refused_naming_every_current_spelling(
    pipeline: object, shown: str
) -> None:
    with pytest.raises(ProtocolError) as raised:
        decode_replay(SMALL_REPLAY | {"pipeline": pipeline})
    assert str(raised.value) == (
        "field 'pipeline' must be one of ['float64', 'transformers-bf16', 'vllm-bf16', "
        f"'sglang-bf16', 'fla-bf16', 'ggml-f32'], got {shown}"
    )


_ROW: Final = {"qkv": ["0x1p-2", "0x1p-1", "0x1p+0"], "g": ["-0x1p-3"], "beta": ["0x1p-1"]}
_GATED_ROW: Final = _ROW | {"a": ["0x1p-2"], "b": ["0x1p+0"]}


def _replay(**changes: object) -> dict[str, Any]:
    request = {key: value for key, value in SMALL_REPLAY.items() if key != "rounds"}
    return request | {"rounds": [{"rows": [_ROW], "accepted": 1}]} | changes


def test_a_replay_request_keeps_every_field_and_the_raw_gate_inputs_of_each_row() -> None:
    request = _replay(
        rounds=[{"rows": [_GATED_ROW], "accepted": 1}], a_log=["0x1p+0"], dt_bias=["0x1p-1"]
    )
    assert decode_replay(request) == {
        "pipeline": "float64",
        "layout": ReplayLayout.PRE_CONV,
        "dims": SMALL_DIMS,
        "conv_weight": [[0.5, 1.0], [0.5, 1.0], [0.5, 1.0]],
        "checkpoint": {"conv": [[0.0], [0.0], [0.0]], "h": [[[0.0]]]},
        "rounds": [
            {
                "rows": [
                    {"values": [0.25, 0.5, 1.0], "g": [-0.125], "beta": [0.5], "a": [0.25],
                     "b": [1.0]}
                ],
                "accepted": 1,
            }
        ],
        "a_log": [1.0],
        "dt_bias": [0.5],
    }  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        pytest.param(
            {"layout": "mid-conv"},
            "field 'layout' must be one of ['pre-conv', 'post-conv'], got \"mid-conv\"",
            id="layout",
        ),
        pytest.param(
            {"checkpoint": 3}, "field 'checkpoint' must be an object, got 3", id="checkpoint"
        ),
        pytest.param(
            {"rounds": []}, "field 'rounds' must be a non-empty list, got []", id="rounds"
        ),
        # Either raw gate input asks every row for a and b.
        pytest.param({"a_log": ["0x1p+0"]}, "missing field 'a'", id="a_log-alone"),
        pytest.param({"dt_bias": ["0x1p+0"]}, "missing field 'a'", id="dt_bias-alone"),
    ],
)
def test_a_replay_request_of_another_shape_is_named_by_its_field(
    changes: dict[str, object], message: str
) -> None:
    with pytest.raises(ProtocolError) as raised:
        decode_replay(_replay(**changes))
    assert str(raised.value) == message
