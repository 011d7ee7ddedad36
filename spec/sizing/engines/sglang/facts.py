# SPDX-License-Identifier: MIT OR Apache-2.0
"""The SGLang view: the GDN state SGLang 0.5.23 holds with one draft chain, radix cache on.

Every fact below is read from the released wheel (``sglang-0.5.23``), cited by
file and line in :data:`SOURCES`. The default setup is the engine's: the radix
cache on, so the ``auto`` mamba radix-cache strategy resolves to
``extra_buffer`` under the (default) overlap schedule for the Qwen3-Next and
Qwen3.5 architectures, and the mamba pool holds at least
:data:`RADIX_STATE_SLOTS` states per running request. ``--disable-radix-cache``
(:class:`SglangSetup`) holds one. Both pools (the states and the speculative
scratch) keep one padding slot more than they serve.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ....releases import SGLANG
from ...dtypes import ConfigDtypes, Dtype, StateDtypes, UnsupportedDtypeError
from ...facts import Source

if TYPE_CHECKING:
    from ...state import Model, Setup

__all__ = [
    "ENGINE",
    "ESTIMATED_REQUESTS_CEILING",
    "ESTIMATED_REQUESTS_FLOOR",
    "ESTIMATED_REQUESTS_PER_CONTEXT",
    "KV_BYTES",
    "MAMBA_DTYPES",
    "MAMBA_FULL_MEMORY_RATIO",
    "MULTIMODAL_ARCHITECTURES",
    "NAME",
    "OVERLAP_TRACKING_SLOTS",
    "POOL_PADDING_SLOTS",
    "RADIX_BASE_RATIO",
    "RADIX_STATE_SLOTS",
    "SOURCES",
    "SPECULATIVE_MAX_RUNNING_REQUESTS",
    "VERSION",
    "VLM_CACHE_BYTES",
    "SglangMemory",
    "SglangSetup",
    "SglangStartError",
    "SglangStartup",
    "SpeculativeState",
    "options",
    "sglang_dtypes",
    "sglang_startup",
    "view_dtypes",
]

#: The release this view follows.
VERSION: Final = SGLANG.version
#: How outputs name it.
ENGINE: Final = SGLANG.engine

#: States per running request the radix cache keeps before its extra buffer.
RADIX_BASE_RATIO: Final = 3
#: The ping-pong tracking slots ``extra_buffer`` adds under the overlap schedule.
OVERLAP_TRACKING_SLOTS: Final = 2
#: States per running request with the radix cache on, at the defaults.
RADIX_STATE_SLOTS: Final = RADIX_BASE_RATIO + OVERLAP_TRACKING_SLOTS
#: The slot each mamba pool allocates beyond its size.
POOL_PADDING_SLOTS: Final = 1
#: The dtypes ``--mamba-ssm-dtype`` (and ``SGLANG_MAMBA_CONV_DTYPE``) take.
MAMBA_DTYPES: Final = frozenset({Dtype.FP32, Dtype.BF16, Dtype.FP16})

#: The mamba pool's share of the rest of the budget, over the KV pool's (the fallback).
MAMBA_FULL_MEMORY_RATIO: Final = 0.9
#: ``--max-running-requests`` when speculative decoding leaves it unset.
SPECULATIVE_MAX_RUNNING_REQUESTS: Final = 48
#: Requests SGLang estimates per context length of tokens, and the estimate's bounds.
ESTIMATED_REQUESTS_PER_CONTEXT: Final = 512
ESTIMATED_REQUESTS_FLOOR: Final = 2048
ESTIMATED_REQUESTS_CEILING: Final = 4096
#: Bytes of one KV element: the model dtype, a float32 config's downcast to float16.
KV_BYTES: Final = 2
#: The multimodal cache (``SGLANG_VLM_CACHE_SIZE_MB``, 100) taken from a multimodal model's budget.
VLM_CACHE_BYTES: Final = 100 * 2**20
#: The architectures of this package's configs that SGLang counts as multimodal.
MULTIMODAL_ARCHITECTURES: Final = frozenset(
    {"Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"}
)
_GIB: Final = 1 << 30

#: Each fact of this view and where SGLang 0.5.23 says it.
SOURCES: Final = {
    "state shape": Source(
        "sglang/srt/configs/mamba_utils.py",
        "222-236",
        "Mamba2StateShape.create: conv state (conv_dim / tp, conv_kernel - 1); temporal "
        "state (num_heads / tp, head_dim, state_size)",
    ),
    "qwen3-next shape": Source(
        "sglang/srt/configs/qwen3_next.py",
        "298-312",
        "GDN maps to it: intermediate_size = value_dim, n_groups = key heads, "
        "state_size = key head dim",
    ),
    "state dtypes": Source(
        "sglang/srt/configs/mamba_utils.py",
        "62-106",
        "conv from SGLANG_MAMBA_CONV_DTYPE (bfloat16); h float32 unless the config's "
        "mamba_ssm_dtype (text_config first) or SGLANG_MAMBA_SSM_DTYPE says otherwise",
    ),
    "dtype choices": Source(
        "sglang/srt/arg_groups/fields/exec_.py",
        "490-495",
        "--mamba-ssm-dtype choices: float32, bfloat16, float16 (no fp8)",
    ),
    "conv dtype default": Source(
        "sglang/srt/environ.py",
        "1628-1629",
        "SGLANG_MAMBA_CONV_DTYPE = bfloat16, SGLANG_MAMBA_SSM_DTYPE unset",
    ),
    "base pool": Source(
        "sglang/srt/mem_cache/memory_pool.py",
        "720-753",
        "conv and temporal states for size + 1 slots",
    ),
    "speculative pool": Source(
        "sglang/srt/mem_cache/memory_pool.py",
        "864-891, 598-636",
        "speculative_num_draft_tokens intermediate h states over spec_state_size + 1 slots; "
        "one shared conv window of D + K - 2 columns per slot",
    ),
    "dedup conv window": Source(
        "sglang/srt/mem_cache/memory_pool.py",
        "900-938",
        "the deduplicated window on CUDA with one draft chain (topk <= 1); dense otherwise",
    ),
    "spec slots": Source(
        "sglang/srt/mem_cache/kv_cache_configurator.py",
        "760-761, 1720-1721",
        "mamba_spec_state_size = max_running_requests",
    ),
    "radix ratio": Source(
        "sglang/srt/mem_cache/kv_cache_configurator.py",
        "227, 3062-3088",
        "mamba states per running request: 1 with --disable-radix-cache, else 3 plus the "
        "extra buffer's tracking slots",
    ),
    "running requests cap": Source(
        "sglang/srt/mem_cache/kv_cache_configurator.py",
        "3135-3137",
        "max_running_requests <= max_mamba_cache_size // ratio",
    ),
    "tracking slots": Source(
        "sglang/srt/mem_cache/allocation_sizing.py",
        "11-19",
        "extra_buffer: 2 tracking slots with the overlap schedule (1 lazy or without it)",
    ),
    "extra buffer default": Source(
        "sglang/srt/arg_groups/overrides.py",
        "403-412, 449, 477-483",
        "strategy 'auto' resolves to extra_buffer under the overlap schedule for Qwen3-Next "
        "and Qwen3.5 with the triton linear-attention backend (the default)",
    ),
    "radix cache default": Source(
        "sglang/srt/arg_groups/fields/memory.py",
        "64-70",
        "disable_radix_cache defaults to False",
    ),
    "kv budget": Source(
        "sglang/srt/mem_cache/kv_cache_configurator.py",
        "2990-3060",
        "rest = free memory after loading - pre_model_load_memory x (1 - mem_fraction_static) - "
        "the multimodal reservation, in GiB as floats; then the mamba pool's share; bytes = "
        "int(rest x 2^30); weights that leave nothing refuse to start",
    ),
    "free memory": Source(
        "sglang/srt/utils/common.py",
        "427-576",
        "get_available_gpu_memory: free memory in GiB (torch.cuda.mem_get_info / 2^30)",
    ),
    "post-capture sizing off": Source(
        "sglang/srt/environ.py",
        "640",
        "SGLANG_ENABLE_POST_CAPTURE_KV_SIZING defaults to False, so no activation reserve "
        "replaces the slack (kv_cache_configurator.py:3021-3032)",
    ),
    "multimodal reservation": Source(
        "sglang/srt/mem_cache/kv_cache_configurator.py",
        "202-219",
        "a multimodal model reserves SGLANG_VLM_CACHE_SIZE_MB (100, environ.py:1598) with the "
        "default cpu feature transport; Qwen3.5's architectures are multimodal "
        "(sglang/srt/configs/model_config.py:2391, 2439-2440)",
    ),
    "mamba pool size": Source(
        "sglang/srt/mem_cache/kv_cache_configurator.py",
        "3229-3409",
        "_handle_max_mamba_cache: budget = rest x r / (1 + r); with drafts, max_mamba_cache_size "
        "= int((budget - per_req x (1 + D)) // (per_req x (1 + D / ratio))) and the intermediate "
        "states of min(max_running_requests, size // ratio) + 1 slots reserved; without, "
        "int((budget - ring - per_req) // per_req); --disable-radix-cache with "
        "max_running_requests set: that many; then (size + 1) states and the ring leave the rest",
    ),
    "replayssm ring reservation": Source(
        "sglang/srt/mem_cache/kv_cache_configurator.py",
        "3269-3292",
        "GDN ReplaySSM: the ring of max(1, max_running_requests) + 1 slots is a fixed charge and "
        "no intermediate states are reserved",
    ),
    "mamba bytes per request": Source(
        "sglang/srt/configs/mamba_utils.py",
        "115-125",
        "mamba_cache_per_req: (conv state x conv dtype + temporal state x ssm dtype) x layers",
    ),
    "mamba full memory ratio": Source(
        "sglang/srt/arg_groups/fields/schedule.py",
        "220-227",
        "--mamba-full-memory-ratio falls back to 0.9 (a float; kv_cache_configurator.py:3352-3356 "
        "splits the rest by it)",
    ),
    "tokens": Source(
        "sglang/srt/model_executor/pool_configurator.py",
        "225-236, 492-499, 637-647",
        "max_total_num_tokens = available bytes // (KV heads per GPU x (head_dim + v_head_dim) x "
        "full-attention layers x dtype bytes), floored to the page (1)",
    ),
    "draft kv": Source(
        "sglang/srt/model_executor/pool_configurator.py",
        "258-321",
        "an EAGLE-family (MTP) target adds int(cell x draft layers / layers) per token only when "
        "the config names num_nextn_predict_layers (spec_aux_hidden_state.py:171-178); the "
        "example configs do not, and the view does not model it",
    ),
    "kv heads per gpu": Source(
        "sglang/srt/configs/model_config.py",
        "1700-1711",
        "max(1, total_num_kv_heads // tp)",
    ),
    "kv dtype": Source(
        "sglang/srt/configs/model_config.py",
        "2288-2319",
        "dtype auto: the config's, a float32 config downcast to float16: two bytes",
    ),
    "max running requests": Source(
        "sglang/srt/mem_cache/kv_cache_configurator.py",
        "3119-3172",
        "min(max_running_requests, tokens // 2), or without it min(the estimate "
        "int(tokens / context_len x 512) within [2048, 4096], tokens // 2); then capped at "
        "max_mamba_cache_size // ratio; 0 refuses to start",
    ),
    "speculative max running requests": Source(
        "sglang/srt/arg_groups/speculative_hook.py",
        "1086-1093",
        "EAGLE-family speculation (MTP included) sets max_running_requests to 48 when unset",
    ),
    "mem fraction default": Source(
        "sglang/srt/arg_groups/memory_hook.py",
        "281-342",
        "the default --mem-fraction-static is a heuristic over the GPU, chunked prefill and "
        "CUDA-graph batch sizes: not modelled, so the view takes the value SGLang logs",
    ),
}


#: The view's registry name (``--engine``), which keys its entry of :attr:`.Setup.options`.
NAME: Final = "sglang"


def options(setup: Setup, /) -> SglangSetup:
    """How ``setup`` serves SGLang: its entry under :data:`NAME`, else the defaults."""
    found = setup.options.get(NAME)
    return found if isinstance(found, SglangSetup) else SglangSetup()


@dataclass(frozen=True)
class SglangSetup:
    """How SGLang is served: its defaults unless ``--disable-radix-cache``."""

    radix_cache: bool = True

    @property
    def state_slots_per_request(self) -> int:
        """The mamba states the pool holds, at least, per running request."""
        return RADIX_STATE_SLOTS if self.radix_cache else 1

    def describe(self) -> str:
        """The setup in a line, as an SGLang user would say it."""
        if self.radix_cache:
            return (
                "radix cache on (mamba radix-cache strategy extra_buffer, overlap schedule: "
                f"{RADIX_STATE_SLOTS} states per running request), one draft chain"
            )
        return "--disable-radix-cache (1 state per running request), one draft chain"


def _refuse(dtype: Dtype, /) -> Dtype:
    if dtype not in MAMBA_DTYPES:
        raise UnsupportedDtypeError(ENGINE, dtype, "fp32, bf16, fp16")
    return dtype


def sglang_dtypes(
    found: ConfigDtypes, /, *, recurrent: Dtype | None = None, conv: Dtype | None = None
) -> StateDtypes:
    """The state dtypes SGLang picks; ``recurrent`` is ``--mamba-ssm-dtype``, ``conv`` the env.

    Raises:
        UnsupportedDtypeError: a dtype SGLang does not offer for these states (fp8).
    """
    # A config dtype SGLang does not take (fp8) is warned about and replaced by
    # float32 (sglang/srt/configs/mamba_utils.py:85-92); a flag is refused.
    configured = found.ssm if found.ssm in MAMBA_DTYPES else None
    return StateDtypes(
        recurrent=_refuse(recurrent or configured or Dtype.FP32),
        conv=_refuse(conv or Dtype.BF16),
    )


def view_dtypes(model: Model, setup: Setup, /) -> StateDtypes:
    """The state dtypes of the sglang view for ``model``, unless ``setup`` forces them.

    Raises:
        UnsupportedDtypeError: a forced dtype SGLang does not offer.
    """
    return sglang_dtypes(model.dtypes, recurrent=setup.recurrent, conv=setup.conv)


class SpeculativeState(enum.Enum):
    """What holds the speculative GDN state, as SGLang's memory budget charges it."""

    #: SGLang's own: D intermediate states per running request, reserved from the mamba budget.
    INTERMEDIATE = "intermediate"
    #: A ring of fixed bytes per request slot, as SGLang charges its GDN ReplaySSM ring.
    RING = "ring"


