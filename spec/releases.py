# SPDX-License-Identifier: MIT OR Apache-2.0
"""The engine releases the sizing views follow: each distribution, version and licence, once.

The kernel adapters (each engine's ``WHEEL`` under ``adapters/engines/``)
fetch the same releases, so a new version is written here and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["FLA", "LLAMA_CPP", "LLAMA_CPP_COMMIT", "SGLANG", "VLLM", "Release"]


@dataclass(frozen=True)
class Release:
    """One released engine, as its package index names it."""

    #: How outputs name the engine ("vLLM").
    name: str
    #: The distribution pip downloads.
    distribution: str
    version: str
    #: The licence its wheel's metadata states.
    license: str

    @property
    def engine(self) -> str:
        """The engine and version, as outputs name them (``vLLM 0.33.0``)."""
        return f"{self.name} {self.version}"


#: vLLM, as the vllm view and the kernel adapters read it.
VLLM: Final = Release("vLLM", "vllm", "0.33.0", "Apache-2.0")
#: SGLang, as the sglang views and the kernel adapters read it.
SGLANG: Final = Release("SGLang", "sglang", "0.5.23", "Apache-2.0")
#: FLA (flash-linear-attention's kernels, the ``fla-core`` wheel), as its kernel
#: adapter reads it; no sizing view follows it.
FLA: Final = Release("FLA", "fla-core", "0.6.0", "MIT")
#: llama.cpp, as the llama.cpp view reads it: the sdist of llama-cpp-python,
#: which vendors llama.cpp (``vendor/llama.cpp``, its LICENSE the MIT License).
LLAMA_CPP: Final = Release("llama.cpp", "llama-cpp-python", "0.3.36", "MIT")
#: The llama.cpp commit that release vendors (its CHANGELOG names it).
LLAMA_CPP_COMMIT: Final = "0c1e57098"
