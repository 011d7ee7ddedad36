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

from dataclasses import dataclass
from typing import Final

from .dtypes import ConfigDtypes, Dtype, StateDtypes, UnsupportedDtypeError
from .facts import Source

__all__ = [
    "ENGINE",
    "MAMBA_DTYPES",
    "OVERLAP_TRACKING_SLOTS",
    "POOL_PADDING_SLOTS",
    "RADIX_BASE_RATIO",
    "RADIX_STATE_SLOTS",
    "SOURCES",
    "VERSION",
    "SglangSetup",
    "sglang_dtypes",
]

#: The release this view follows.
VERSION: Final = "0.5.23"
#: How outputs name it.
ENGINE: Final = f"SGLang {VERSION}"

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
}


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
