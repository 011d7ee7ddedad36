# SPDX-License-Identifier: MIT OR Apache-2.0
"""The engine adapters, one row each: the table everything that runs every engine reads.

A row is an engine module's ``ADAPTER`` (:class:`~.serve.EngineAdapter`): its
wheel (release, licence, the files its kernels import), the pipeline and
design its replay computes, its replay and, where the engine has one, its
batch form. ``python -m adapters.engines.wheels`` fetches every row's wheel,
and the kernels tier (``tests/kernels``) runs its per-engine checks over every
row. Importing this imports no torch, Triton or engine code: they load on an
adapter's first replay.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from . import fla, sglang, vllm

if TYPE_CHECKING:
    from .serve import EngineAdapter

__all__ = ["ENGINES"]

#: Every engine adapter, by the name ``python -m adapters.engines.NAME`` runs it by.
ENGINES: Final[dict[str, EngineAdapter]] = {
    adapter.engine: adapter for adapter in (fla.ADAPTER, sglang.ADAPTER, vllm.ADAPTER)
}
