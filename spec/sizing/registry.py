# SPDX-License-Identifier: MIT OR Apache-2.0
"""The engines ``size`` compares against: one table, in the order outputs show them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from .engines.llamacpp.unit import LLAMA_CPP_VIEW
from .engines.module import MODULE
from .engines.replayssm.unit import SGLANG_REPLAYSSM
from .engines.sglang.unit import SGLANG_VIEW
from .engines.vllm.unit import VLLM_VIEW

if TYPE_CHECKING:
    from .unit import EngineUnit, MemoryFit

__all__ = ["ALIASES", "DEFAULT", "ENGINES", "fits"]

#: Every engine's unit by its name (``--engine``); the first is the default.
ENGINES: Final[dict[str, EngineUnit]] = {
    unit.name: unit for unit in (MODULE, VLLM_VIEW, SGLANG_VIEW, SGLANG_REPLAYSSM, LLAMA_CPP_VIEW)
}
#: The view a review shows unless ``--engine`` names one.
DEFAULT: Final = MODULE.name
#: Old names that still work, and the name each now stands for.
ALIASES: Final = {"vllm-align": VLLM_VIEW.name}


def fits() -> list[MemoryFit]:
    """Every unit's memory fits, each once, in the table's order."""
    found: list[MemoryFit] = []
    for unit in ENGINES.values():
        found += [fit for fit in unit.fits if fit not in found]
    return found
