# SPDX-License-Identifier: MIT OR Apache-2.0
"""The sglang-replayssm unit: SGLang with ``--enable-linear-replayssm-spec``.

The ring's facts are :mod:`.facts`'s. Per request
and GDN layer: base as ``sglang``; speculative (D+K-2)c plus L records; one
padding slot. Its fit is SGLang's (:data:`.sglang.SGLANG_FIT`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ....releases import SGLANG
from ...unit import EngineUnit
from ...wording import human
from ..sglang import facts as sglang
from ..sglang.unit import SGLANG_FIT, sglang_sizing
from . import facts as replayssm

if TYPE_CHECKING:
    from ...dtypes import StateDtypes
    from ...state import Drafting, Model, Setup, SnapshotSizing
    from ...wording import Row

__all__ = ["SGLANG_REPLAYSSM", "ReplaySsmView"]


class ReplaySsmView(EngineUnit):
    """SGLang's GDN ReplaySSM ring: the conv windows kept, L records per slot and layer."""

    name = replayssm.NAME
    engine = replayssm.ENGINE
    plot_label = f"{SGLANG.engine} ReplaySSM ring + conv windows"
    base_formula = "R x (h + (K-1) conv columns), R states per running request"
    speculative_formula = "((D+K-2) conv columns + L ReplaySSM records), D = num_drafts + 1"
    release = SGLANG
    sources = replayssm.SOURCES
    fits = (SGLANG_FIT,)

    def describe(self, setup: Setup, /) -> str:
        """The ring's flags, then the SGLang setup."""
        return (
            f"--enable-linear-replayssm-spec, --linear-replayssm-cache-len "
            f"{replayssm.cache_len(setup)}; {sglang.options(setup).describe()}"
        )

    def dtypes(self, model: Model, setup: Setup, /) -> StateDtypes:
        """SGLang's dtypes, h in FP32 unless told (:func:`..replayssm.view_dtypes`)."""
        return replayssm.view_dtypes(model, setup)

    def size(self, model: Model, setup: Setup, drafting: Drafting, /) -> SnapshotSizing:
        """The conv windows and L records per request, D = the drafts + 1."""
        d = model.dimensions
        windows = drafting.num_drafts + 1 + d.conv_kernel - 2
        length = replayssm.cache_len(setup)

        def speculative(
            h: int, column: int, dtypes: StateDtypes
        ) -> tuple[int, int | None, int | None]:
            del h
            if not drafting.num_drafts:
                # No speculative decoding, so neither the windows nor the ring.
                return 0, None, None
            record = replayssm.replayssm_record_bytes(d, dtypes.conv)
            return windows * column + length * record, record, length

        return sglang_sizing(
            self, model, setup, requests=drafting.requests, speculative=speculative
        )

    def rows(self, sizing: SnapshotSizing, /) -> list[Row]:
        """The ReplaySSM record and the records per slot."""
        if sizing.replayssm_record_bytes is None:
            return []
        return [
            (
                "ReplaySSM record",
                (
                    f"{human(sizing.replayssm_record_bytes)} per record per layer,"
                    f" {sizing.replayssm_cache_len} records per slot"
                ),
            )
        ]


#: The unit.
SGLANG_REPLAYSSM: Final = ReplaySsmView()
