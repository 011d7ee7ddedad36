# SPDX-License-Identifier: MIT OR Apache-2.0
"""SGLang's definitions the batch runs, each compiled from the wheel's file, loaded once.

:func:`engine_code` gathers SGLang's pool, allocator, verify, commit and
extend code (``batch.py``'s docstring names each, with its file and line),
each read from the wheel by ``wheel_code.py`` with the names ``stand_ins.py``
gives, the fused scatters replaced by SGLang's own non-CUDA scatter.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from typing import Any

from .. import wheels
from ..kernels import load_file
from .load import WHEEL, load
from .stand_ins import ForwardMetadata, module_names
from .wheel_code import extract, sources

__all__ = ["EngineCode", "engine_code"]


@dataclass(frozen=True)
class EngineCode:
    """SGLang's definitions the batch runs, each from the wheel's file."""

    torch: Any
    conv: Any
    replayssm: Any
    recurrent: Any
    memory_pool: Any
    allocator: Any
    spec_utils: Any
    backend: Any
    gdn_backend: Any
    linear_utils: Any
    extend_backend: Any


@functools.cache
def engine_code() -> EngineCode:
    """SGLang's bookkeeping, verify and commit code, loaded once (after kernels.prepare)."""
    import torch  # noqa: PLC0415

    conv, replayssm = load()
    root = sources() / "sglang"
    srt = root / "srt"
    utils = sys.modules["sglang.srt.utils"]
    utils.__dict__.update(
        get_device_sm=lambda: 0,
        is_cuda=lambda: False,
        is_hip=lambda: False,
        is_sm90_supported=lambda: False,
    )
    recurrent = load_file(
        "sglang.kernels.ops.attention.linear.fused_sigmoid_gating_recurrent",
        root / "kernels/ops/attention/linear/fused_sigmoid_gating_recurrent.py",
    )
    names = module_names(torch)
    common = extract("sglang.srt.utils.common", srt / "utils/common.py", {"async_h2d": None}, names)
    linear_utils = extract(
        "sglang.srt.layers.attention.linear.utils",
        srt / "layers/attention/linear/utils.py",
        {
            "pp_spec_stable_rows_enabled": None,
            "select_verify_intermediate_state_indices": None,
            "build_verify_intermediate_state_indices": None,
        },
        names,
    )
    stable_rows = linear_utils.pp_spec_stable_rows_enabled
    allocator = extract(
        "sglang.srt.mem_cache.allocator.mamba",
        srt / "mem_cache/allocator/mamba.py",
        {"MambaSlotAllocator": None},
        names,
    )
    memory_pool = extract(
        "sglang.srt.mem_cache.memory_pool",
        srt / "mem_cache/memory_pool.py",
        {
            "conv_window_dedup_enabled": None,
            "get_tensor_size_bytes": None,
            "ReqToTokenPool": None,
            "MambaPool": None,
            "HybridReqToTokenPool": None,
        },
        names
        | {
            "MambaSlotAllocator": allocator.MambaSlotAllocator,
            "async_h2d": common.async_h2d,
            "_is_npu": False,
            # SGLang's own test of the device: a CPU keeps the dense conv windows.
            "_is_cpu": True,
            "_cpu_has_amx_support": False,
        },
    )
    backend = extract(
        "sglang.srt.layers.attention.hybrid_linear_attn_backend",
        srt / "layers/attention/hybrid_linear_attn_backend.py",
        {
            "HybridLinearAttnBackend": (
                "update_mamba_state_after_mtp_verify",
                "_scatter_speculative_state_with_mask",
                "_update_ple_state_after_mtp_verify",
            )
        },
        names | {"pp_spec_stable_rows_enabled": stable_rows},
    )
    # Emulated: the fused scatters refuse CPU tensors; SGLang's own torch scatter stands in.
    scatter = backend.HybridLinearAttnBackend._scatter_speculative_state_with_mask  # noqa: SLF001
    scatters = extract(
        "sglang.kernels.ops.mamba.mamba_state_scatter_triton",
        root / "kernels/ops/mamba/mamba_state_scatter_triton.py",
        {"scatter_mamba_states_after_mtp_verify": None},
        names
        | {
            "fused_mamba_state_scatter_with_mask": scatter,
            "fused_conv_window_scatter_with_mask": scatter,
            "_conv_multi_eligible": lambda pairs: False,  # noqa: ARG005 - the multi kernel is CUDA-only
        },
    )
    scatters.fused_conv_window_scatter_with_mask = scatter
    backend.scatter_mamba_states_after_mtp_verify = scatters.scatter_mamba_states_after_mtp_verify
    backend.fused_conv_window_scatter_with_mask = scatter
    spec_utils = extract(
        "sglang.srt.speculative.spec_utils",
        srt / "speculative/spec_utils.py",
        {
            "prepare_mamba_track_for_verify": None,
            "_verify_commit_step_indices": None,
            "commit_mamba_states_after_verify": None,
        },
        names | {"pp_spec_stable_rows_enabled": stable_rows},
    )
    dispatcher = _extend_engine(names, conv)
    gdn_backend = extract(
        "sglang.srt.layers.attention.linear.gdn_backend",
        srt / "layers/attention/linear/gdn_backend.py",
        {
            "GDNAttnBackend": (
                "_replayssm_target_verify",
                "forward_extend",
                "_convolve_prefill",
                "_prefill_gates",
            )
        },
        names | dispatcher.names,
    )
    backend_base = extract(
        "sglang.srt.layers.attention.hybrid_linear_attn_backend_base",
        srt / "layers/attention/hybrid_linear_attn_backend.py",
        {
            "MambaAttnBackendBase": (
                "_forward_metadata",
                "_translate_mamba_indices",
                "_has_cpu_prefill_track_metadata",
            )
        },
        names | {"ForwardMetadata": ForwardMetadata},
    )
    # GDNAttnBackend's own base, as SGLang declares it (gdn_backend.py ~505).
    extend_backend = type(
        "GDNAttnBackend",
        (gdn_backend.GDNAttnBackend, backend_base.MambaAttnBackendBase),
        {"kernel_dispatcher": dispatcher.dispatcher},
    )
    return EngineCode(
        torch=torch,
        conv=conv,
        replayssm=replayssm,
        recurrent=recurrent,
        memory_pool=memory_pool,
        allocator=allocator,
        spec_utils=spec_utils,
        backend=backend,
        gdn_backend=gdn_backend,
        linear_utils=linear_utils,
        extend_backend=extend_backend,
    )


