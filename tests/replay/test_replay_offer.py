# SPDX-License-Identifier: MIT OR Apache-2.0
"""What an adapter's describe says its replay computes: cases of anything else are not offered."""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import TYPE_CHECKING, Any, Final

import pytest

from ssm_rollback_spec import corpus
from ssm_rollback_spec.corpus.protocol_run import CaseResult
from ssm_rollback_spec.corpus.replay_offer import FIRST_OFFER, spoken
from ssm_rollback_spec.corpus.replay_run import BATCH_NOT_OFFERED, NOT_OFFERED
from ssm_rollback_spec.harness.versions import ProtocolVersion
from tests.child import ROOT, run_module

if TYPE_CHECKING:
    from pathlib import Path

REPLAY: Final = ROOT / "vectors" / "replay"
_FLOAT64_PRE_CONV: Final = {"pipelines": ["float64"], "layouts": ["pre-conv"], "designs": []}

# An adapter that is the Python reference in all but describe, which states ``offer``.
_WRAPPER: Final = """
import json, sys
from ssm_rollback_spec.harness import adapter
from ssm_rollback_spec.harness.python_impl import REFERENCE, load_python_implementation
api = load_python_implementation(REFERENCE).api
OFFER = json.loads(sys.argv[1])
for raw in sys.stdin:
    reply = adapter.respond(api, raw)
    if json.loads(raw).get("op") == "describe":
        reply = {"ok": {"name": "offer test", "usize_bits": 64, "replay": OFFER}}
    sys.stdout.write(json.dumps(reply) + "\\n")
    sys.stdout.flush()
"""


def _adapter(tmp_path: Path, offer: object, /) -> str:
    script = tmp_path / "offer_adapter.py"
    script.write_text(_WRAPPER, encoding="utf-8")
    return f"{sys.executable} {script} '{json.dumps(offer)}'"


def test_a_describe_without_replay_offers_protocol_2s_first_pipelines() -> None:
    # tests/replay/test_first_names.py runs such an adapter over the whole corpus.
    reply: dict[str, object] = {"ok": {"name": "x", "usize_bits": 64}}
    assert corpus.replay_offer(reply) == FIRST_OFFER
    case = corpus.load_replay_cases(REPLAY)[0]
    assert corpus.not_offered(case, None) is None


def test_a_describe_replay_is_read_as_three_sets() -> None:
    reply: dict[str, object] = {"ok": {"replay": _FLOAT64_PRE_CONV}}
    assert corpus.replay_offer(reply) == corpus.ReplayOffer(
        frozenset({"float64"}), frozenset({"pre-conv"}), frozenset()
    )


@pytest.mark.parametrize(
    ("replay", "message"),
    [
        (3, "describe's replay must be an object, got 3"),
        (
            {"pipelines": "float64", "layouts": [], "designs": []},
            'describe\'s replay.pipelines must be a list of strings, got {"pipelines":"float64"}',
        ),
        (
            {"pipelines": [], "designs": []},
            'describe\'s replay.layouts must be a list of strings, got {"layouts":null}',
        ),
        (
            {"pipelines": [], "layouts": [], "designs": [1]},
            'describe\'s replay.designs must be a list of strings, got {"designs":[1]}',
        ),
    ],
)
def test_a_malformed_describe_replay_is_named(replay: object, message: str) -> None:
    with pytest.raises(corpus.ReplayOfferError) as raised:
        corpus.replay_offer({"ok": {"replay": replay}})
    assert str(raised.value) == message


def test_a_case_is_not_offered_for_its_pipeline_layout_or_design() -> None:
    offer = corpus.ReplayOffer(frozenset({"float64"}), frozenset({"pre-conv"}), frozenset({"d"}))
    case = next(c for c in corpus.load_replay_cases(REPLAY) if c.pipeline == "float64")
    assert corpus.not_offered(dataclasses.replace(case, layout="pre-conv"), offer) is None
    assert corpus.not_offered(dataclasses.replace(case, pipeline="vllm-bf16"), offer) == (
        "not offered: the adapter's describe does not list pipeline vllm-bf16"
    )
    assert corpus.not_offered(dataclasses.replace(case, layout="post-conv"), offer) == (
        "not offered: the adapter's describe does not list layout post-conv"
    )
    designed = dataclasses.replace(case, layout="pre-conv", design="snapshot")
    assert corpus.not_offered(designed, offer) == (
        "not offered: the adapter's describe does not list design snapshot"
    )
    assert corpus.not_offered(dataclasses.replace(designed, design="d"), offer) is None


