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

import dataclasses
import enum
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from .engines.replayssm import facts as replayssm
from .engines.sglang import facts as sglang
from .engines.vllm import facts as vllm
from .rings import seed_ring_bytes

if TYPE_CHECKING:
    from collections.abc import Callable

    from .dtypes import StateDtypes
    from .state import Model, Setup

__all__ = [
    "Design",
    "Fit",
    "FitFigures",
    "SglangFit",
    "SglangFitFigures",
    "SglangFitReport",
    "VllmFitReport",
    "VllmUtilization",
    "sglang_fit",
    "sglang_fit_report",
    "vllm_fit",
    "vllm_fit_report",
    "vllm_kv_cache_bytes",
]


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
    dtypes = vllm.view_dtypes(model, setup)
    kv_dtype = vllm.kv_cache_dtype(model, vllm.options(setup))
    layers = {"attention_layers": model.attention_layers, "drafter_layers": model.drafter_layers}
    snapshot = vllm.vllm_plan(
        d, model.attention, dtypes, kv_dtype, vllm.options(setup), num_spec=num_drafts, **layers
    )
    seed = vllm.vllm_plan(
        d,
        model.attention,
        dtypes,
        kv_dtype,
        vllm.options(setup),
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
        vllm.options(setup),
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
            replayssm.cache_len(setup) * record * d.num_gdn_layers if num_drafts else 0,
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


def vllm_kv_cache_bytes(
    *, gpu_memory_bytes: int, utilization: float, weights_bytes: int, activation_bytes: int
) -> int:
    """The KV-cache memory vLLM 0.33.0 takes under ``--gpu-memory-utilization`` (``vllm.SOURCES``).

    ``ceil(total x utilization)`` less what vLLM's profiling run measures:
    the weights and, given here as ``activation_bytes``, the peak activation,
    non-torch memory and the CUDA-graph estimate. May be zero or less: vLLM
    then has no memory for the KV cache.
    """
    requested = math.ceil(gpu_memory_bytes * utilization)
    return requested - weights_bytes - activation_bytes


@dataclass(frozen=True)
class VllmUtilization:
    """The flags of a ``--gpu-memory-utilization`` fit, kept so the output can name them."""

    gpu_memory_utilization: float
    gpu_memory_bytes: int
    weights_bytes: int
    activation_bytes: int

    @property
    def kv_cache_bytes(self) -> int:
        """The KV-cache memory they leave (:func:`vllm_kv_cache_bytes`)."""
        return vllm_kv_cache_bytes(
            gpu_memory_bytes=self.gpu_memory_bytes,
            utilization=self.gpu_memory_utilization,
            weights_bytes=self.weights_bytes,
            activation_bytes=self.activation_bytes,
        )


class VllmFitReport(TypedDict):
    """VLLM's fit as JSON: the KV memory (given, or derived from the flags beside it)."""

    engine: str
    kv_cache_memory_bytes: int
    max_model_len: int
    #: The ``--gpu-memory-utilization`` flags the memory was derived from; None when
    #: ``--kv-cache-memory-bytes`` gave it.
    gpu_memory_utilization: float | None
    gpu_memory_bytes: int | None
    weights_bytes: int | None
    activation_bytes: int | None
    designs: list[FitFigures]


def vllm_fit_report(fits: list[Fit], utilization: VllmUtilization | None, /) -> VllmFitReport:
    """The fits of :func:`vllm_fit` with their memory inputs, as JSON."""
    u = utilization
    return VllmFitReport(
        engine=vllm.ENGINE,
        kv_cache_memory_bytes=fits[0].capacity.kv_cache_bytes,
        max_model_len=fits[0].capacity.max_model_len,
        gpu_memory_utilization=u.gpu_memory_utilization if u else None,
        gpu_memory_bytes=u.gpu_memory_bytes if u else None,
        weights_bytes=u.weights_bytes if u else None,
        activation_bytes=u.activation_bytes if u else None,
        designs=[fit.as_dict() for fit in fits],
    )


class SglangFitFigures(TypedDict):
    """One design's SGLang startup figures as JSON."""

    design: str
    max_total_num_tokens: int | None
    max_running_requests: int | None
    max_mamba_cache_size: int | None
    kv_bytes_per_token: int
    mamba_bytes_per_state: int
    kv_pool_bytes: int | None
    speculative_bytes: int | None
    ring_bytes_per_request: int
    refused: str | None


class SglangFitReport(TypedDict):
    """SGLang's fit as JSON: the engine, the memory inputs and each design's figures."""

    engine: str
    gpu_memory_bytes: int
    weights_bytes: int
    mem_fraction_static: float
    context_length: int
    max_running_requests: int | None
    designs: list[SglangFitFigures]


@dataclass(frozen=True)
class SglangFit:
    """What one design makes of the memory under SGLang 0.5.23's startup sizing."""

    design: Design
    #: SGLang's figures, or None when it refuses to start (``refused`` says why).
    startup: sglang.SglangStartup | None
    refused: str | None
    kv_bytes_per_token: int
    mamba_bytes_per_state: int
    #: The ring's bytes per request slot (0 for SGLang's own intermediate states).
    ring_bytes_per_request: int

    def as_dict(self) -> SglangFitFigures:
        """The figures as a JSON-ready mapping."""
        up = self.startup
        return SglangFitFigures(
            design=self.design.value,
            max_total_num_tokens=None if up is None else up.max_total_num_tokens,
            max_running_requests=None if up is None else up.max_running_requests,
            max_mamba_cache_size=None if up is None else up.max_mamba_cache_size,
            kv_bytes_per_token=self.kv_bytes_per_token,
            mamba_bytes_per_state=self.mamba_bytes_per_state,
            kv_pool_bytes=None if up is None else up.kv_pool_bytes,
            speculative_bytes=None if up is None else up.speculative_bytes,
            ring_bytes_per_request=self.ring_bytes_per_request,
            refused=self.refused,
        )


def _sglang_design(  # noqa: PLR0913 - the design and SGLang's inputs, each separate
    design: Design,
    memory: sglang.SglangMemory,
    /,
    *,
    model: Model,
    setup: Setup,
    num_drafts: int,
    view_dtypes: Callable[[Model, Setup], StateDtypes],
    ring: int,
) -> SglangFit:
    d = model.dimensions
    layers = model.sglang_gdn_layers or d.num_gdn_layers
    dtypes = view_dtypes(model, setup)
    per_state = layers * (
        d.recurrent_state_values * dtypes.recurrent.bytes
        + (d.conv_kernel - 1) * d.conv_dim * dtypes.conv.bytes
    )
    attention = model.attention
    per_token = 0
    if attention is not None:
        # SGLang's full-attention layers are those its interval leaves.
        attending = model.attention_layers + d.num_gdn_layers - layers
        width = attention.num_kv_heads * 2 * attention.head_dim
        per_token = width * attending * sglang.KV_BYTES
    state = sglang.SpeculativeState.INTERMEDIATE
    if design is not Design.SNAPSHOT:
        state = sglang.SpeculativeState.RING
    try:
        startup = sglang.sglang_startup(
            memory,
            mamba_bytes_per_state=per_state,
            kv_bytes_per_token=per_token,
            drafts=num_drafts,
            radix_cache=sglang.options(setup).radix_cache,
            multimodal=model.architecture in sglang.MULTIMODAL_ARCHITECTURES,
            state=state,
            ring_bytes_per_request=ring,
        )
    except sglang.SglangStartError as error:
        return SglangFit(design, None, str(error), per_token, per_state, ring)
    return SglangFit(design, startup, None, per_token, per_state, ring)


def sglang_fit(
    model: Model, setup: Setup, memory: sglang.SglangMemory, /, *, num_drafts: int
) -> list[SglangFit]:
    """SGLang's startup figures for the memory, then the same with each replay ring.

    The snapshot design is SGLang as it runs (the ``sglang`` view's dtypes);
    the seed's ring is charged as SGLang charges its GDN ReplaySSM ring (a
    fixed ring per request slot, no intermediate states), which is this
    package's estimate; the ReplaySSM design is SGLang with
    ``--enable-linear-replayssm-spec`` (that view's dtypes).

    Raises:
        UnsupportedDtypeError: a forced dtype SGLang does not offer.
        SizingOverflowError: the seed's ring exceeds the usize range.
    """
    d = model.dimensions
    layers = model.sglang_gdn_layers or d.num_gdn_layers
    sglang_d = dataclasses.replace(d, num_gdn_layers=layers)
    conv = replayssm.view_dtypes(model, setup).conv
    record = replayssm.replayssm_record_bytes(d, conv)
    rings = {
        Design.SNAPSHOT: (sglang.view_dtypes, 0),
        Design.SEED_ROW: (sglang.view_dtypes, seed_ring_bytes(sglang_d, num_drafts + 1, 1)),
        Design.REPLAYSSM: (
            replayssm.view_dtypes,
            replayssm.cache_len(setup) * record * layers if num_drafts else 0,
        ),
    }
    return [
        _sglang_design(
            design,
            memory,
            model=model,
            setup=setup,
            num_drafts=num_drafts,
            view_dtypes=dtypes,
            ring=ring,
        )
        for design, (dtypes, ring) in rings.items()
    ]


def sglang_fit_report(fits: list[SglangFit], memory: sglang.SglangMemory, /) -> SglangFitReport:
    """The fits of :func:`sglang_fit` with their memory inputs, as JSON."""
    return SglangFitReport(
        engine=sglang.ENGINE,
        gpu_memory_bytes=memory.gpu_memory_bytes,
        weights_bytes=memory.weights_bytes,
        mem_fraction_static=memory.mem_fraction_static,
        context_length=memory.context_length,
        max_running_requests=memory.max_running_requests,
        designs=[fit.as_dict() for fit in fits],
    )
