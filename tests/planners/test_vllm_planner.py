# SPDX-License-Identifier: MIT OR Apache-2.0
"""Every figure ``size`` prints for the vllm view, against vLLM 0.33.0's own planner.

Runs ``tests/planners/vllm_planner.py`` in the planners venv
(``tests/planners/install.sh``; ``$PLANNERS_PYTHON`` names another
interpreter), over the example configs, one that leaves its attention fields
to transformers' defaults and three other sizes of the same families, at TP
1, 2 and 8, 1 to 8 drafts, with prefix caching on and off and with an MTP or
an n-gram drafter. Then each example at 10 GiB of KV cache, as vLLM #49064
launched: vLLM's own CUDA-graph check refuses vLLM's default ``max_num_seqs``
where ``size`` says it does, refuses one above the largest value ``size``
says starts and passes that value; and ``--kv-cache-dtype fp8`` changes the
figures as vLLM's planner does. Last, vLLM's own length check
(``_get_and_verify_max_len``, vllm/config/model.py:2545-2684, through
``EngineArgs.create_engine_config``) raises for a ``--max-model-len`` above the
config's length exactly where ``size`` says vLLM refuses to start, with the
same figures, and ``size`` says vLLM starts wherever it takes the length.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any, Final

import pytest

from tests.child import ROOT
from tests.planners.run import run_planner, size_report

pytestmark = pytest.mark.planners

EXAMPLES: Final = ROOT / "examples"
QWEN3_NEXT: Final = EXAMPLES / "qwen3-next-80b-a3b-instruct.config.json"
QWEN3_5_27B: Final = EXAMPLES / "qwen3.5-27b.config.json"
QWEN3_5_35B_A3B: Final = EXAMPLES / "qwen3.5-35b-a3b.config.json"
PLANNER: Final = ROOT / "tests" / "planners" / "vllm_planner.py"
GIB: Final = 2**30


def _defaults_config(directory: Path) -> Path:
    # Qwen3.5-35B-A3B with no attention fields: both engines read transformers'
    # Qwen3_5MoeTextConfig defaults (2 KV heads of 256).
    config = json.loads(QWEN3_5_35B_A3B.read_text(encoding="utf-8"))
    for field in ("num_key_value_heads", "head_dim", "num_attention_heads"):
        del config["text_config"][field]
    path = directory / "qwen3.5-35b-a3b-no-attention-fields.config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def _family_configs(directory: Path) -> list[Path]:
    # Other sizes of the same families: a Qwen3-Next whose attention and GDN
    # counts are within 1.5x of each other (the group size is then the larger),
    # a Qwen3.5 dense with transformers' attention defaults (4 KV heads of 256)
    # and 64 value heads, and a Qwen3.5 MoE laid out by layer_types alone.
    next_config = json.loads(QWEN3_NEXT.read_text(encoding="utf-8"))
    next_config.update({"num_hidden_layers": 24, "full_attention_interval": 2})
    dense = json.loads(QWEN3_5_27B.read_text(encoding="utf-8"))
    for field in ("num_key_value_heads", "head_dim", "num_attention_heads"):
        del dense["text_config"][field]
    dense["text_config"].update({"num_hidden_layers": 32, "linear_num_value_heads": 64})
    moe = json.loads(QWEN3_5_35B_A3B.read_text(encoding="utf-8"))
    layers = ["full_attention" if (i + 1) % 5 == 0 else "linear_attention" for i in range(40)]
    moe["text_config"]["layer_types"] = layers
    del moe["text_config"]["full_attention_interval"]
    paths = []
    for name, config in (("next-24", next_config), ("dense-32", dense), ("moe-5", moe)):
        path = directory / f"{name}.config.json"
        path.write_text(json.dumps(config), encoding="utf-8")
        paths.append(path)
    return paths


def _cases(directory: Path) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    for config in (QWEN3_NEXT, QWEN3_5_27B, QWEN3_5_35B_A3B):
        for tp in (1, 2):
            cases += [{"config": str(config), "tp": tp, "drafts": s} for s in (1, 3, 7)]
        cases.append({"config": str(config), "tp": 1, "drafts": 3, "prefix_caching": False})
        cases.append({"config": str(config), "tp": 1, "drafts": 3, "method": "ngram"})
        cases.append({"config": str(config), "tp": 8, "drafts": 8})
    cases.append({"config": str(_defaults_config(directory)), "tp": 1, "drafts": 3})
    for config in _family_configs(directory):
        cases += [{"config": str(config), "tp": tp, "drafts": 2} for tp in (1, 2)]
    # The example configs leave max_position_embeddings at its class default, 32,768.
    lengths = (32_768, 4_096, 20_000)
    for index, case in enumerate(cases):
        case["kv_cache_memory_bytes"] = (40 + index) * GIB
        case["max_model_len"] = lengths[index % len(lengths)]
    return cases


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    directory = tmp_path_factory.mktemp("planners")
    return run_planner(PLANNER, _cases(directory), directory, timeout=3600)


def _size(case: dict[str, Any]) -> dict[str, Any]:
    arguments = [
        "size", "--config", case["config"], "--tp", str(case["tp"]),
        "--num-drafts", str(case["drafts"]), "--mtp-slots", "1", "--engine", "vllm",
        "--speculative-method", case.get("method", "mtp"),
        "--kv-cache-memory-bytes", str(case["kv_cache_memory_bytes"]),
        "--max-model-len", str(case["max_model_len"]),
        "--kv-cache-dtype", case.get("kv_cache_dtype", "auto"), "--json", "-",
    ]  # fmt: skip
    if not case.get("prefix_caching", True):
        arguments.append("--no-enable-prefix-caching")
    if "max_num_seqs" in case:
        arguments += ["--max-num-seqs", str(case["max_num_seqs"])]
    return size_report(arguments)


def _launches() -> list[dict[str, Any]]:
    # Each example at 10 GiB of KV cache: vLLM's default max_num_seqs, the
    # largest value size says starts and one more, and an fp8 KV cache.
    cases: list[dict[str, Any]] = []
    for config in (QWEN3_NEXT, QWEN3_5_27B, QWEN3_5_35B_A3B):
        base = {
            "config": str(config),
            "tp": 1,
            "drafts": 3,
            "kv_cache_memory_bytes": 10 * GIB,
            "max_model_len": 32_768,
        }
        largest = int(_size(base)["start"]["largest"].rpartition(": ")[2].replace(",", ""))
        cases += [
            base,
            {**base, "max_num_seqs": largest},
            {**base, "max_num_seqs": largest + 1},
            {**base, "kv_cache_dtype": "fp8"},
        ]
    return cases


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    directory = tmp_path_factory.mktemp("launches")
    return run_planner(PLANNER, _launches(), directory, timeout=3600)


def test_vllms_own_check_refuses_max_num_seqs_where_size_says(
    launched: list[dict[str, Any]],
) -> None:
    refused = []
    for case in launched:
        start = _size(case)["start"]
        # vLLM's default (1,024 on the H200 the planner stands in for) when not given.
        assert case["vllm_max_num_seqs"] == case.get("max_num_seqs", 1024), case
        assert start["starts"] is (case["refusal"] is None), case
        if case["refusal"] is not None:
            refused.append(case["vllm_max_num_seqs"])
            quoted = start["says"].split('"')[1]
            assert case["refusal"].startswith(f"{quoted}. "), case
    # Both ways for every example: one above the largest refuses, the largest starts.
    assert len(refused) >= 3


def test_the_largest_value_size_names_starts_in_vllm_and_one_more_does_not(
    launched: list[dict[str, Any]],
) -> None:
    pairs = [case for case in launched if "max_num_seqs" in case and "kv_cache_dtype" not in case]
    assert len(pairs) == 6
    for largest, above in zip(pairs[::2], pairs[1::2], strict=True):
        assert above["max_num_seqs"] == largest["max_num_seqs"] + 1
        assert (largest["refusal"], above["refusal"] is not None) == (None, True)


def test_an_fp8_kv_cache_changes_the_figures_as_vllms_planner_does(
    launched: list[dict[str, Any]],
) -> None:
    fp8 = [case for case in launched if case.get("kv_cache_dtype") == "fp8"]
    assert len(fp8) == 3
    for case in fp8:
        (auto,) = [
            other
            for other in launched
            if other["config"] == case["config"] and set(other) == set(case) - {"kv_cache_dtype"}
        ]
        assert case["block_size"] != auto["block_size"], case
        _assert_same_figures(case)


def test_every_case_was_planned(planned: list[dict[str, Any]], tmp_path: Path) -> None:
    names = [Path(case["config"]).name for case in _cases(tmp_path)]
    assert [Path(case["config"]).name for case in planned] == names
    assert len(planned) == 34


def test_size_prints_vllms_own_figures(planned: list[dict[str, Any]]) -> None:
    for case in planned:
        _assert_same_figures(case)


def _assert_same_figures(case: dict[str, Any]) -> None:
    report = _size(case)
    snapshot, fit = report["snapshot"], report["fit"]
    (vllm_fit, *_) = fit["designs"]
    groups = case["group_layers"]
    ours = {
        "page_bytes": snapshot["page_bytes"],
        "padded_page_bytes": snapshot["padded_page_bytes"],
        "block_size": snapshot["block_size"],
        "block_bytes": snapshot["block_bytes"],
        "null block": snapshot["base_padding_bytes"],
        "group_size": snapshot["group_size"],
        "gdn_groups": snapshot["gdn_groups"],
        "resident_blocks": snapshot["resident_blocks"],
        "admission_blocks": snapshot["admission_blocks"],
        "num_blocks": vllm_fit["num_blocks"],
        "tokens": vllm_fit["tokens"],
        "concurrency": vllm_fit["concurrency"],
        "recurrent_dtype": snapshot["recurrent_dtype"],
        "conv_dtype": snapshot["conv_dtype"],
    }
    theirs = {
        "page_bytes": case["page_bytes"],
        "padded_page_bytes": case["padded_page_bytes"],
        "block_size": case["block_size"],
        "block_bytes": case["block_bytes"],
        "null block": case["block_bytes"],
        "group_size": max(groups),
        "gdn_groups": len(groups) - 1,
        "resident_blocks": case["resident_blocks"],
        "admission_blocks": case["admission_blocks"],
        "num_blocks": case["num_blocks"],
        "tokens": case["tokens"],
        "concurrency": case["concurrency"],
        "recurrent_dtype": {"float32": "fp32", "bfloat16": "bf16"}[case["recurrent_dtype"]],
        "conv_dtype": {"float32": "fp32", "bfloat16": "bf16"}[case["conv_dtype"]],
    }
    assert ours == theirs, case


#: The length a Qwen3.5 or Qwen3-Next model card states (262,144 tokens).
_MODEL_LENGTH: Final = 262_144
#: vLLM's refusal, as its check words it and as ``size`` quotes it: the length
#: asked for, the config key, and the derived length (vLLM prints it as a float
#: once a RoPE factor has multiplied it).
_REFUSAL: Final = re.compile(
    r"User-specified max_model_len \((\d+)\) is greater than the derived max_model_len"
    r" \((\w+)=(\d+)(?:\.0)? "
)
#: What each config of :func:`_length_configs` adds to the text config, and the lengths asked for.
_LENGTH_CASES: Final[dict[str, tuple[dict[str, Any], dict[str, Any], tuple[int, ...]]]] = {
    # name: (text config fields, top config fields, --max-model-len values)
    "card": ({}, {}, (_MODEL_LENGTH, _MODEL_LENGTH + 1, 2**20)),
    "text-model-max-length": ({"model_max_length": 2 * _MODEL_LENGTH}, {}, (2**19, 2**19 + 1)),
    # vLLM reads model_max_length from the text config alone.
    "top-model-max-length": ({}, {"model_max_length": 2 * _MODEL_LENGTH}, (_MODEL_LENGTH + 1,)),
    "dynamic-rope": (
        {"rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10_000_000}},
        {},
        (2**19, 2**19 + 1),
    ),
    # A YaRN factor is already in max_position_embeddings, so not applied again.
    "yarn-rope": (
        {
            "rope_parameters": {
                "rope_type": "yarn",
                "factor": 4.0,
                "rope_theta": 10_000_000,
                "original_max_position_embeddings": 65_536,
            }
        },
        {},
        (_MODEL_LENGTH, _MODEL_LENGTH + 1),
    ),
}


def _length_cases(directory: Path) -> list[dict[str, Any]]:
    """Configs that state a length (the examples state none), each at lengths on both sides."""
    cases: list[dict[str, Any]] = []
    qwen3_5 = json.loads(QWEN3_5_27B.read_text(encoding="utf-8"))
    for name, (text_fields, top_fields, lengths) in _LENGTH_CASES.items():
        config = copy.deepcopy(qwen3_5)
        config["text_config"].update({"max_position_embeddings": _MODEL_LENGTH, **text_fields})
        config.update(top_fields)
        path = directory / f"{name}.config.json"
        path.write_text(json.dumps(config), encoding="utf-8")
        cases += [{"config": str(path), "max_model_len": n} for n in lengths]
    # Qwen3-Next's config is flat: its top config is its text config.
    flat = json.loads(QWEN3_NEXT.read_text(encoding="utf-8"))
    flat.update({"max_position_embeddings": _MODEL_LENGTH, "model_max_length": 2**19})
    path = directory / "flat-model-max-length.config.json"
    path.write_text(json.dumps(flat), encoding="utf-8")
    cases += [{"config": str(path), "max_model_len": n} for n in (_MODEL_LENGTH + 1, 2**19 + 1)]
    return [{**case, "only": "max_model_len"} for case in cases]


@pytest.fixture(scope="module")
def length_checks(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    directory = tmp_path_factory.mktemp("lengths")
    return run_planner(PLANNER, _length_cases(directory), directory, timeout=1800)


def _size_start(case: dict[str, Any], /) -> dict[str, Any]:
    # Memory enough for one request at any of these lengths: only the length can refuse.
    arguments = [
        "size", "--config", case["config"], "--engine", "vllm", "--num-drafts", "3",
        "--kv-cache-memory-bytes", "400G", "--max-model-len", str(case["max_model_len"]),
        "--json", "-",
    ]  # fmt: skip
    start: dict[str, Any] = size_report(arguments)["start"]
    return start


def test_size_says_vllm_refuses_a_length_exactly_where_vllms_own_check_raises(
    length_checks: list[dict[str, Any]],
) -> None:
    refused = 0
    for case in length_checks:
        start = _size_start(case)
        assert start["starts"] is (case["length_refusal"] is None), (case, start)
        if case["length_refusal"] is None:
            # vLLM took the length as given.
            assert case["vllm_max_model_len"] == case["max_model_len"], case
            continue
        refused += 1
        assert start["source"] == "vllm/config/model.py:2657-2683", start
        theirs = _REFUSAL.match(case["length_refusal"])
        ours = _REFUSAL.match(start["says"].split('"')[1])
        assert theirs is not None, case["length_refusal"]
        assert ours is not None, start["says"]
        assert ours.groups() == theirs.groups(), (case, start)
        assert start["largest"] == (
            f"largest --max-model-len that starts: {int(theirs.group(3)):,}"
            " (VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 lets more through)"
        )
    # Every config refuses a length; five of them also take one.
    configs = len({case["config"] for case in length_checks})
    assert (len(length_checks), configs, refused) == (12, 6, 7)
    # docs/sizing-engines.md states these counts.
    stated = " ".join((ROOT / "docs" / "sizing-engines.md").read_text(encoding="utf-8").split())
    assert f"on {len(length_checks)} lengths over {configs} configs that state one" in stated
    assert f"exactly the {refused} that vLLM's check raises for" in stated
    assert f"starts for the other {len(length_checks) - refused}." in stated
