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

__all__ = ["Device", "load_fla", "load_sglang", "load_vllm", "prepare"]


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


def _load(name: str, path: Path, /) -> Any:
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
    """VLLM 0.33.0's ``causal_conv1d`` and ``fused_sigmoid_gating`` modules."""
    import triton  # noqa: PLC0415 - after prepare()
    import triton.language as tl  # noqa: PLC0415

    root = wheels.fetch(wheels.ENGINES["vllm"]) / "vllm"
    _package("vllm", root)
    _stub("vllm.triton_utils", triton=triton, tl=tl)
    _stub("vllm.platforms", current_platform=_NotACpu())
    utils = root / "v1/attention/backends/utils.py"
    _stub(
        "vllm.v1.attention.backends.utils",
        NULL_BLOCK_ID=_constant(utils, "NULL_BLOCK_ID"),
        PAD_SLOT_ID=_constant(utils, "PAD_SLOT_ID"),
    )
    conv = _load(
        "vllm.model_executor.layers.mamba.ops.causal_conv1d",
        root / "model_executor/layers/mamba/ops/causal_conv1d.py",
    )
    gating = _load(
        "vllm.third_party.flash_linear_attention.ops.fused_sigmoid_gating",
        root / "third_party/flash_linear_attention/ops/fused_sigmoid_gating.py",
    )
    return conv, gating


def load_sglang() -> tuple[Any, Any]:
    """SGLang 0.5.23's Triton ``causal_conv1d`` and GDN ReplaySSM modules."""
    import torch  # noqa: PLC0415

    root = wheels.fetch(wheels.ENGINES["sglang"]) / "sglang"
    _package("sglang", root)
    tf32 = _device() is Device.CUDA and torch.cuda.get_device_capability(0)[0] >= 8
    _stub("sglang.kernels.jit.utils", is_arch_support_pdl=lambda: False)
    _stub("sglang.kernels.ops.attention.fla.utils", is_tf32_supported=tf32)
    _stub("sglang.srt.utils", is_gfx95_supported=lambda: False)
    conv = _load(
        "sglang.kernels.ops.mamba.causal_conv1d_triton",
        root / "kernels/ops/mamba/causal_conv1d_triton.py",
    )
    replayssm = _load(
        "sglang.kernels.ops.attention.linear.gdn_replayssm_spec_decode",
        root / "kernels/ops/attention/linear/gdn_replayssm_spec_decode.py",
    )
    return conv, replayssm


def load_fla() -> tuple[Any, Any, Any]:
    """FLA 0.6.0's conv update, fused recurrent rule and chunk rule modules."""
    root = wheels.fetch(wheels.ENGINES["fla"]) / "fla"
    _package("fla", root)
    sys.modules["fla"].__version__ = wheels.ENGINES["fla"].version
    for name in ("ops", "ops/gated_delta_rule", "modules", "modules/causal_conv1d"):
        _package("fla." + name.replace("/", "."), root / name)
    conv = importlib.import_module("fla.modules.causal_conv1d.ops")
    recurrent = importlib.import_module("fla.ops.gated_delta_rule.fused_recurrent")
    chunk = importlib.import_module("fla.ops.gated_delta_rule.chunk")
    return conv, recurrent, chunk
