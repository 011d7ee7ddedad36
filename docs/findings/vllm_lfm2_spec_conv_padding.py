# SPDX-License-Identifier: MIT OR Apache-2.0
# ruff: noqa: INP001, PLC0415, T201 - a standalone script: it prints, and imports vLLM in main
"""Reproducer: vLLM 0.33.0 pads LFM2's conv page without speculation's columns.

Needs ``vllm==0.33.0`` and its Python dependencies (torch's CPU build will do:
no GPU is used, no weights are loaded). The CUDA platform is stood in for (an
SM 9.0 GPU, the CUDA extension modules empty), as tests/planners/vllm_planner.py
does. For ``num_speculative_tokens`` 1 to 10 (ngram) and an LFM2-1.2B config
(10 short-conv layers of 2,048 channels, ``conv_L_cache`` 3; 6 attention layers
of 8 KV heads of 64; bfloat16) it runs vLLM's own steps:

1. ``EngineArgs.create_engine_config``, as ``vllm serve`` makes it;
2. the platform's hybrid alignment (``_align_hybrid_block_size``,
   vllm/platforms/interface.py:940-1137) for the Triton attention backend
   (kernel blocks a multiple of 16, as FlashAttention's on SM 9.0): it sizes
   the Mamba page from ``Lfm2ForCausalLM.get_mamba_state_shape_from_config``
   (lfm2.py:556-577, no ``num_spec``) and sets ``mamba_page_size_padded``;
3. the page the layer asks for: ``ShortConv.get_state_shape``'s call
   (short_conv.py:351-357, ``num_spec`` columns added) in the ``MambaSpec``
   ``MambaBase.get_kv_cache_spec`` builds (abstract.py:72-91), and its
   ``page_size_bytes`` (v1/kv_cache_interface.py:1121-1129), which vLLM reads
   at startup when it unifies the page sizes.

Prints one line per count (vLLM's log goes to stderr). Exit 1 and "fails"
when some count fails the page assert (the bug, on 0.33.0: from 7 on); exit 0
when every count starts.

    python docs/findings/vllm_lfm2_spec_conv_padding.py
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

__all__ = ["main"]

#: LFM2-1.2B's config.json, the fields vLLM reads (typed from the model card's values).
CONFIG: dict[str, Any] = {
    "architectures": ["Lfm2ForCausalLM"],
    "model_type": "lfm2",
    "torch_dtype": "bfloat16",
    "vocab_size": 65536,
    "hidden_size": 2048,
    "num_hidden_layers": 16,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 128000,
    "norm_eps": 1e-05,
    "conv_bias": False,
    "conv_L_cache": 3,
    "conv_dim": 2048,
    "conv_dim_out": 2048,
    "block_dim": 2048,
    "block_ff_dim": 12288,
    "block_multiple_of": 256,
    "block_ffn_dim_multiplier": 1.0,
    "block_auto_adjust_ff_dim": True,
    "full_attn_idxs": [2, 5, 8, 10, 12, 14],
    "rope_theta": 1000000.0,
    "tie_embedding": True,
    "bos_token_id": 1,
    "eos_token_id": 7,
    "pad_token_id": 0,
}
#: The capability-query ops vLLM calls while importing its quantization layers.
_CAPABILITY_OPS = (
    "cutlass_scaled_mm_supports_fp4",
    "cutlass_scaled_mm_supports_fp8",
    "cutlass_scaled_mm_supports_block_fp8",
    "cutlass_group_gemm_supported",
)
_KEPT: list[object] = []


def _stand_in_an_sm90_gpu() -> None:
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    root = Path(str(importlib.util.find_spec("vllm").origin)).parent  # type: ignore[union-attr]
    for library in root.rglob("*.so"):
        name = library.relative_to(root.parent).as_posix().split(".")[0].replace("/", ".")
        sys.modules[name] = types.ModuleType(name)
    import torch

    library = torch.library.Library("_C", "FRAGMENT")
    for op in _CAPABILITY_OPS:
        library.define(f"{op}(int cuda_device_capability) -> bool")
        library.impl(op, lambda capability: capability == 90, "CompositeExplicitAutograd")
    _KEPT.append(library)

    from vllm import platforms
    from vllm.platforms.cuda import NonNvmlCudaPlatform
    from vllm.platforms.interface import DeviceCapability

    class _Sm90(NonNvmlCudaPlatform):  # type: ignore[misc]
        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> Any:  # noqa: ANN401
            del device_id
            return DeviceCapability(major=9, minor=0)

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            del device_id
            return "NVIDIA H200"

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            del device_id
            return 143_771_566_080

        @classmethod
        def current_device(cls) -> Any:  # noqa: ANN401
            return torch.device("meta")

    platforms._current_platform = _Sm90()  # noqa: SLF001


def _one(model: str, drafts: int) -> str:
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.layers.mamba.mamba_utils import MambaStateShapeCalculator
    from vllm.model_executor.models.lfm2 import Lfm2ForCausalLM
    from vllm.platforms import current_platform
    from vllm.usage.usage_lib import UsageContext
    from vllm.v1.attention.backends.registry import MambaAttentionBackendEnum
    from vllm.v1.attention.backends.triton_attn import TritonAttentionBackend
    from vllm.v1.kv_cache_interface import MambaSpec

    engine = EngineArgs(
        model=model,
        skip_tokenizer_init=True,
        max_model_len=4096,
        load_format="dummy",
        speculative_config={"method": "ngram", "num_speculative_tokens": drafts},
    ).create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
    current_platform._align_hybrid_block_size(engine, TritonAttentionBackend)  # noqa: SLF001
    cache = engine.cache_config
    text = engine.model_config.hf_text_config
    spec = MambaSpec(
        shapes=MambaStateShapeCalculator.short_conv_state_shape(
            tp_world_size=1,
            intermediate_size=text.conv_dim,
            conv_kernel=text.conv_L_cache,
            num_spec=engine.num_speculative_tokens,
        ),
        dtypes=Lfm2ForCausalLM.get_mamba_state_dtype_from_config(engine),
        block_size=cache.mamba_block_size,
        page_size_padded=cache.mamba_page_size_padded,
        mamba_type=MambaAttentionBackendEnum.SHORT_CONV,
        mamba_cache_mode=cache.mamba_cache_mode,
        num_speculative_blocks=engine.num_speculative_tokens,
    )
    figures = (
        f"block {cache.block_size}, padding {cache.mamba_page_size_padded}, "
        f"layer page {spec.real_page_size_bytes}"
    )
    try:
        spec.page_size_bytes  # noqa: B018 - the property asserts
    except AssertionError:
        return f"{drafts} drafts: fails, page_size_padded >= page_size ({figures})"
    return f"{drafts} drafts: starts ({figures})"


def main() -> int:
    """Print what 0.33.0 does at each count; 1 if any fails the page assert."""
    _stand_in_an_sm90_gpu()
    lines = []
    with tempfile.TemporaryDirectory() as model:
        (Path(model) / "config.json").write_text(json.dumps(CONFIG), encoding="utf-8")
        for drafts in range(1, 11):
            # vLLM logs to stdout; only the verdicts go there from here.
            with contextlib.redirect_stdout(sys.stderr):
                lines.append(_one(model, drafts))
            print(lines[-1], flush=True)
    return 1 if any(": fails" in line for line in lines) else 0


if __name__ == "__main__":
    sys.exit(main())
