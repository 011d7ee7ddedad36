# SPDX-License-Identifier: MIT OR Apache-2.0
"""The memory flags of ``size`` and which fit they ask for: vLLM's or SGLang's startup figures.

The flags are named as the engines' users know them where the engine has
one (``--gpu-memory-utilization``, ``--kv-cache-memory-bytes`` and
``--max-model-len`` for vLLM; ``--mem-fraction-static``, ``--context-length``
and ``--max-running-requests`` for SGLang). The memory an engine measures
itself at startup (the GPU's, the weights', and vLLM's profiled activation
peak) is an input here, since no GPU is involved.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["FLAGS", "FitFlagsError", "FitKind", "fit_kind"]


class FitFlagsError(ValueError):
    """The memory flags given do not make one fit; the message says what to give."""


class FitKind(enum.Enum):
    """Which startup figures the flags ask for."""

    NONE = "none"
    #: vLLM with ``--kv-cache-memory-bytes``.
    VLLM_KV_BYTES = "vllm-kv-cache-memory-bytes"
    #: vLLM with ``--gpu-memory-utilization``.
    VLLM_UTILIZATION = "vllm-gpu-memory-utilization"
    #: SGLang with ``--mem-fraction-static``.
    SGLANG = "sglang"


#: Each memory flag (argparse dest): its metavar and help.
FLAGS: Final = {
    "kv_cache_memory_bytes": (
        "BYTES",
        (
            "KV-cache memory per GPU (vLLM's flag; 40GiB or bytes): print what vLLM logs at"
            " startup, and what each replay ring makes of the same memory (needs --max-model-len)"
        ),
    ),
    "max_model_len": ("TOKENS", "tokens per request for the vllm view's fit (vLLM's flag)"),
    "gpu_memory_utilization": (
        "FRACTION",
        (
            "vLLM's flag: its KV memory is ceil(--gpu-memory-bytes x this) less --weights-bytes and"
            " --activation-bytes (needs them and --max-model-len)"
        ),
    ),
    "activation_bytes": (
        "BYTES",
        (
            "for --gpu-memory-utilization: the peak activation, non-torch memory and CUDA-graph"
            " estimate that vLLM measures by a profiling run at startup; an input here, as no GPU"
            " is profiled"
        ),
    ),
    "mem_fraction_static": (
        "FRACTION",
        (
            "SGLang's flag (the share of GPU memory for weights and pools): print what SGLang"
            " logs at startup (max_total_num_tokens, max_running_requests, the mamba cache size)"
            " and each replay ring beside it (sglang views; needs --gpu-memory-bytes,"
            " --weights-bytes and --context-length). SGLang's own default is a heuristic not"
            " modelled: give the value it logs"
        ),
    ),
    "context_length": ("TOKENS", "tokens per request for the sglang views' fit (SGLang's flag)"),
    "max_running_requests": (
        "N",
        "SGLang's flag for the sglang views' fit (default: 48 with drafts, as SGLang sets it)",
    ),
    "gpu_memory_bytes": (
        "BYTES",
        (
            "GPU memory per GPU: the total for vLLM's --gpu-memory-utilization; for SGLang's"
            " --mem-fraction-static the free memory it measures before loading the model"
        ),
    ),
    "weights_bytes": (
        "BYTES",
        "what the weights (target and drafter) take per GPU once loaded, as the engine logs it",
    ),
}

#: What each fit needs, and the engines' views it sizes.
_NEEDS: Final = {
    FitKind.VLLM_KV_BYTES: ("kv_cache_memory_bytes", ("max_model_len",)),
    FitKind.VLLM_UTILIZATION: (
        "gpu_memory_utilization",
        ("gpu_memory_bytes", "weights_bytes", "activation_bytes", "max_model_len"),
    ),
    FitKind.SGLANG: (
        "mem_fraction_static",
        ("gpu_memory_bytes", "weights_bytes", "context_length"),
    ),
}
_VIEWS: Final = {
    FitKind.VLLM_KV_BYTES: ("vllm",),
    FitKind.VLLM_UTILIZATION: ("vllm",),
    FitKind.SGLANG: ("sglang", "sglang-replayssm"),
}


def _flag(dest: str, /) -> str:
    return "--" + dest.replace("_", "-")


def fit_kind(given: Mapping[str, object], /, *, view: str) -> FitKind:
    """The fit the memory flags given (``dest``: value, None if absent) ask of ``view``.

    Raises:
        FitFlagsError: two fits at once, a fit short of a flag it needs, a
            flag no fit uses, or a fit for another engine's view.
    """
    chosen = [kind for kind, (flag, _) in _NEEDS.items() if given.get(flag) is not None]
    if len(chosen) > 1:
        first, second = (_flag(_NEEDS[kind][0]) for kind in chosen[:2])
        raise FitFlagsError(f"give {first} or {second}, not both")
    if not chosen:
        stray = [dest for dest in FLAGS if given.get(dest) is not None]
        if stray:
            wanted = " or ".join(
                _flag(flag) for flag, needs in _NEEDS.values() if stray[0] in needs
            )
            # --max-running-requests is SGLang's alone, and optional there.
            wanted = wanted or _flag(_NEEDS[FitKind.SGLANG][0])
            raise FitFlagsError(f"{_flag(stray[0])} needs {wanted}")
        return FitKind.NONE
    (kind,) = chosen
    flag, needs = _NEEDS[kind]
    missing = [_flag(dest) for dest in needs if given.get(dest) is None]
    if missing:
        raise FitFlagsError(f"{_flag(flag)} needs {' and '.join(missing)}")
    used = {flag, *needs}
    stray = [dest for dest in FLAGS if given.get(dest) is not None and dest not in used]
    if kind is FitKind.SGLANG and "max_running_requests" in stray:
        stray.remove("max_running_requests")
    if stray:
        raise FitFlagsError(f"{_flag(stray[0])} is not used with {_flag(flag)}")
    if view not in _VIEWS[kind]:
        engines = " or ".join(_VIEWS[kind])
        raise FitFlagsError(f"{_flag(flag)} sizes the {engines} view: give --engine {engines}")
    return kind
