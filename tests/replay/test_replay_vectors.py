# SPDX-License-Identifier: MIT OR Apache-2.0
"""The committed replay vectors: a fresh generation, pinned, valid, and rebuilt by replay."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Final

import jsonschema
import numpy as np
import pytest

from ssm_rollback_spec.corpus.model_cases import MODEL_FILE
from ssm_rollback_spec.corpus.replay_draws import SNAPSHOT
from ssm_rollback_spec.corpus.replay_format import (
    BATCH_ALONE_FILE,
    BATCH_FILE,
    POST_CONV_FILE,
    REBUILD_FILE,
    ROUNDS_FILE,
    ROW_BYTES_FILE,
    RebuildCase,
    RoundsCase,
    decode_case,
    rebuild_from_case,
)
from ssm_rollback_spec.corpus.replay_refusals import REFUSALS_FILE
from ssm_rollback_spec.replay.decoders import reference_decoder
from ssm_rollback_spec.replay.layer import Array, GdnLayer, LayerState, Pipeline, delta_rule_step
from ssm_rollback_spec.replay_rows import ReplayDesign
from tests import traceability

if TYPE_CHECKING:
    from tests.replay.conftest import Generated

REPLAY_VECTORS: Final = Path(__file__).resolve().parents[2] / "vectors" / "replay"
CASE_FILES: Final = (
    REBUILD_FILE,
    POST_CONV_FILE,
    ROW_BYTES_FILE,
    ROUNDS_FILE,
    BATCH_FILE,
    BATCH_ALONE_FILE,
    REFUSALS_FILE,
    MODEL_FILE,
)


def _json(name: str, /) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((REPLAY_VECTORS / name).read_text(encoding="ascii"))
    return loaded


def _cases(name: str, /) -> list[RebuildCase]:
    cases: list[RebuildCase] = _json(name)["cases"]  # type: ignore[assignment]
    return cases


def test_the_committed_files_are_a_fresh_generation_byte_for_byte(
    generated_vectors: Generated,
) -> None:
    # The generation is the command's, once a run (tests/replay/conftest.py):
    # it writes what generate_replay_vectors() returns, in a process of its own.
    fresh = generated_vectors.out / "replay"
    committed = sorted(path.name for path in REPLAY_VECTORS.iterdir())
    assert committed == sorted(path.name for path in fresh.iterdir()), (
        "run: ssm-rollback-spec vectors generate"
    )
    for name in committed:
        assert (REPLAY_VECTORS / name).read_bytes() == (fresh / name).read_bytes(), (
            f"vectors/replay/{name} is stale: run ssm-rollback-spec vectors generate"
        )


def test_the_manifest_pins_every_case_file_by_its_sha256() -> None:
    manifest = _json("manifest.json")
    files = manifest["files"]
    assert isinstance(files, list)
    assert [entry["path"] for entry in files] == list(CASE_FILES)
    for entry in files:
        data = (REPLAY_VECTORS / entry["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]
        assert len(_cases(entry["path"])) == entry["cases"]


@pytest.mark.parametrize("name", [*CASE_FILES, "manifest.json"])
def test_every_file_follows_the_schema(name: str) -> None:
    jsonschema.validate(_json(name), _json("schema.json"))


def test_a_float_that_is_not_hex_is_refused_by_the_schema() -> None:
    case_file = _json(REBUILD_FILE)
    cases = case_file["cases"]
    assert isinstance(cases, list)
    cases[0]["accepted"] = 1
    cases[0]["ring"][0]["g"] = ["0.5"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(case_file, _json("schema.json"))


@pytest.mark.parametrize("case", _cases(REBUILD_FILE), ids=lambda case: case["id"])
def test_every_rebuild_case_is_reached_by_replaying_its_ring(case: RebuildCase) -> None:
    rebuilt, expected = rebuild_from_case(case)
    assert rebuilt.equals(expected)
    assert 1 <= case["accepted"] <= len(case["ring"]) == case["dims"]["window"] - 1


def _array(values: object, dtype: type[np.floating], /) -> Array:
    def parse(item: object) -> object:
        return [parse(x) for x in item] if isinstance(item, list) else float.fromhex(str(item))

    return np.array(parse(values), dtype=dtype)


@pytest.mark.parametrize("case", _cases(POST_CONV_FILE), ids=lambda case: case["id"])
def test_every_post_conv_case_is_reached_from_its_rows_and_conv_window(case: RebuildCase) -> None:
    dtype, dims, accepted = Pipeline(case["pipeline"]).dtype, case["dims"], case["accepted"]
    layer = GdnLayer(
        num_key_heads=dims["num_key_heads"],
        key_head_dim=dims["key_head_dim"],
        num_value_heads=dims["num_value_heads"],
        value_head_dim=dims["value_head_dim"],
        conv_kernel=dims["conv_kernel"],
        conv_weight=_array(case["conv_weight"], dtype),
        a_log=np.zeros(dims["num_value_heads"]),
        dt_bias=np.zeros(dims["num_value_heads"]),
        norm_weight=np.ones(dims["value_head_dim"]),
    )
    h = _array(case["checkpoint"]["h"], dtype)
    for row in case["post_conv_ring"][:accepted]:
        k_and_v, g, beta = (_array(row[key], dtype) for key in ("k_and_v", "g", "beta"))
        h = delta_rule_step(layer, h, k_and_v, g, beta)
    columns = np.concatenate(
        [_array(case["checkpoint"]["conv"], dtype), _array(case["conv_window"], dtype)], axis=1
    )
    conv = columns[:, accepted : accepted + dims["conv_kernel"] - 1]
    expected = case["expected"]
    assert LayerState(conv=conv, h=h).equals(
        LayerState(conv=_array(expected["conv"], dtype), h=_array(expected["h"], dtype))
    )


def _rounds_cases() -> list[RoundsCase]:
    cases: list[RoundsCase] = _json(ROUNDS_FILE)["cases"]  # type: ignore[assignment]
    return cases


#: The designs a rounds case's ``expected`` states are, bit for bit: a case
#: without a ``design`` is plain decoding's, which every exact design keeps; a
#: vLLM decode is its snapshots', which every per-verify ring keeps.
_EXACT: Final = tuple(d for d in ReplayDesign if d is not ReplayDesign.SGLANG_GDN_REPLAYSSM)
_PER_VERIFY: Final = (
    ReplayDesign.SEED_ROW,
    ReplayDesign.MINIMAL_PRE_CONV,
    ReplayDesign.POST_CONV_WITH_CONV_WINDOW,
)


def _designs_of(case: RoundsCase, /) -> tuple[ReplayDesign, ...]:
    design = case.get("design")
    if design is None:
        return _EXACT
    if design == SNAPSHOT and case["pipeline"] == Pipeline.GGML_F32.value:
        # A post-conv row keeps k and v in BF16 (its byte formulas); ggml's
        # SiLU output is FP32, which such a row would round.
        return _PER_VERIFY[:2]
    if design == SNAPSHOT:
        return _PER_VERIFY
    return (ReplayDesign(design),)


@pytest.mark.clause("RB-REPLAY-6", "RB-REPLAY-7", "RB-REPLAY-8", "RB-REPLAY-11")
@pytest.mark.parametrize("design", list(ReplayDesign), ids=lambda design: design.value)
def test_every_design_reaches_every_round_of_every_rounds_case_it_decodes(
    design: ReplayDesign,
) -> None:
    decoded = [case for case in _rounds_cases() if design in _designs_of(case)]
    assert decoded
    for case in decoded:
        for number, (rebuilt, expected) in enumerate(decode_case(case, reference_decoder(design))):
            assert rebuilt.equals(expected), f"{case['id']} round {number}"


def rounds_cases() -> list[RoundsCase]:
    """The committed ``rounds.json`` cases (the self-test decodes them with wrong lifecycles)."""
    return _rounds_cases()


@pytest.mark.clause("RB-REPLAY-6")
def test_the_rounds_cases_vary_the_draft_count_fold_and_reuse_the_slot() -> None:
    for case in _rounds_cases():
        windows = [len(decoded["rows"]) for decoded in case["rounds"]]
        assert len(set(windows)) > 1
        assert max(windows) == case["k_ceiling"] < case["ring_length"]
        # ReplaySSM's ring fills: the accepted counts add up past L.
        assert sum(decoded["accepted"] for decoded in case["rounds"]) > case["ring_length"]
        # SGLang's decode reuses no slot: a fresh request row restarts its lifecycle.
        reused = any(decoded["reuse_slot_after"] for decoded in case["rounds"])
        assert reused is (case.get("design") != ReplayDesign.SGLANG_GDN_REPLAYSSM.value)
        assert any(decoded["accepted"] == len(decoded["rows"]) for decoded in case["rounds"])


@pytest.mark.clause("RB-REPLAY-9")
def test_the_row_byte_cases_include_qwen3_next() -> None:
    sizes = [case["expected"]["sizes"] for case in _cases(ROW_BYTES_FILE)]  # type: ignore[typeddict-item]
    assert {"seed_row_bytes": 24832, "minimal_replay_row_bytes": 16640}.items() <= sizes[-1].items()
    last = _cases(ROW_BYTES_FILE)[-1]["expected"]
    assert last["design_row_bytes"] == {  # type: ignore[typeddict-item]
        "seed-row": 24832,
        "minimal-pre-conv": 16640,
        "replayssm": 24704,
        "post-conv-with-conv-window": 28928,
        "sglang-gdn-replayssm": 24704,
    }
    assert last["design_record_bytes"] == {"fp32": 24704, "bf16-hi-lo": 24704, "bf16": 12416}  # type: ignore[typeddict-item]


def test_every_replay_clause_has_replay_vectors_and_only_replay_clauses_do() -> None:
    # RB-REPLAY-14 too: the model operation's round scripts (model_rounds.json).
    replay_clauses = [c for c in traceability.spec_clauses() if c.startswith("RB-REPLAY-")]
    found = traceability.replay_vector_clauses()
    assert replay_clauses
    # And RB-PROTO-4: the refusals (refusals.json) are the protocol's bad-request rules.
    assert sorted(found) == sorted([*replay_clauses, "RB-PROTO-4"])
