# SPDX-License-Identifier: MIT OR Apache-2.0
"""Where vLLM 0.33.0 says each fact of its view (:mod:`.facts`): file, lines, what they say.

Read from the released wheel (``pip download --no-deps vllm==0.33.0``);
``size`` prints these beside its figures and docs/sizing-engines.md cites them.
"""

from __future__ import annotations

from typing import Final

from ...facts import Source

__all__ = ["SOURCES"]

#: Each fact of this view and where vLLM 0.33.0 says it.
SOURCES: Final = {
    "state shape": Source(
        "vllm/model_executor/layers/mamba/mamba_utils.py",
        "272-293",
        "gated_delta_net_state_shape: conv state (conv_kernel_size - 1 + num_spec) columns of "
        "divide(conv_dim, tp); temporal state (num_v_heads / tp, head_v_dim, head_k_dim)",
    ),
    "state dtypes": Source(
        "vllm/model_executor/layers/mamba/mamba_utils.py",
        "98-110, 122-130",
        "conv dtype from mamba_cache_dtype ('auto': the model dtype); h dtype from "
        "mamba_ssm_cache_dtype, falling back to the conv dtype on 'auto'",
    ),
    "mamba dtypes": Source(
        "vllm/config/cache.py",
        "175, 296-300",
        "MambaDType = auto, float32, float16, bfloat16 (no fp8); both default to auto",
    ),
    "qwen3.5 hook": Source(
        "vllm/model_executor/models/config.py",
        "953-977, 1259-1262",
        "Qwen3.5 architectures replace mamba_ssm_cache_dtype 'auto' by the config's "
        "mamba_ssm_dtype",
    ),
    "model dtype": Source(
        "vllm/transformers_utils/model_arch_config_convertor.py",
        "210-237",
        "the config's dtype (root, then text config), else float32",
    ),
    "float32 downcast": Source(
        "vllm/config/model.py",
        "2440-2442",
        "a float32 model dtype becomes the platform's first supported dtype",
    ),
    "supported dtypes": Source(
        "vllm/platforms/cuda.py",
        "257-260",
        "on SM80 and newer: bfloat16 first",
    ),
    "prefix caching default": Source(
        "vllm/config/model.py",
        "2276-2278",
        "generative hybrid models support prefix caching",
    ),
    "prefix caching on": Source(
        "vllm/engine/arg_utils.py",
        "3075-3076",
        "enable_prefix_caching unset takes the model's default",
    ),
    "align mode": Source(
        "vllm/model_executor/models/config.py",
        "763-765, 780-782",
        "prefix caching sets mamba_cache_mode 'align'; without it, 'none'",
    ),
    "blocks per request": Source(
        "vllm/v1/kv_cache_interface.py",
        "1135-1141",
        "align: 2 + num_speculative_blocks + num_prefill_checkpoint_blocks pages; "
        "otherwise 1 + num_speculative_blocks",
    ),
    "speculative blocks": Source(
        "vllm/model_executor/layers/mamba/abstract.py",
        "84-90",
        "num_speculative_blocks = num_speculative_tokens (0 under ReplaySSM)",
    ),
    "checkpoint block": Source(
        "vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py",
        "690-703, 739-750",
        "align mode with FlashInfer GDN prefill sets num_prefill_checkpoint_blocks=1",
    ),
    "flashinfer on sm90": Source(
        "vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py",
        "176-178, 249-250",
        "gdn_prefill_backend 'auto' picks FlashInfer on SM90 with no further constraint",
    ),
    "checkpoint alignment": Source(
        "vllm/v1/attention/backends/gdn_attn.py",
        "34",
        "FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64",
    ),
    "page padding": Source(
        "vllm/platforms/interface.py",
        "1066-1075, 1089-1107, 1118-1128",
        "the kernel alignment is max(the backend's smallest kernel block, block_size), lcm'd "
        "with the checkpoint alignment in align mode; the attention block grows to that "
        "alignment x cdiv(mamba page, alignment x attention page per token); the mamba page is "
        "padded to block_size x attention page per token",
    ),
    "attention page": Source(
        "vllm/v1/kv_cache_interface.py",
        "586-594",
        "per token: kv heads x (head_size + head_size_v) x dtype bytes",
    ),
    "kv heads per gpu": Source(
        "vllm/config/model.py",
        "1683",
        "max(1, total_num_kv_heads // tensor_parallel_size)",
    ),
    "block size": Source(
        "vllm/config/cache.py",
        "185",
        "DEFAULT_BLOCK_SIZE = 16",
    ),
    "flash attention first on sm90": Source(
        "vllm/platforms/cuda.py",
        "169-180",
        "non-MLA priority on SM90 (and SM80): FLASH_ATTN first",
    ),
    "flash attention blocks": Source(
        "vllm/v1/attention/backends/flash_attn.py",
        "357-367",
        "kernel block sizes MultipleOf(16) on CUDA (FA4 hd256 only on SM100/SM110)",
    ),
    "requested memory": Source(
        "vllm/v1/worker/utils.py",
        "716-726",
        "requested_memory = ceil(total GPU memory x gpu_memory_utilization)",
    ),
    "kv memory under utilization": Source(
        "vllm/v1/worker/gpu_worker.py",
        "683-757",
        "available KV memory = requested - non_kv_cache_memory (weights, non-torch memory and "
        "the profile run's transient peak, vllm/utils/mem_utils.py:311-321) - the CUDA-graph "
        "estimate (applied by default, VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1), all "
        "measured by a profiling run; --kv-cache-memory-bytes skips it (656-681)",
    ),
    "null block": Source(
        "vllm/v1/core/block_pool.py",
        "189-192",
        "the block pool keeps its first free block back as the null block",
    ),
    "one shared pool": Source(
        "vllm/v1/core/kv_cache_coordinator.py",
        "120",
        "one BlockPool serves every KV-cache group, so there is one null block in all",
    ),
    "group size": Source(
        "vllm/v1/core/kv_cache_planning.py",
        "484-486, 521-555",
        "layers of one spec form a type; the group size is the smallest type's layer count, or "
        "the largest's when that is under 1.5 times the smallest; each type splits into "
        "cdiv(layers, group size) groups of layers[i::groups]",
    ),
    "block bytes": Source(
        "vllm/v1/core/kv_cache_planning.py",
        "574-605, 678-681",
        "a block of the shared pool is the largest group's pages; num_blocks = available "
        "memory // that",
    ),
    "drafter layer": Source(
        "vllm/model_executor/models/qwen3_next_mtp.py",
        "63, 89-95",
        "the MTP drafter builds num_nextn_predict_layers (default 1) full-attention layers, "
        "which register a KV-cache spec like the target's",
    ),
    "qwen3.5 drafter layer": Source(
        "vllm/model_executor/models/qwen3_5_mtp.py",
        "82, 118-124",
        "Qwen3.5's MTP drafter builds mtp_num_hidden_layers (default 1) full-attention layers",
    ),
    "resident blocks": Source(
        "vllm/v1/kv_cache_interface.py",
        "1143-1152",
        "align mode: only 2 + num_speculative_blocks state blocks are resident at a time; the "
        "checkpoint block is counted at admission only",
    ),
    "attention blocks": Source(
        "vllm/v1/kv_cache_interface.py",
        "643-648",
        "a full-attention layer needs cdiv(max_model_len, block_size) blocks per request",
    ),
    "concurrency": Source(
        "vllm/v1/core/kv_cache_utils.py",
        "1061-1093, 1120-1128",
        "maximum concurrency = num_blocks / the sum over groups of each group's blocks per "
        "request at max_model_len; tokens = int(concurrency x max_model_len)",
    ),
    "startup line": Source(
        "vllm/v1/core/kv_cache_utils.py",
        "1136-1155",
        "logs 'GPU KV cache size: N tokens, Maximum concurrency for M tokens per request: X x'",
    ),
    "max_num_seqs default": Source(
        "vllm/engine/arg_utils.py",
        "2983-2996, 3001-3010, 3177-3181, 3232-3234",
        "max_num_seqs unset: 1024 on a GPU of 70 GiB or more that is not an A100 (256 on "
        "others, A100s included), then at most max_num_batched_tokens, which never lowers it",
    ),
    "full cuda graphs default": Source(
        "vllm/config/vllm.py",
        "311, 332",
        "the default optimization levels capture FULL_AND_PIECEWISE CUDA graphs; the GDN "
        "backend supports uniform batches (v1/attention/backends/gdn_attn.py:136), so the "
        "FULL decode graphs stay with speculative decoding",
    ),
    "max_num_seqs check": Source(
        "vllm/config/compilation.py",
        "1510-1533",
        "with FULL decode CUDA graphs and Mamba layers, max_num_seqs above the KV cache's "
        "num_blocks raises ValueError: each decode sequence needs one Mamba cache block",
    ),
    "kv cache dtype": Source(
        "vllm/utils/torch_utils.py",
        "40-60",
        "--kv-cache-dtype fp8, fp8_e4m3 and fp8_e5m2 store one byte per element (auto: the "
        "model dtype); the attention page per token follows it (v1/kv_cache_interface.py:586-594)",
    ),
    "human-readable integers": Source(
        "vllm/utils/argparse_utils.py",
        "30-74",
        "--kv-cache-memory-bytes and --max-model-len take k/m/g/t (decimal, decimals allowed) "
        "and K/M/G/T (binary, whole numbers only) suffixes (engine/arg_utils.py:397-409)",
    ),
    "max_model_len check": Source(
        "vllm/config/model.py",
        "2657-2683",
        "a --max-model-len above the derived length (and above the text config's "
        "model_max_length, which is that length when set: hf_config is hf_text_config, "
        "2160-2161) raises ValueError unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
    ),
    "derived max_model_len": Source(
        "vllm/transformers_utils/model_arch_config_convertor.py",
        "374-407",
        "the smallest of max_position_embeddings, n_positions, max_seq_len, seq_length, "
        "model_max_length and the other length keys of the text config, model_max_length "
        "taking over when set; times the RoPE factor unless the type is pre-scaled "
        "(config/model.py:2600-2634)",
    ),
    "memory check": Source(
        "vllm/v1/core/kv_cache_planning.py",
        "1533-1560",
        "the null block's bytes are held back before checking that one request at "
        "max_model_len fits",
    ),
}