def _run(tmp_path: Path, command: str, *arguments: str) -> tuple[int, dict[str, Any], str]:
    report = tmp_path / "report.json"
    finished = run_module(
        "ssm_rollback_spec.tools.cli", *arguments, "--impl-cmd", command, "--json", str(report)
    )
    assert "Traceback" not in finished.stdout + finished.stderr
    document = json.loads(report.read_text(encoding="utf-8")) if report.exists() else {}
    return finished.returncode, document, finished.stderr


def test_vectors_run_sends_only_the_replay_cases_a_describe_offers(tmp_path: Path) -> None:
    command = _adapter(tmp_path, _FLOAT64_PRE_CONV)
    status, report, _ = _run(tmp_path, command, "vectors", "run", "--clause", "RB-REPLAY")
    offer = corpus.replay_offer({"ok": {"replay": _FLOAT64_PRE_CONV}})
    details = {case["id"]: case["detail"] for case in report["cases"]}
    expected = {
        # Offered, so sent: the reference answers unknown-op, as before.
        case.case_id: corpus.not_offered(case, offer)
        or (BATCH_NOT_OFFERED if case.request["op"] == "replay_batch" else NOT_OFFERED)
        for case in corpus.load_replay_cases(REPLAY)
    } | {
        # Its describe names no model: no round script is sent.
        case.case_id: corpus.MODEL_NOT_DESCRIBED
        for case in corpus.load_model_cases(REPLAY)
    }
    assert status == 0
    assert {case["outcome"] for case in report["cases"]} == {"skipped"}
    assert details == expected
    reasons = set(details.values())
    assert "not offered: the adapter's describe does not list pipeline transformers-bf16" in (
        reasons
    )
    assert "not offered: the adapter's describe does not list layout post-conv" in reasons


def test_vectors_run_names_a_malformed_describe_replay_in_one_line(tmp_path: Path) -> None:
    command = _adapter(tmp_path, {"pipelines": "float64"})
    status, _, stderr = _run(tmp_path, command, "vectors", "run", "--clause", "RB-REPLAY")
    assert status == 1
    assert stderr == (
        "ssm-rollback-spec: error: the adapter's describe: describe's replay.pipelines must be "
        'a list of strings, got {"pipelines":"float64"}\n'
    )


def test_check_skips_the_replay_properties_a_describe_does_not_offer(tmp_path: Path) -> None:
    command = _adapter(tmp_path, {"pipelines": [], "layouts": ["pre-conv"], "designs": []})
    status, report, _ = _run(tmp_path, command, "check", "--clause", "RB-REPLAY")
    details = {row["property"]: row["detail"] for row in report["properties"]}
    assert status == 0
    assert {row["outcome"] for row in report["properties"]} == {"skipped"}
    shipped = "test_replay.py::test_every_shipped_replay_case_is_rebuilt_within_its_bound"
    assert details.pop(shipped) == (
        "the implementation's describe offers none of the shipped replay cases"
    )
    batches = "test_replay.py::test_every_shipped_batch_gives_each_sequence_its_own_replay"
    assert details.pop(batches) == (
        "the implementation's describe offers none of the shipped batch cases"
    )
    alone = "test_replay.py::test_every_shipped_batch_gives_each_sequence_what_it_has_alone"
    assert details.pop(alone) == (
        "the implementation's describe offers none of the shipped batches run alone"
    )
    model = "test_model.py::test_a_rolled_back_sequence_decodes_as_the_kept_tokens_decoded_plainly"
    assert details.pop(model) == (
        "model is opt-in, and this implementation's describe names no model"
    )
    assert set(details.values()) == {
        "the implementation's describe offers no pipeline of the replay corpus for pre-conv rows"
    }


