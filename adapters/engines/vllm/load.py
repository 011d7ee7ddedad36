# SPDX-License-Identifier: MIT OR Apache-2.0
"""vLLM's wheel and its loader: the files the adapter imports, and how it imports them.

Two ways in, both from the unpacked wheel (``wheels.py``), never its compiled
extensions:

- :func:`load`, for ``replay``: the two kernel modules alone, under a bare
  ``vllm`` package whose ``__init__`` is not run, with the fewest stand-ins
  that let them import: ``vllm.triton_utils`` (Triton itself),
  ``vllm.platforms.current_platform`` (``is_cpu()`` False, so the Triton
  kernels are used and not the torch CPU path; ``is_arch_support_pdl()``
  False), and ``NULL_BLOCK_ID``/``PAD_SLOT_ID``, read from the wheel's own
  ``vllm/v1/attention/backends/utils.py``.
- :func:`load_package`, for ``replay_batch``: the whole package's Python, as
  the planners tier imports it (``batch.py`` says what stands in).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types
from typing import Any, Final

from ssm_rollback_spec.releases import VLLM

from .. import kernels, wheels
from ..kernels import Device
from .runner_code import RUNNER_FILE

__all__ = ["WHEEL", "load", "load_package"]

#: vLLM's release and the files its adapter imports.
WHEEL: Final = wheels.EngineWheel.pinned(
    "vllm",
    VLLM,
    # The whole package's Python (its compiled extensions are never unpacked):
    # replay_batch imports vLLM's own metadata builder and GDN layer, which
    # import its configuration, as the planners tier does.
    (
        "vllm/",
        "vllm/model_executor/layers/mamba/ops/causal_conv1d.py",
        "vllm/third_party/flash_linear_attention/ops/fused_sigmoid_gating.py",
        "vllm/v1/attention/backends/utils.py",
        "vllm/v1/attention/backends/gdn_attn.py",
    ),
    # vLLM moved FLA's gating kernel under ``third_party/`` in 0.26.0; 0.25.1
    # keeps it in ``model_executor/layers/fla/ops/`` (read in both wheels).
    moved=(
        (
            "0.25.1",
            "vllm/third_party/flash_linear_attention/ops/fused_sigmoid_gating.py",
            "vllm/model_executor/layers/fla/ops/fused_sigmoid_gating.py",
        ),
    ),
)


class _NotACpu:
    """vLLM's ``current_platform`` as its Triton kernels need it."""

    @staticmethod
    def is_cpu() -> bool:
        return False

    @staticmethod
    def is_arch_support_pdl() -> bool:
        return False


def load() -> tuple[Any, Any]:
    """The selected vLLM release's ``causal_conv1d`` and ``fused_sigmoid_gating`` modules."""
    if _VLLM_PACKAGE:
        # replay_batch imported the whole package: its own kernel modules.
        return (
            importlib.import_module("vllm.model_executor.layers.mamba.ops.causal_conv1d"),
            importlib.import_module(
                "vllm.third_party.flash_linear_attention.ops.fused_sigmoid_gating"
            ),
        )
    import triton  # noqa: PLC0415 - after prepare()
    import triton.language as tl  # noqa: PLC0415

    root = wheels.fetch(wheels.selected(WHEEL)) / "vllm"
    kernels.package("vllm", root)
    kernels.stub("vllm.triton_utils", triton=triton, tl=tl)
    kernels.stub("vllm.platforms", current_platform=_NotACpu())
    utils = root / "v1/attention/backends/utils.py"
    kernels.stub(
        "vllm.v1.attention.backends.utils",
        NULL_BLOCK_ID=kernels.constant(utils, "NULL_BLOCK_ID"),
        PAD_SLOT_ID=kernels.constant(utils, "PAD_SLOT_ID"),
    )
    conv = kernels.load_file(
        "vllm.model_executor.layers.mamba.ops.causal_conv1d",
        root / "model_executor/layers/mamba/ops/causal_conv1d.py",
    )
    gating = kernels.load_file(
        "vllm.third_party.flash_linear_attention.ops.fused_sigmoid_gating",
        root / "third_party/flash_linear_attention/ops/fused_sigmoid_gating.py",
    )
    return conv, gating


#: The capability-query ops vLLM calls while importing its quantization layers.
_CAPABILITY_OPS: Final = (
    "cutlass_scaled_mm_supports_fp4",
    "cutlass_scaled_mm_supports_fp8",
    "cutlass_scaled_mm_supports_block_fp8",
    "cutlass_group_gemm_supported",
)
#: The torch library that holds them (it unregisters when collected).
_KEPT: Final[list[object]] = []


#: The vLLM package's names, once imported (:func:`load_package`).
_VLLM_PACKAGE: Final[list[types.SimpleNamespace]] = []