@dataclass(frozen=True)
class SglangMemory:
    """The memory inputs of SGLang's startup sizing, per GPU."""

    #: Free GPU memory before the model loads (SGLang's ``pre_model_load_memory``).
    gpu_memory_bytes: int
    #: What loading the weights (target and drafter) took.
    weights_bytes: int
    #: ``--mem-fraction-static``.
    mem_fraction_static: float
    #: ``--context-length``.
    context_length: int
    #: ``--max-running-requests`` (None: unset).
    max_running_requests: int | None = None
    #: ``--mamba-full-memory-ratio``: the mamba pool's share of the rest over the KV pool's.
    mamba_full_memory_ratio: float = MAMBA_FULL_MEMORY_RATIO


class SglangStartError(ValueError):
    """SGLang refuses to start with this memory; the message says which check."""


@dataclass(frozen=True)
class SglangStartup:
    """What SGLang sizes at startup: its log line's figures and the pools behind them."""

    #: ``max_total_num_tokens``: the KV pool's tokens.
    max_total_num_tokens: int
    #: ``max_running_requests``.
    max_running_requests: int
    #: ``max_mamba_cache_size``: the mamba pool's states (one padding slot more is allocated).
    max_mamba_cache_size: int
    #: KV bytes per token over every full-attention layer.
    kv_bytes_per_token: int
    #: Bytes of one request's mamba state (every GDN layer).
    mamba_bytes_per_state: int
    #: The bytes left for the KV pool.
    kv_pool_bytes: int
    #: Speculative bytes charged besides the states: intermediate states or the ring.
    speculative_bytes: int


