# SPDX-License-Identifier: MIT OR Apache-2.0
"""How many requests fit: vLLM's startup figures, and the same budget under each replay design.

For a KV-cache budget per GPU (``--kv-cache-memory-bytes``) and a
``--max-model-len``, :func:`vllm_fit` gives what vLLM 0.33.0 logs at startup
(``GPU KV cache size: N tokens``, ``Maximum concurrency for M tokens per
request: X x``), attention KV at that length included, and then what the same
budget holds when a replay ring replaces vLLM's snapshot state:

- the seed's ring (design ``seed-row``): no speculative blocks and no widened
  conv window, plus ``(k - 1)`` replay rows per layer per request;
- ReplaySSM (SGLang 0.5.23's GDN ring, design ``replayssm``): no speculative
  blocks, the widened conv window kept (as SGLang keeps its conv windows), plus
  L records per layer per request.

The replay figures are this package's estimate, not any engine's output: the
ring is carved from the same budget, so a request costs its blocks plus its
ring, and the concurrency is the budget over that cost.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from . import replayssm, vllm
from .rings import seed_ring_bytes
from .views import View, view_dtypes

if TYPE_CHECKING:
    from .views import Model, Setup

__all__ = ["Design", "Fit", "FitFigures", "vllm_fit"]


class Design(enum.Enum):
    """What holds the speculative GDN state."""

    #: vLLM's own: one block per draft and a conv window widened by the drafts.
    SNAPSHOT = "snapshot"
    #: The seed's replay ring.
    SEED_ROW = "seed-row"
    #: SGLang 0.5.23's ReplaySSM ring.
    REPLAYSSM = "replayssm"


class FitFigures(TypedDict):
    """One design's fit as JSON."""

    design: str
    block_bytes: int
    num_blocks: int
    blocks_per_request: int
    ring_bytes_per_request: int
    tokens: int
    concurrency: float
    fits: bool


@dataclass(frozen=True)
class Fit:
    """What one design makes of the budget: vLLM's figures, the ring's bytes beside them."""

    design: Design
    plan: vllm.VllmPlan
    capacity: vllm.VllmCapacity
    #: The ring's bytes per request, outside the block pool (0 for the snapshot).
    ring_bytes_per_request: int

    @property
    def concurrency(self) -> float:
        """Requests at max_model_len: the budget over one request's blocks and ring."""
        if not self.ring_bytes_per_request:
            return self.capacity.concurrency
        cost = self.capacity.blocks_per_request * self.plan.block_bytes
        return self.capacity.kv_cache_bytes / (cost + self.ring_bytes_per_request)

    @property
    def fits(self) -> bool:
        """Whether one request at max_model_len, ring included, fits beside the null block."""
        cost = self.capacity.blocks_per_request * self.plan.block_bytes
        room = self.capacity.kv_cache_bytes - self.plan.block_bytes
        return cost + self.ring_bytes_per_request <= room

    @property
    def tokens(self) -> int:
        """``concurrency x max_model_len``, truncated as vLLM truncates it."""
        return int(self.concurrency * self.capacity.max_model_len)

    def as_dict(self) -> FitFigures:
        """The figures as a JSON-ready mapping."""
        return FitFigures(
            design=self.design.value,
            block_bytes=self.plan.block_bytes,
            num_blocks=self.capacity.num_blocks,
            blocks_per_request=self.capacity.blocks_per_request,
            ring_bytes_per_request=self.ring_bytes_per_request,
            tokens=self.tokens,
            concurrency=self.concurrency,
            fits=self.fits,
        )


def vllm_fit(
    model: Model, setup: Setup, /, *, num_drafts: int, kv_cache_bytes: int, max_model_len: int
) -> list[Fit]:
    """VLLM's startup figures for the budget, then the same under each replay ring.

    Raises:
        UnsupportedDtypeError: a forced dtype vLLM does not offer.
        SizingOverflowError: the seed's ring exceeds the usize range.
    """
    d = model.dimensions
    dtypes = view_dtypes(View.VLLM, model, setup)
    kv_dtype = vllm.model_dtype(model.dtypes)
    layers = {"attention_layers": model.attention_layers, "drafter_layers": model.drafter_layers}
    snapshot = vllm.vllm_plan(
        d, model.attention, dtypes, kv_dtype, setup.vllm, num_spec=num_drafts, **layers
    )
    seed = vllm.vllm_plan(
        d,
        model.attention,
        dtypes,
        kv_dtype,
        setup.vllm,
        num_spec=num_drafts,
        spec_columns=0,
        speculative_blocks=0,
        **layers,
    )
    replay = vllm.vllm_plan(
        d,
        model.attention,
        dtypes,
        kv_dtype,
        setup.vllm,
        num_spec=num_drafts,
        speculative_blocks=0,
        **layers,
    )
    record = replayssm.replayssm_record_bytes(d, dtypes.conv)
    rings = {
        Design.SNAPSHOT: (snapshot, 0),
        Design.SEED_ROW: (seed, seed_ring_bytes(d, num_drafts + 1, 1)),
        Design.REPLAYSSM: (
            replay,
            setup.replayssm_cache_len * record * d.num_gdn_layers if num_drafts else 0,
        ),
    }
    return [
        Fit(
            design=design,
            plan=plan,
            capacity=vllm.vllm_capacity(
                plan, kv_cache_bytes=kv_cache_bytes, max_model_len=max_model_len
            ),
            ring_bytes_per_request=ring,
        )
        for design, (plan, ring) in rings.items()
    ]
