# SPDX-License-Identifier: MIT OR Apache-2.0
"""Every view's figures against a re-derivation written straight from the engines' code.

For the example configs, TP 1 and 2 and 1 to 8 drafts. Nothing here calls
``ssm_rollback_spec.sizing``'s arithmetic: the config is read with ``json`` and each
formula is the engine's, transcribed from the cited lines (vLLM 0.33.0,
SGLang 0.5.23), so a slip in the module shows up as a difference.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Final

import pytest

from ssm_rollback_spec.sizing.review import model_from_config
from ssm_rollback_spec.sizing.views import View, size_view, sweep

EXAMPLES: Final = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.json"))
BYTES: Final = {"float32": 4, "bfloat16": 2, "float16": 2}


def _text(config: dict[str, Any]) -> dict[str, Any]:
    nested = config.get("text_config", config)
    assert isinstance(nested, dict)
    text: dict[str, Any] = nested
    return text


def _gdn(t: dict[str, Any], tp: int, /) -> tuple[int, int, int, int, int, int]:
    """The GDN layers and, per GPU, their key and value heads, head sizes and conv kernel."""
    layers = t["num_hidden_layers"] - t["num_hidden_layers"] // t["full_attention_interval"]
    return (
        layers,
        t["linear_num_key_heads"] // tp,
        t["linear_num_value_heads"] // tp,
        t["linear_key_head_dim"],
        t["linear_value_head_dim"],
        t["linear_conv_kernel_dim"],
    )


def _vllm(config: dict[str, Any], tp: int, s: int) -> tuple[int, int, int]:
    """(base per request, speculative per request, null block): resident blocks of the pool."""
    t = _text(config)
    layers, nk, nv, dk, dv, kernel = _gdn(t, tp)
    # vllm/config/model.py:2440-2442: float32 (or none) is downcast to bfloat16.
    model = t.get("dtype", "float32")
    model = "bfloat16" if model == "float32" else model
    conv_b = BYTES[str(model)]
    # models/config.py:963-966: the Qwen3.5 hook.
    qwen35 = str(config["architectures"][0]).startswith("Qwen3_5")
    ssm_b = BYTES[str(t["mamba_ssm_dtype"])] if qwen35 and "mamba_ssm_dtype" in t else conv_b

    def page(spec: int) -> int:
        # The state shape of mamba_utils.py, lines 282 to 292.
        raw = nv * dv * dk * ssm_b + (kernel - 1 + spec) * (2 * nk * dk + nv * dv) * conv_b
        # platforms/interface.py:1068-1128, align mode with the FlashInfer checkpoint (64).
        per_token: int = max(1, t["num_key_value_heads"] // tp) * 2 * t["head_dim"] * conv_b
        align = math.lcm(max(16, 16), 64)
        block = align * math.ceil(raw / (align * per_token))
        padded: int = max(16, block) * per_token
        return padded

    attention = t["num_hidden_layers"] // t["full_attention_interval"]

    def grouped(spec: int) -> tuple[int, int]:
        # v1/core/kv_cache_planning.py:521-555: the group size is the smaller
        # type's layer count (the larger's within 1.5x); models/qwen3_next_mtp.py
        # :89-95: drafting with MTP adds the drafter's one attention layer.
        counts = (layers, attention + (1 if spec else 0))
        size = max(counts) if max(counts) < 1.5 * min(counts) else min(counts)
        width = max(math.ceil(n / math.ceil(n / size)) for n in counts)
        # kv_cache_planning.py:574-605: a block is the widest group's pages.
        return math.ceil(layers / size), width * page(spec)

    # kv_cache_interface.py:1143-1152: 2 + num_spec blocks resident per group.
    groups, block = grouped(0)
    base = groups * 2 * block
    groups, block = grouped(s)
    return base, groups * (2 + s) * block - base, block


def _sglang(config: dict[str, Any], tp: int, s: int, *, replay: bool) -> tuple[int, int]:
    """(base per request, speculative per request), all GDN layers."""
    t = _text(config)
    layers, nk, nv, dk, dv, kernel = _gdn(t, tp)
    # configs/mamba_utils.py:62-106: conv bfloat16, h mamba_ssm_dtype or float32.
    h = nv * dv * dk * BYTES[str(t.get("mamba_ssm_dtype", "float32"))]
    c = (2 * nk * dk + nv * dv) * 2
    d = s + 1
    # kv_cache_configurator.py:227, 3062-3088: 3 + 2 states with the radix cache.
    base = 5 * (h + (kernel - 1) * c)
    if not replay:
        # memory_pool.py:610, 883-891.
        return layers * base, layers * (d * h + (d + kernel - 2) * c)
    # configs/mamba_utils.py:145-152, bf16: d, k, their low parts, fp32 g; L = 16.
    record = 2 * (nv * dv * 2 + nk * dk * 2) + nv * 4
    return layers * base, layers * ((d + kernel - 2) * c + 16 * record)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
@pytest.mark.parametrize("tp", [1, 2])
def test_every_view_equals_the_engines_formulas(path: Path, tp: int) -> None:
    config = json.loads(path.read_text(encoding="utf-8"))
    model = model_from_config(config, tp)
    t = _text(config)
    layers = t["num_hidden_layers"] - t["num_hidden_layers"] // t["full_attention_interval"]
    nk, nv = t["linear_num_key_heads"] // tp, t["linear_num_value_heads"] // tp
    dk, dv = t["linear_key_head_dim"], t["linear_value_head_dim"]
    for s in range(1, 9):
        base, speculative, null = _vllm(config, tp, s)
        sized = size_view(View.VLLM, model, num_drafts=s, requests=3)
        assert (sized.base_bytes_per_request, sized.speculative_bytes_per_request) == (
            base,
            speculative,
        )
        assert sized.base_padding_bytes == null
        for view, replay in ((View.SGLANG, False), (View.SGLANG_REPLAYSSM, True)):
            base, speculative = _sglang(config, tp, s, replay=replay)
            sized = size_view(view, model, num_drafts=s, requests=3)
            assert (sized.base_bytes_per_request, sized.speculative_bytes_per_request) == (
                base,
                speculative,
            )
            # One padding slot in each pool (memory_pool.py:724, 750, 886).
            assert sized.speculative_bytes == 4 * speculative
            assert sized.base_bytes == 3 * base + base // 5
        # The rings: the seed's row (rollback.rs:64-66), the minimal row
        # (RB-REPLAY-5) and the ReplaySSM ring over requests + 1 slots.
        (row,) = sweep(model, num_drafts=[s], slots=4, requests=3, views=[View.MODULE])
        seed = s * layers * ((2 * nk * dk + 2 * nv * dv) * 2 + nv * 8)
        minimal = s * layers * ((2 * nk * dk + nv * dv) * 2 + nv * 8)
        replayssm = 16 * layers * (2 * (nv * dv * 2 + nk * dk * 2) + nv * 4)
        assert row.seed_ring == (seed, 4 * seed)
        assert row.minimal_ring == (minimal, 4 * minimal)
        assert row.replayssm_ring == (replayssm, 4 * replayssm)


def test_the_replayssm_record_is_24704_bytes_for_qwen3_next_at_tp_1() -> None:
    path = next(p for p in EXAMPLES if p.name.startswith("qwen3-next"))
    model = model_from_config(json.loads(path.read_text(encoding="utf-8")), 1)
    sized = size_view(View.SGLANG_REPLAYSSM, model, num_drafts=3, requests=1)
    assert sized.replayssm_record_bytes == 24_704