def _vllm_platform() -> Any:
    """VLLM's CUDA platform, its hardware probes answered: SM 8.0, no PDL, pinning on CUDA only."""
    import torch  # noqa: PLC0415

    cuda = importlib.import_module("vllm.platforms.cuda")
    interface = importlib.import_module("vllm.platforms.interface")

    class Cuda(cuda.NonNvmlCudaPlatform):  # type: ignore[misc,name-defined]
        # SM 8.0: no SM 9.0 kernel choices (FlashInfer's prefill, wgmma config pruning).
        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> Any:
            del device_id
            return interface.DeviceCapability(major=8, minor=0)

        @classmethod
        def is_arch_support_pdl(cls) -> bool:
            return False

        @classmethod
        def is_pin_memory_available(cls) -> bool:
            # Pinned host memory needs CUDA's allocator.
            return bool(torch.cuda.is_available())

    return Cuda()


def load_package() -> types.SimpleNamespace:
    """The selected vLLM release's package, from its unpacked wheel: the names replay_batch runs.

    Its compiled extensions (``vllm/*.so``, never unpacked) are empty modules,
    as the planners tier has them; its platform is vLLM's own CUDA platform,
    its hardware probes answered (:func:`_vllm_platform`). The venv holds
    vLLM's pure-Python dependencies (environment.py).
    """
    if _VLLM_PACKAGE:
        return _VLLM_PACKAGE[0]
    import torch  # noqa: PLC0415 - after prepare()

    root = wheels.fetch(wheels.selected(WHEEL))
    if kernels.device() is Device.CPU:
        # vLLM keeps Triton when no driver is active only where no GPU is visible
        # (triton_utils/importing.py); the interpreter is then Triton's only driver.
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    # A replay before this one imported two kernel modules under a bare package:
    # they give way to the whole package.
    for name in [name for name in sys.modules if name == "vllm" or name.startswith("vllm.")]:
        del sys.modules[name]
    sys.path.insert(0, str(root))
    for name in (root / wheels.COMPILED_LIST).read_text(encoding="utf-8").split():
        sys.modules.setdefault(name, types.ModuleType(name))
    # The capability queries vLLM's quantization layers ask while they import
    # (as the planners tier answers them), for SM 8.0.
    if not _KEPT:
        library = torch.library.Library("_C", "FRAGMENT")
        for op in _CAPABILITY_OPS:
            library.define(f"{op}(int cuda_device_capability) -> bool")
            library.impl(op, lambda capability: capability == 80, "CompositeExplicitAutograd")
        _KEPT.append(library)
    platforms: Any = importlib.import_module("vllm.platforms")
    platforms._current_platform = _vllm_platform()  # noqa: SLF001
    gdn = importlib.import_module("vllm.v1.attention.backends.gdn_attn")
    # Read once, when vllm.utils.torch_utils was first imported (before the platform was set).
    for name in ("vllm.utils.torch_utils", "vllm.v1.attention.backends.utils"):
        module: Any = importlib.import_module(name)
        module.PIN_MEMORY = platforms.current_platform.is_pin_memory_available()
    layer = importlib.import_module("vllm.model_executor.layers.mamba.gdn.qwen_gdn_linear_attn")
    context: Any = importlib.import_module("vllm.forward_context")
    interface: Any = importlib.import_module("vllm.v1.kv_cache_interface")
    runner_copies: Any = importlib.util.find_spec("vllm.v1.worker.mamba_utils")
    runner_copies = runner_copies and importlib.import_module("vllm.v1.worker.mamba_utils")
    if not hasattr(runner_copies, "MambaBuffers"):
        # Before 0.33.0 the runner's align copies are other functions (batch.py).
        runner_copies = None

    def set_context(value: object, /) -> None:
        context._forward_context = value  # noqa: SLF001

    names = types.SimpleNamespace(
        config=importlib.import_module("vllm.config"),
        MambaSpec=interface.MambaSpec,
        KVCacheConfig=interface.KVCacheConfig,
        KVCacheGroupSpec=interface.KVCacheGroupSpec,
        CpuGpuBuffer=importlib.import_module("vllm.v1.utils").CpuGpuBuffer,
        MambaStateCopyFuncCalculator=importlib.import_module(
            "vllm.model_executor.layers.mamba.mamba_utils"
        ).MambaStateCopyFuncCalculator,
        mamba_utils=runner_copies,
        CommonAttentionMetadata=importlib.import_module(
            "vllm.v1.attention.backend"
        ).CommonAttentionMetadata,
        GDNAttentionMetadataBuilder=gdn.GDNAttentionMetadataBuilder,
        GDNLayer=layer.QwenGatedDeltaNetAttention,
        ChunkGatedDeltaRule=layer.ChunkGatedDeltaRule,
        is_conv_state_dim_first=importlib.import_module(
            "vllm.model_executor.layers.mamba.mamba_utils"
        ).is_conv_state_dim_first,
        reorder_batch=importlib.import_module(
            "vllm.v1.attention.backends.utils"
        ).reorder_batch_to_split_decodes_and_prefills,
        set_context=set_context,
        # The V1 runner's file, whose classification of a step's rows runner_code.py compiles.
        runner_file=root / RUNNER_FILE,
    )
    _VLLM_PACKAGE.append(names)
    return names