def _case(op: str, pipeline: str = "float64", /, **fields: Any) -> corpus.ReplayCase:
    """A case as ``not_offered`` reads it: its request's operation, steps and pipeline."""
    request: dict[str, object] = {"op": op, "pipeline": pipeline, "steps": fields.pop("steps", [])}
    return corpus.ReplayCase("a case", ["RB-REPLAY-1"], pipeline, request, [], 0.0, **fields)


def _of_version(version: str, /, **replay: list[str]) -> corpus.ReplayOffer:
    listed: dict[str, list[str]] = {"pipelines": [], "layouts": ["pre-conv"], "designs": []}
    return corpus.replay_offer({"ok": {"protocol": version, "replay": listed | replay}})


#: One step whose second sequence is a prompt chunk (no rows) that hits the
#: first's prefix (same checkpoint, prompt = the first's verified row):
#: both forms of batch entry beyond the first.
_BOTH_FORMS: Final = [
    {
        "batch": [
            {"sequence": "a", "checkpoint": "c", "prefill": [], "rows": ["r"]},
            {"sequence": "b", "checkpoint": "c", "prefill": ["r"]},
        ]
    }
]
_CHUNKS: Final = [{"batch": [{"sequence": "a", "checkpoint": "c", "prefill": ["p"]}]}]


def test_a_described_version_is_read_with_only_what_it_had() -> None:
    offer = _of_version(
        "2.1",
        pipelines=["float64", "vllm-bf16", "transformers-bf16", "a-pipeline-of-no-version"],
        batch=["prompt-chunks", "a-form-of-no-version"],
    )
    assert offer == corpus.ReplayOffer(
        frozenset({"float64", "transformers-bf16", "a-pipeline-of-no-version"}),
        frozenset({"pre-conv"}),
        frozenset(),
        frozenset({("transformers-bf16", "bf16-rows-fp32-state")}),
        frozenset({"a-form-of-no-version"}),
        protocol=ProtocolVersion(2, 1),
    )
    # A pipeline or a form is had from the version that added it on.
    assert _of_version("2.2", pipelines=["vllm-bf16"]).pipelines == {"vllm-bf16"}
    assert _of_version("2.9", batch=["prompt-chunks"]).batch == {"prompt-chunks"}


def test_the_old_name_is_kept_before_the_rename_and_not_from_it_on() -> None:
    assert _of_version("2.4", pipelines=["transformers-bf16"]).old_names == frozenset()
    assert _of_version("2.3", pipelines=["transformers-bf16", "float64"]).old_names == {
        ("transformers-bf16", "bf16-rows-fp32-state")
    }
    # Listed by its old name alone, it is sent that name whatever the version.
    for version in ("2.0", "2.4"):
        listed = _of_version(version, pipelines=["bf16-rows-fp32-state"])
        assert listed.old_names == {("transformers-bf16", "bf16-rows-fp32-state")}


def test_a_describe_with_nothing_or_no_replay_is_the_first_offer() -> None:
    assert corpus.replay_offer({}) == FIRST_OFFER
    assert corpus.replay_offer({"ok": "a text"}) == FIRST_OFFER
    versioned = corpus.replay_offer({"ok": {"protocol": "2.3"}})
    assert versioned.protocol == ProtocolVersion(2, 3)
    assert versioned.old_names == FIRST_OFFER.old_names


def test_a_malformed_version_is_named_as_the_describe_states_it() -> None:
    with pytest.raises(corpus.ReplayOfferError) as raised:
        corpus.replay_offer({"ok": {"protocol": "two"}})
    assert str(raised.value) == (
        'describe\'s protocol must be a text "2.N" naming a protocol version, got "two"'
    )


def test_a_describe_lists_its_batch_forms_or_is_named() -> None:
    listed = _FLOAT64_PRE_CONV | {"batch": ["prompt-chunks"]}
    assert corpus.replay_offer({"ok": {"replay": listed}}).batch == {"prompt-chunks"}
    for batch, shown in (("prompt-chunks", '"prompt-chunks"'), ([1], "[1]")):
        with pytest.raises(corpus.ReplayOfferError) as raised:
            corpus.replay_offer({"ok": {"replay": _FLOAT64_PRE_CONV | {"batch": batch}}})
        assert str(raised.value) == (
            f'describe\'s replay.batch must be a list of strings, got {{"batch":{shown}}}'
        )


