# SPDX-License-Identifier: MIT OR Apache-2.0
"""The engines' kernel modules, imported by file path from their unpacked wheels.

Only kernel modules are imported, never an engine's package ``__init__`` (which
would pull in the whole server). Each engine's kernel modules import a few
names from elsewhere in their package; those names are given by small stand-in
modules here, the fewest that let the kernel modules import:

- vLLM: ``vllm.triton_utils`` (Triton itself), ``vllm.platforms.current_platform``
  (``is_cpu()`` False, so the Triton kernels are used and not the torch CPU
  path; ``is_arch_support_pdl()`` False), and ``NULL_BLOCK_ID``/``PAD_SLOT_ID``,
  read from the wheel's own ``vllm/v1/attention/backends/utils.py``.
- SGLang: ``is_arch_support_pdl`` (False), ``is_tf32_supported`` (False on a
  CPU; on CUDA as SGLang computes it, compute capability 8 or more) and
  ``is_gfx95_supported`` (False).
- FLA: none. Its own ``fla.utils`` and ``fla.ops`` helpers import as they are;
  only the package ``__init__`` files of ``fla``, ``fla.ops``,
  ``fla.ops.gated_delta_rule``, ``fla.modules`` and ``fla.modules.causal_conv1d``
  are skipped (they import every layer and model).

``--device cpu`` (the default) runs under ``TRITON_INTERPRET=1`` with
:mod:`interpreter_patches` applied; ``--device cuda`` runs the same kernels
compiled, on the GPU, with no patch.
"""

from __future__ import annotations

import ast
import enum
import importlib
import importlib.util
import os
import sys
import types
from typing import TYPE_CHECKING, Any, Final

import wheels

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "Device",
    "load_file",
    "load_fla",
    "load_sglang",
    "load_vllm",
    "load_vllm_package",
    "prepare",
]


class Device(enum.Enum):
    """Where the kernels run."""

    #: Triton's interpreter on the CPU, patched (interpreter_patches.py).
    CPU = "cpu"
    #: Compiled by Triton, on the first CUDA device.
    CUDA = "cuda"


_PREPARED: Final[list[Device]] = []


def prepare(device: Device, /) -> None:
    """Select the device before Triton is imported: the interpreter and its patches, or CUDA."""
    if _PREPARED:
        return
    if device is Device.CPU:
        os.environ["TRITON_INTERPRET"] = "1"
        import interpreter_patches  # noqa: PLC0415 - only after TRITON_INTERPRET is set

        interpreter_patches.apply()
    else:
        os.environ.pop("TRITON_INTERPRET", None)
    _PREPARED.append(device)


def _device() -> Device:
    return _PREPARED[0] if _PREPARED else Device.CPU


def _stub(name: str, /, **names: object) -> types.ModuleType:
    module = sys.modules.get(name)
    if module is None:
        module = types.ModuleType(name)
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(_stub(parent), child, module)
    module.__dict__.update(names)
    return module


def _package(name: str, path: Path, /) -> None:
    # A package whose __init__ is not run: its submodules import from ``path``.
    _stub(name).__path__ = [str(path)]


def load_file(name: str, path: Path, /) -> Any:
    """A module of a wheel, imported whole by its file path, as ``name``.

    Raises:
        ImportError: the file cannot be imported.
    """
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _constant(path: Path, name: str, /) -> object:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == name for target in node.targets
        ):
            return ast.literal_eval(node.value)
    raise ImportError(f"{path} does not define {name}")


class _NotACpu:
    """vLLM's ``current_platform`` as its Triton kernels need it."""

    @staticmethod
    def is_cpu() -> bool:
        return False

    @staticmethod
    def is_arch_support_pdl() -> bool:
        return False


