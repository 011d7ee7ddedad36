# SPDX-License-Identifier: MIT OR Apache-2.0
"""The views side by side: what each holds for speculative decoding, per request and per GPU.

A view follows one engine and version or this module's own engine-neutral
layout; each is a unit in :mod:`.engines`, listed in :data:`.registry.ENGINES`,
which this module calls by name. Per request and
GDN layer, with h the recurrent state, c one conv column, K the conv kernel,
s the drafts and D = s + 1:

- ``module``: base h + (K-1)c; speculative k (h + (K-1)c), the dense layout;
- ``vllm``: blocks of one page, h + (K-1+s)c padded to the attention page;
  ``2 + s + 1`` blocks by default (align mode, FlashInfer checkpoint block),
  ``1 + s`` without prefix caching; one null block per pool;
- ``sglang``: base R (h + (K-1)c), R = 5 states with the radix cache, 1
  without; speculative D h + (D+K-2)c; one padding slot in each pool;
- ``sglang-replayssm``: base as ``sglang``; speculative (D+K-2)c plus L
  records; one padding slot.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from ..releases import SGLANG
from .dtypes import UnsupportedDtypeError
from .engines.module import MODULE_ENGINE
from .engines.replayssm import facts as replayssm
from .engines.sglang import facts as sglang
from .engines.vllm.unit import vllm_plan
from .registry import ENGINES
from .rings import minimal_ring_bytes, seed_ring_bytes
from .state import Drafting, Model, Setup, SnapshotFigures, SnapshotSizing

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from .dtypes import StateDtypes

__all__ = [
    "MODULE_ENGINE",
    "Model",
    "PerRequestAndGpu",
    "Setup",
    "SnapshotFigures",
    "SnapshotSizing",
    "SweepFigures",
    "SweepRow",
    "View",
    "size_view",
    "sweep",
    "view_dtypes",
    "vllm_plan",
]


class View(enum.StrEnum):
    """The shipped views by name; :data:`.registry.ENGINES` holds their units."""

    #: Engine-neutral: ``k`` full states (recurrent and conv) per slot.
    MODULE = "module"
    #: vLLM as ``vllm serve`` runs by default (options select other setups).
    VLLM = "vllm"
    #: SGLang, one draft chain, radix cache on.
    SGLANG = "sglang"
    #: SGLang with ``--enable-linear-replayssm-spec``.
    SGLANG_REPLAYSSM = "sglang-replayssm"

    @property
    def engine(self) -> str:
        """The engine and version the view follows."""
        return ENGINES[self].engine


def view_dtypes(view: str, model: Model, setup: Setup, /) -> StateDtypes:
    """The state dtypes ``view`` uses for ``model``, unless ``setup`` forces them.

    Raises:
        UnsupportedDtypeError: the engine the view follows offers no such dtype.
    """
    return ENGINES[view].dtypes(model, setup)


def size_view(  # noqa: PLR0913 - each is a separate dimension of the review
    view: str,
    model: Model,
    /,
    *,
    num_drafts: int,
    requests: int,
    setup: Setup | None = None,
    num_intermediates: int | None = None,
) -> SnapshotSizing:
    """Size what ``view`` holds for ``requests`` requests at ``num_drafts`` drafts per step.

    For the module view ``requests`` are its slots and ``num_intermediates``
    its k (default ``num_drafts + 1``); the engine views add their own pool
    padding to ``requests``.

    Raises:
        UnsupportedDtypeError: a forced dtype the view's engine does not offer.
    """
    drafting = Drafting(num_drafts, requests, num_intermediates)
    return ENGINES[view].size(model, setup or Setup(), drafting)


class PerRequestAndGpu(TypedDict):
    """One figure for one request and for every request on the GPU."""

    per_request: int
    per_gpu: int


class SweepFigures(TypedDict):
    """One sweep row as JSON."""

    num_drafts: int
    seed_ring: PerRequestAndGpu
    minimal_ring: PerRequestAndGpu
    replayssm_ring: PerRequestAndGpu
    speculative: dict[str, PerRequestAndGpu]
    speculative_to_seed_ring: dict[str, float | None]


@dataclass(frozen=True)
class SweepRow:
    """The three rings and each view's speculative state at one draft count.

    Each ``(per request, per GPU)`` pair: the seed's and the minimal ring per
    slot and over the module's slots; the ReplaySSM ring per request and over
    SGLang's ``requests + 1`` slots; each view's speculative state per request
    and with its pools' padding.
    """

    num_drafts: int
    seed_ring: tuple[int, int]
    minimal_ring: tuple[int, int]
    replayssm_ring: tuple[int, int]
    speculative: Mapping[str, tuple[int, int]]
    #: The views whose speculative state lies in host memory, not on the GPU.
    host: frozenset[str] = frozenset()

    def ratio(self, view: str, /) -> float | None:
        """The headline ratio: speculative state over the seed's ring, both per request.

        Per request, so that neither ``--batch`` nor ``--mtp-slots`` changes it;
        None when there is no ring (no drafts).
        """
        ring = self.seed_ring[0]
        return None if ring == 0 else self.speculative[view][0] / ring

    def as_dict(self) -> SweepFigures:
        """The row as a JSON-ready mapping."""

        def pair(figures: tuple[int, int]) -> PerRequestAndGpu:
            return PerRequestAndGpu(per_request=figures[0], per_gpu=figures[1])

        return SweepFigures(
            num_drafts=self.num_drafts,
            seed_ring=pair(self.seed_ring),
            minimal_ring=pair(self.minimal_ring),
            replayssm_ring=pair(self.replayssm_ring),
            speculative={str(v): pair(f) for v, f in self.speculative.items()},
            speculative_to_seed_ring={str(v): self.ratio(v) for v in self.speculative},
        )


def sweep(  # noqa: PLR0913 - each is a separate dimension of the review
    model: Model,
    /,
    *,
    num_drafts: Iterable[int],
    slots: int,
    requests: int,
    views: Iterable[str],
    setup: Setup | None = None,
) -> list[SweepRow]:
    """One row per draft count: the rings (k = drafts + 1) and each view's speculative state.

    ``slots`` are the module's (``--mtp-slots`` + 1, or ``--batch``), which
    the seed's and the minimal ring and the module view cover; ``requests``
    the engines' (``--mtp-slots``, or ``--batch``), to which they add padding.

    Raises:
        SizingOverflowError: a ring size exceeds the usize range (``row`` or ``ring``).
        UnsupportedDtypeError: a forced dtype a view's engine does not offer.
    """
    setup = setup or Setup()
    chosen = list(views)
    d = model.dimensions
    try:
        ring_dtype = sglang.view_dtypes(model, setup).conv
    except UnsupportedDtypeError:
        if any(ENGINES[name].release is SGLANG for name in chosen):
            raise
        # No SGLang view is shown, so a dtype SGLang lacks is no reason to
        # refuse: its ring then keeps SGLang's own conv dtype.
        ring_dtype = sglang.sglang_dtypes(model.dtypes).conv
    record = replayssm.replayssm_record_bytes(d, ring_dtype)
    sglang_layers = model.sglang_gdn_layers or d.num_gdn_layers
    replay_ring = replayssm.cache_len(setup) * record * sglang_layers
    rows = []
    for drafts in num_drafts:
        k = drafts + 1
        speculative = {}
        host = set()
        for name in chosen:
            count = slots if ENGINES[name].seed_slots else requests
            sized = size_view(name, model, num_drafts=drafts, requests=count, setup=setup)
            speculative[name] = (sized.speculative_bytes_per_request, sized.speculative_bytes)
            if ENGINES[name].in_host_memory(sized):
                host.add(name)
        rows.append(
            SweepRow(
                num_drafts=drafts,
                seed_ring=(seed_ring_bytes(d, k, 1), seed_ring_bytes(d, k, slots)),
                minimal_ring=(minimal_ring_bytes(d, k, 1), minimal_ring_bytes(d, k, slots)),
                # No drafts, no speculation: SGLang allocates no ring.
                replayssm_ring=(
                    replay_ring if drafts else 0,
                    (requests + sglang.POOL_PADDING_SLOTS) * replay_ring if drafts else 0,
                ),
                speculative=speculative,
                host=frozenset(host),
            )
        )
    return rows
