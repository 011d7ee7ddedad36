# SPDX-License-Identifier: MIT OR Apache-2.0
"""dialects: each engine's departures from the OpenAI API, as data, with a plain fallback."""

from __future__ import annotations

import pytest

from ssm_rollback_spec.serving.dialects import (
    DIALECTS,
    OPENAI,
    ResponseShape,
    dialect_named,
    dialect_owning,
)


def test_the_judge_knows_vllm_llama_cpp_sglang_and_plain_openai() -> None:
    assert sorted(DIALECTS) == ["llama.cpp", "openai", "sglang", "vllm"]
    assert all(name == dialect.name for name, dialect in DIALECTS.items())


def test_vllm_returns_token_ids_and_counts_drafts_on_its_metrics() -> None:
    vllm = DIALECTS["vllm"]
    assert vllm.owned_by == frozenset({"vllm"})
    assert vllm.shape is ResponseShape.OPENAI
    assert vllm.path == "/v1/completions"
    assert (vllm.max_tokens_field, vllm.logprobs_field) == ("max_tokens", "logprobs")
    assert vllm.extra == {"return_tokens_as_token_ids": True, "ignore_eos": True}
    assert vllm.token_prefix == "token_id:"  # noqa: S105 - an id's prefix, no secret
    assert vllm.drafted_metric == "vllm:spec_decode_num_draft_tokens_total"
    assert vllm.accepted_metric == "vllm:spec_decode_num_accepted_tokens_total"
    assert (vllm.drafted_field, vllm.accepted_field) == ((), ())
    assert vllm.version_path == "/version"
    assert vllm.ids


def test_llama_server_speaks_its_own_completion_and_counts_drafts_in_each_reply() -> None:
    llama = DIALECTS["llama.cpp"]
    assert llama.owned_by == frozenset({"llamacpp"})
    assert llama.shape is ResponseShape.LLAMA_SERVER
    assert llama.path == "/completion"
    assert (llama.max_tokens_field, llama.logprobs_field) == ("n_predict", "n_probs")
    assert llama.extra == {"return_tokens": True, "ignore_eos": True, "cache_prompt": True}
    assert llama.token_prefix == ""
    assert (llama.drafted_metric, llama.accepted_metric) == ("", "")
    assert llama.drafted_field == ("timings", "draft_n")
    assert llama.accepted_field == ("timings", "draft_n_accepted")
    assert llama.version_path == ""
    assert llama.ids


def test_sglang_is_spoken_to_as_openai_with_eos_ignored_and_its_tokens_as_text() -> None:
    sglang = DIALECTS["sglang"]
    assert sglang.owned_by == frozenset({"sglang"})
    assert sglang.shape is ResponseShape.OPENAI
    assert sglang.path == "/v1/completions"
    assert sglang.extra["ignore_eos"] is True
    assert (sglang.drafted_metric, sglang.token_prefix) == ("", "")
    assert not sglang.ids


def test_the_plain_openai_dialect_adds_nothing_and_compares_tokens_as_text() -> None:
    assert DIALECTS["openai"] is OPENAI
    assert OPENAI.owned_by == frozenset()
    assert OPENAI.path == "/v1/completions"
    assert OPENAI.extra == {}
    assert (OPENAI.drafted_metric, OPENAI.accepted_metric, OPENAI.version_path) == ("", "", "")
    assert (OPENAI.drafted_field, OPENAI.accepted_field) == ((), ())
    assert not OPENAI.ids


@pytest.mark.parametrize(
    ("owned_by", "name"),
    [("vllm", "vllm"), ("llamacpp", "llama.cpp"), ("sglang", "sglang"), ("someone", "openai")],
)
def test_a_servers_owned_by_names_its_dialect_and_an_unknown_one_is_plain_openai(
    owned_by: str, name: str
) -> None:
    assert dialect_owning(owned_by).name == name


def test_a_dialect_is_found_by_its_name() -> None:
    assert dialect_named("llama.cpp") is DIALECTS["llama.cpp"]


def test_an_unknown_dialect_name_is_one_line_listing_the_known() -> None:
    with pytest.raises(ValueError, match=r"^--dialect ") as raised:
        dialect_named("trtllm")
    assert str(raised.value) == (
        "--dialect 'trtllm': not a dialect this judge knows (llama.cpp, openai, sglang, vllm)"
    )