def load_vllm() -> tuple[Any, Any]:
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

    root = wheels.fetch(wheels.selected("vllm")) / "vllm"
    _package("vllm", root)
    _stub("vllm.triton_utils", triton=triton, tl=tl)
    _stub("vllm.platforms", current_platform=_NotACpu())
    utils = root / "v1/attention/backends/utils.py"
    _stub(
        "vllm.v1.attention.backends.utils",
        NULL_BLOCK_ID=_constant(utils, "NULL_BLOCK_ID"),
        PAD_SLOT_ID=_constant(utils, "PAD_SLOT_ID"),
    )
    conv = load_file(
        "vllm.model_executor.layers.mamba.ops.causal_conv1d",
        root / "model_executor/layers/mamba/ops/causal_conv1d.py",
    )
    gating = load_file(
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


#: The vLLM package's names, once imported (:func:`load_vllm_package`).
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


def load_vllm_package() -> types.SimpleNamespace:
    """The selected vLLM release's package, from its unpacked wheel: the names replay_batch runs.

    Its compiled extensions (``vllm/*.so``, never unpacked) are empty modules,
    as the planners tier has them; its platform is :class:`_VllmCuda`. The
    venv holds vLLM's pure-Python dependencies (environment.py).
    """
    if _VLLM_PACKAGE:
        return _VLLM_PACKAGE[0]
    import torch  # noqa: PLC0415 - after prepare()

    root = wheels.fetch(wheels.selected("vllm"))
    if _device() is Device.CPU:
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
    platforms = importlib.import_module("vllm.platforms")
    platforms._current_platform = _vllm_platform()  # noqa: SLF001
    gdn = importlib.import_module("vllm.v1.attention.backends.gdn_attn")
    # Read once, when vllm.utils.torch_utils was first imported (before the platform was set).
    for module in ("vllm.utils.torch_utils", "vllm.v1.attention.backends.utils"):
        importlib.import_module(
            module
        ).PIN_MEMORY = platforms.current_platform.is_pin_memory_available()
    layer = importlib.import_module("vllm.model_executor.layers.mamba.gdn.qwen_gdn_linear_attn")
    context = importlib.import_module("vllm.forward_context")

    def set_context(value: object, /) -> None:
        context._forward_context = value  # noqa: SLF001

    names = types.SimpleNamespace(
        config=importlib.import_module("vllm.config"),
        MambaSpec=importlib.import_module("vllm.v1.kv_cache_interface").MambaSpec,
        CommonAttentionMetadata=importlib.import_module(
            "vllm.v1.attention.backend"
        ).CommonAttentionMetadata,
        GDNAttentionMetadataBuilder=gdn.GDNAttentionMetadataBuilder,
        GDNLayer=layer.QwenGatedDeltaNetAttention,
        ChunkGatedDeltaRule=layer.ChunkGatedDeltaRule,
        is_conv_state_dim_first=importlib.import_module(
            "vllm.model_executor.layers.mamba.mamba_utils"
        ).is_conv_state_dim_first,
        set_context=set_context,
    )
    _VLLM_PACKAGE.append(names)
    return names


def load_sglang() -> tuple[Any, Any]:
    """The selected SGLang release's Triton ``causal_conv1d`` and GDN ReplaySSM modules."""
    import torch  # noqa: PLC0415

    root = wheels.fetch(wheels.selected("sglang")) / "sglang"
    _package("sglang", root)
    tf32 = _device() is Device.CUDA and torch.cuda.get_device_capability(0)[0] >= 8
    _stub("sglang.kernels.jit.utils", is_arch_support_pdl=lambda: False)
    _stub("sglang.kernels.ops.attention.fla.utils", is_tf32_supported=tf32)
    _stub("sglang.srt.utils", is_gfx95_supported=lambda: False)
    conv = load_file(
        "sglang.kernels.ops.mamba.causal_conv1d_triton",
        root / "kernels/ops/mamba/causal_conv1d_triton.py",
    )
    replayssm = load_file(
        "sglang.kernels.ops.attention.linear.gdn_replayssm_spec_decode",
        root / "kernels/ops/attention/linear/gdn_replayssm_spec_decode.py",
    )
    return conv, replayssm


def load_fla() -> tuple[Any, Any, Any]:
    """The selected FLA release's conv update, fused recurrent rule and chunk rule modules."""
    fla = wheels.selected("fla")
    root = wheels.fetch(fla) / "fla"
    _package("fla", root)
    sys.modules["fla"].__version__ = fla.version
    for name in ("ops", "ops/gated_delta_rule", "modules", "modules/causal_conv1d"):
        _package("fla." + name.replace("/", "."), root / name)
    conv = importlib.import_module("fla.modules.causal_conv1d.ops")
    recurrent = importlib.import_module("fla.ops.gated_delta_rule.fused_recurrent")
    chunk = importlib.import_module("fla.ops.gated_delta_rule.chunk")
    return conv, recurrent, chunk
