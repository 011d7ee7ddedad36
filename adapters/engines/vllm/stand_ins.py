# SPDX-License-Identifier: MIT OR Apache-2.0
"""What stands in for vLLM's model objects where the batch runs its builder and layer core.

The layer object ``_forward_core`` reads (:class:`Layer`, under
:data:`LAYER_PREFIX` in the forward context) and the configuration the
metadata builder reads (:func:`vllm_config`); ``batch.py``'s docstring says
why each stands in.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from .batch_inputs import CacheMode

__all__ = ["LAYER_PREFIX", "Layer", "vllm_config"]

#: The layer's name in the forward context's metadata.
LAYER_PREFIX: Final = "model.layers.0.linear_attn"


class Layer(types.SimpleNamespace):
    """The GDN layer's attributes ``_forward_core`` reads (``batch.py``'s docstring)."""


def vllm_config(vllm: Any, mode: CacheMode, num_spec: int, slots: int, /) -> Any:
    """The ``VllmConfig`` fields the builder reads (``batch.py``'s docstring)."""
    # Eager, as --enforce-eager runs it: no CUDA graph is captured here.
    compilation = vllm.config.CompilationConfig(cudagraph_mode=vllm.config.CUDAGraphMode.NONE)
    speculative = types.SimpleNamespace(
        num_speculative_tokens=num_spec,
        parallel_drafting=False,
        use_eagle_block_drop=lambda: False,
    )
    return types.SimpleNamespace(
        compilation_config=compilation,
        speculative_config=speculative,
        cache_config=types.SimpleNamespace(
            mamba_cache_mode=mode.value, hash_block_size=None, cache_hit_alignment_tokens=None
        ),
        scheduler_config=types.SimpleNamespace(max_num_seqs=max(slots, 1)),
        parallel_config=types.SimpleNamespace(decode_context_parallel_size=1),
        additional_config={"gdn_prefill_backend": "triton"},
        use_v2_model_runner=False,
        num_hash_lookahead_tokens=0,
        # Read for the head sizes when the prefill backend is chosen; triton is asked for.
        model_config=types.SimpleNamespace(hf_text_config=types.SimpleNamespace()),
    )
