# SPDX-License-Identifier: MIT OR Apache-2.0
"""SGLang's wheel and its loader: the kernel files the adapter imports, and their stand-ins.

The two kernel modules import, from elsewhere in SGLang, only
``is_arch_support_pdl`` (False), ``is_tf32_supported`` (False on a CPU; on
CUDA as SGLang computes it, compute capability 8 or more) and
``is_gfx95_supported`` (False): :func:`load` gives those as stand-ins. The
batch (``batch.py``) reads more of the wheel, beside these (``wheel_code.py``).
"""

from __future__ import annotations

from typing import Any, Final

from ssm_rollback_spec.releases import SGLANG

from .. import kernels, wheels
from ..kernels import Device

__all__ = ["WHEEL", "load"]

#: SGLang's release and the kernel files its adapter imports.
WHEEL: Final = wheels.EngineWheel.pinned(
    "sglang",
    SGLANG,
    (
        "sglang/kernels/ops/mamba/causal_conv1d_triton.py",
        "sglang/kernels/ops/attention/linear/gdn_replayssm_spec_decode.py",
        # The extend's (engine_code.py, extend.py): its gates, its Triton kernel,
        # SGLang's FLA chunk rule.
        "sglang/kernels/ops/attention/linear/fused_gdn_gating.py",
        "sglang/srt/layers/attention/linear/kernels/gdn_triton.py",
        "sglang/kernels/ops/attention/fla/",
    ),
)


def load() -> tuple[Any, Any]:
    """The selected SGLang release's Triton ``causal_conv1d`` and GDN ReplaySSM modules."""
    import torch  # noqa: PLC0415

    root = wheels.fetch(wheels.selected(WHEEL)) / "sglang"
    kernels.package("sglang", root)
    tf32 = kernels.device() is Device.CUDA and torch.cuda.get_device_capability(0)[0] >= 8
    kernels.stub("sglang.kernels.jit.utils", is_arch_support_pdl=lambda: False)
    kernels.stub("sglang.kernels.ops.attention.fla.utils", is_tf32_supported=tf32)
    kernels.stub("sglang.srt.utils", is_gfx95_supported=lambda: False)
    conv = kernels.load_file(
        "sglang.kernels.ops.mamba.causal_conv1d_triton",
        root / "kernels/ops/mamba/causal_conv1d_triton.py",
    )
    replayssm = kernels.load_file(
        "sglang.kernels.ops.attention.linear.gdn_replayssm_spec_decode",
        root / "kernels/ops/attention/linear/gdn_replayssm_spec_decode.py",
    )
    return conv, replayssm