@dataclass(frozen=True)
class _ExtendNames:
    """SGLang's extend kernels: its kernel dispatcher and the names ``forward_extend`` reads."""

    dispatcher: Any
    names: dict[str, object]


def _extend_engine(names: dict[str, object], conv: Any, /) -> _ExtendNames:
    """SGLang's extend: its FLA chunk rule, its Triton GDN kernel and dispatcher, its gates.

    The device tests answer as for a GPU without its CUDA-only kernels:
    ``is_cpu`` false picks the Triton kernels (on a CPU SGLang would call
    sgl-kernel's compiled ones, which the wheel does not hold), ``is_cuda``
    false keeps ``torch.split`` for the q, k, v split (the batch.py docstring).
    """
    # Not imported with the package: ``python -m adapters.engines.sglang.extend`` runs
    # extend.py as __main__, which runpy warns of where the package has imported it.
    from . import extend  # noqa: PLC0415

    chunk = extend.chunk_rule()
    root = wheels.fetch(wheels.selected(WHEEL)) / "sglang"
    gating = load_file(
        "sglang.kernels.ops.attention.linear.fused_gdn_gating",
        root / "kernels/ops/attention/linear/fused_gdn_gating.py",
    )
    devices = {
        name: (lambda: False) for name in ("is_cpu", "is_cuda", "is_hip", "is_npu", "is_xpu")
    }
    triton_kernel = extract(
        "sglang.srt.layers.attention.linear.kernels.gdn_triton",
        root / "srt/layers/attention/linear/kernels/gdn_triton.py",
        {"TritonGDNKernel": ("extend",)},
        names | devices | {"chunk_gated_delta_rule": chunk.chunk_gated_delta_rule},
    )
    dispatcher_module = extract(
        "sglang.srt.layers.attention.linear.gdn_dispatcher",
        sources() / "sglang/srt/layers/attention/linear/gdn_backend.py",
        {"GDNKernelDispatcher": ("extend",)},
        names,
    )
    # GDNKernelDispatcher.__init__ picks the kernels from the server's arguments:
    # the Triton kernel is its choice for GDN's extend on this path (gdn_backend.py ~299).
    dispatcher = object.__new__(dispatcher_module.GDNKernelDispatcher)
    dispatcher.extend_kernel = object.__new__(triton_kernel.TritonGDNKernel)
    dispatcher.extend_kernel.supports_track_state_snapshot = False
    return _ExtendNames(
        dispatcher,
        devices
        | {
            "_is_hip": False,
            "causal_conv1d_fn": conv.causal_conv1d_fn,
            "causal_conv1d_update": conv.causal_conv1d_update,
            "fused_gdn_gating": gating.fused_gdn_gating,
        },
    )