@pytest.mark.parametrize(
    ("version", "case", "missing"),
    [
        ("2.0", _case("replay"), "replay (added in 2.1)"),
        ("2.1", _case("replay", "vllm-bf16"), "pipeline vllm-bf16 (added in 2.2)"),
        ("2.6", _case("replay_batch", steps=_CHUNKS), "replay_batch (added in 2.7)"),
        ("2.8", _case("replay_batch", steps=_CHUNKS), "batch form prompt-chunks (added in 2.9)"),
        (
            "2.10",
            _case("replay_batch", steps=_BOTH_FORMS),
            "batch form prefix-hits (added in 2.11)",
        ),
    ],
)
def test_a_case_its_described_version_did_not_have_is_not_offered(
    version: str, case: corpus.ReplayCase, missing: str
) -> None:
    every = ["prompt-chunks", "prefix-hits"]
    offer = _of_version(version, pipelines=["float64", "vllm-bf16"], batch=every)
    assert corpus.not_offered(case, offer) == (
        f"not offered: the adapter's describe names protocol {version}, which had no {missing}"
    )


def test_a_case_its_described_version_had_is_offered() -> None:
    every = ["prompt-chunks", "prefix-hits"]
    offer = _of_version("2.11", pipelines=["float64", "vllm-bf16"], batch=every)
    first = _of_version("2.1", pipelines=["float64"])
    assert corpus.not_offered(_case("replay"), first) is None
    assert (
        corpus.not_offered(
            _case("replay", "vllm-bf16"), _of_version("2.2", pipelines=["vllm-bf16"])
        )
        is None
    )
    assert (
        corpus.not_offered(_case("replay_batch"), _of_version("2.7", pipelines=["float64"])) is None
    )
    assert corpus.not_offered(_case("replay_batch", steps=_BOTH_FORMS), offer) is None
    # A refusal is sent to every version, whatever forms it uses, and a pipeline
    # no version had is a refusal's.
    refusal = _case("replay_batch", steps=_BOTH_FORMS, refused=True)
    assert corpus.not_offered(refusal, _of_version("2.7", pipelines=["float64"])) is None
    unknown = _case("replay", "a-pipeline-of-no-version", refused=True)
    assert corpus.not_offered(unknown, _of_version("2.1", pipelines=[unknown.pipeline])) is None


def test_a_batch_form_not_listed_is_named_first_in_order() -> None:
    both = _case("replay_batch", steps=_BOTH_FORMS)
    assert corpus.not_offered(both, None) == (
        "not offered: the adapter's describe does not list batch form prefix-hits"
    )
    chunks_only = dataclasses.replace(FIRST_OFFER, batch=frozenset({"prompt-chunks"}))
    assert corpus.not_offered(both, chunks_only) == (
        "not offered: the adapter's describe does not list batch form prefix-hits"
    )
    hits_only = dataclasses.replace(FIRST_OFFER, batch=frozenset({"prefix-hits"}))
    assert corpus.not_offered(both, hits_only) == (
        "not offered: the adapter's describe does not list batch form prompt-chunks"
    )
    # A replay request has no batch forms, whatever its steps hold.
    assert corpus.not_offered(_case("replay", steps=_BOTH_FORMS), None) is None


def test_split_offered_skips_a_case_with_its_clauses_and_reason() -> None:
    offered = _case("replay")
    old = _case("replay", "vllm-bf16")
    sent, skipped = corpus.split_offered([offered, old], _of_version("2.1", pipelines=["float64"]))
    assert sent == [offered]
    assert skipped == [
        CaseResult(
            "a case",
            ["RB-REPLAY-1"],
            "skipped",
            "not offered: the adapter's describe names protocol 2.1, which had no pipeline "
            "vllm-bf16 (added in 2.2)",
        )
    ]


def test_a_request_is_spoken_as_it_is_with_no_offer() -> None:
    request: dict[str, object] = {"op": "replay", "pipeline": "transformers-bf16"}
    assert spoken(request, None) is request
    old = spoken(request, FIRST_OFFER)
    assert old == {"op": "replay", "pipeline": "bf16-rows-fp32-state"}