def _mamba_pool(  # noqa: PLR0913 - the inputs of SGLang's one function, each separate
    rest: float,
    /,
    *,
    per_state: int,
    drafts: int,
    ratio: int,
    requests: int | None,
    radix_cache: bool,
    state: SpeculativeState,
    ring_per_request: int,
    share: float,
) -> tuple[float, int, int]:
    # kv_cache_configurator.py:3229-3409, in its order of float operations so
    # that the integers match: the rest after the mamba pool, its size, and
    # the speculative bytes charged.
    ring = state is SpeculativeState.RING and drafts > 0
    fixed = ring_per_request * (max(1, requests or 0) + 1) if ring else 0
    reserves = drafts > 0 and not ring
    spent = 0
    if not radix_cache and requests is not None:
        size = max(1, requests)
        if reserves:
            spent = per_state * (size + 1) * (drafts + 1)
            rest = rest - spent / _GIB
    else:
        budget = rest * share / (1 + share) * _GIB
        if reserves:
            tokens = drafts + 1
            size = int(
                (budget - per_state * (1 + tokens) - 0) // (per_state * (1 + tokens / ratio) + 0)
            )
            capped = min(max(1, requests or 0), size // ratio)
            spent = per_state * (capped + 1) * tokens
            rest = rest - spent / _GIB
        else:
            size = int((budget - fixed - per_state) // per_state)
    if size <= 0:
        raise SglangStartError(
            "Not enough GPU memory for hybrid (mamba/linear-attention) state cache"
            f" (max_mamba_cache_size={size})"
        )
    return rest - ((size + 1) * per_state + fixed) / _GIB, size, spent + fixed


def sglang_startup(  # noqa: PLR0913 - each is a separate input of SGLang's sizing
    memory: SglangMemory,
    /,
    *,
    mamba_bytes_per_state: int,
    kv_bytes_per_token: int,
    drafts: int,
    radix_cache: bool,
    multimodal: bool,
    state: SpeculativeState = SpeculativeState.INTERMEDIATE,
    ring_bytes_per_request: int = 0,
) -> SglangStartup:
    """The figures SGLang 0.5.23 logs at startup for a hybrid GDN model (SOURCES).

    ``state`` says how the speculative state is charged: SGLang's own
    intermediate states, or (as its GDN ReplaySSM ring is charged) a fixed
    ``ring_bytes_per_request`` for each of ``max_running_requests + 1`` slots.

    Raises:
        SglangStartError: SGLang refuses to start (weights leave no KV memory,
            no mamba state or no token fits, or no request does).
    """
    requests = memory.max_running_requests
    if requests is None and drafts:
        requests = SPECULATIVE_MAX_RUNNING_REQUESTS
    pre = memory.gpu_memory_bytes / _GIB
    available = (memory.gpu_memory_bytes - memory.weights_bytes) / _GIB
    reserved = VLM_CACHE_BYTES / 2**20 / 1024 if multimodal else 0.0
    rest = available - pre * (1 - memory.mem_fraction_static) - reserved
    ratio = RADIX_STATE_SLOTS if radix_cache else 1
    rest, size, speculative = _mamba_pool(
        rest,
        per_state=mamba_bytes_per_state,
        drafts=drafts,
        ratio=ratio,
        requests=requests,
        radix_cache=radix_cache,
        state=state,
        ring_per_request=ring_bytes_per_request,
        share=memory.mamba_full_memory_ratio,
    )
    if rest <= 0:
        raise SglangStartError(
            "Loaded weights leave no GPU memory for the KV cache under"
            f" --mem-fraction-static={memory.mem_fraction_static}"
        )
    pool = int(rest * _GIB)
    tokens = pool // kv_bytes_per_token if kv_bytes_per_token else memory.context_length
    if tokens <= 0:
        raise SglangStartError("Not enough memory. Please try to increase --mem-fraction-static.")
    if requests is not None:
        running = min(max(1, requests), tokens // 2)
    else:
        estimated = int(tokens / memory.context_length * ESTIMATED_REQUESTS_PER_CONTEXT)
        estimated = max(min(estimated, ESTIMATED_REQUESTS_CEILING), ESTIMATED_REQUESTS_FLOOR)
        running = min(estimated, tokens // 2)
    running = min(running, size // ratio)
    if running <= 0:
        raise SglangStartError(
            "Hybrid (mamba/linear-attention) state cache is too small to serve any requests"
            f" (max_mamba_cache_size={size}, mamba_ratio={ratio})"
        )
    return SglangStartup(
        max_total_num_tokens=tokens,
        max_running_requests=running,
        max_mamba_cache_size=size,
        kv_bytes_per_token=kv_bytes_per_token,
        mamba_bytes_per_state=mamba_bytes_per_state,
        kv_pool_bytes=pool,
        speculative_bytes=speculative,
    )
