# SPDX-License-Identifier: MIT OR Apache-2.0
"""The memory flags of ``size`` and which engine's fit they ask for.

Each fit and its own flags are declared in its engine's unit
(:class:`.engine.MemoryFit`); the flags several fits share are here. The
flags are named as the engines' users know them where the engine has one
(``--gpu-memory-utilization``, ``--kv-cache-memory-bytes`` and
``--max-model-len`` for vLLM; ``--mem-fraction-static``, ``--context-length``
and ``--max-running-requests`` for SGLang). The memory an engine measures
itself at startup (the GPU's, the weights', and vLLM's profiled activation
peak) is an input here, since no GPU is involved.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from . import registry
from .unit import FitFlagsError, FitKind, MemoryFit, MemoryFlag

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["SHARED", "FitFlagsError", "FitKind", "fit_for", "fit_kind", "flags"]

#: The flags more than one engine's fit needs.
SHARED: Final = (
    MemoryFlag(
        "gpu_memory_bytes",
        "BYTES",
        "GPU memory (for SGLang: free before it loads the model)",
    ),
    MemoryFlag(
        "weights_bytes",
        "BYTES",
        "the weights and drafter once loaded, as the engine logs them",
    ),
)


def flags() -> list[MemoryFlag]:
    """Every memory flag: each registered fit's own, in the table's order, then the shared."""
    found: list[MemoryFlag] = []
    for fit in registry.fits():
        found += fit.flags
    return [*found, *SHARED]


def _flag(dest: str, /) -> str:
    return "--" + dest.replace("_", "-")


def fit_for(given: Mapping[str, object], /, *, view: str) -> MemoryFit | None:
    """The fit the memory flags given (``dest``: value, None if absent) ask of ``view``.

    Raises:
        FitFlagsError: two fits at once, a fit short of a flag it needs, a
            flag no fit uses, or a fit for another engine's view.
    """
    fits = registry.fits()
    dests = [flag.dest for flag in flags()]
    chosen = [fit for fit in fits if given.get(fit.flag) is not None]
    if len(chosen) > 1:
        raise FitFlagsError(f"give {_flag(chosen[0].flag)} or {_flag(chosen[1].flag)}, not both")
    if not chosen:
        stray = [dest for dest in dests if given.get(dest) is not None]
        if stray:
            wanted = " or ".join(
                _flag(fit.flag) for fit in fits if stray[0] in (*fit.needs, *fit.optional)
            )
            raise FitFlagsError(f"{_flag(stray[0])} needs {wanted}")
        return None
    (fit,) = chosen
    missing = [_flag(dest) for dest in fit.needs if given.get(dest) is None]
    if missing:
        raise FitFlagsError(f"{_flag(fit.flag)} needs {' and '.join(missing)}")
    used = {fit.flag, *fit.needs, *fit.optional}
    stray = [dest for dest in dests if given.get(dest) is not None and dest not in used]
    if stray:
        raise FitFlagsError(f"{_flag(stray[0])} is not used with {_flag(fit.flag)}")
    views = [name for name, unit in registry.ENGINES.items() if fit in unit.fits]
    if view not in views:
        engines = " or ".join(views)
        raise FitFlagsError(f"{_flag(fit.flag)} sizes the {engines} view: give --engine {engines}")
    return fit


def fit_kind(given: Mapping[str, object], /, *, view: str) -> FitKind:
    """The kind of fit :func:`fit_for` finds (``FitKind.NONE`` for none).

    Raises:
        FitFlagsError: as :func:`fit_for`.
    """
    fit = fit_for(given, view=view)
    return FitKind.NONE if fit is None else fit.kind
