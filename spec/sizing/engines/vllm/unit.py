# SPDX-License-Identifier: MIT OR Apache-2.0
"""The vllm unit: vLLM's view, its two memory fits and its startup line.

The arithmetic and the cited facts are :mod:`.facts`'s;
this unit puts them behind :class:`..engine.EngineUnit`. Per request and GDN
group: blocks of one page, h + (K-1+s)c padded to the attention page;
``2 + s + 1`` blocks by default (align mode, FlashInfer checkpoint block),
``1 + s`` without prefix caching; one null block per pool.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final

from ....releases import VLLM
from ... import capacity
from ...unit import (
    EngineUnit,
    FitFlagsError,
    FitKind,
    FitOutcome,
    MemoryFit,
    MemoryFlag,
    Need,
    StartCheck,
    fraction,
    layer_bytes,
    whole,
)
from ...wording import count, human, short
from . import facts as vllm

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ...dtypes import StateDtypes
    from ...state import Drafting, Model, Setup, SnapshotSizing
    from ...unit import Given
    from ...wording import Row, Section

__all__ = ["VLLM_VIEW", "KvBytesFit", "UtilizationFit", "VllmFitOutcome", "VllmView", "vllm_plan"]


def vllm_plan(model: Model, setup: Setup, num_drafts: int, /) -> vllm.VllmPlan:
    """VLLM's grouping and block for ``model`` at ``num_drafts`` drafts.

    Raises:
        UnsupportedDtypeError: a forced dtype vLLM does not offer.
    """
    return vllm.vllm_plan(
        model.dimensions,
        model.attention,
        vllm.view_dtypes(model, setup),
        vllm.kv_cache_dtype(model, vllm.options(setup)),
        vllm.options(setup),
        num_spec=num_drafts,
        attention_layers=model.attention_layers,
        drafter_layers=model.drafter_layers,
    )


def _plan_rows(plan: vllm.VllmPlan, /) -> list[Row]:
    page = plan.layout
    padded = (
        "not padded: no attention layers (explicit dimensions)"
        if page.padded_page_bytes is None
        else f"padded to {human(page.padded_page_bytes)} (attention block of"
        f" {page.block_size} tokens)"
    )
    return [
        ("page", f"{human(page.page_bytes)} per layer, {padded}"),
        (
            "grouping",
            (
                f"{plan.gdn_layers} GDN and {plan.attention_layers} attention layers in groups"
                f" of {plan.group_size}: {plan.gdn_groups} GDN and"
                f" {plan.attention_groups} attention groups"
            ),
        ),
        (
            "pool block",
            f"{human(plan.block_bytes)}  ({plan.group_size} pages); the null block is one",
        ),
        (
            "resident per request",
            (
                f"{human(plan.resident_bytes_per_request)}"
                f"  ({count(plan.gdn_groups, 'group')} x"
                f" {plan.resident_blocks} blocks, what decoding holds)"
            ),
        ),
        (
            "admission per request",
            (
                f"{human(plan.admission_bytes_per_request)}"
                f"  ({count(plan.gdn_groups, 'group')} x"
                f" {plan.admission_blocks} blocks, what vLLM counts to admit)"
            ),
        ),
    ]


#: How each design is named in the fit section.
_DESIGN_LABELS: Final = {
    capacity.Design.SNAPSHOT: f"{VLLM.engine} as it runs",
    capacity.Design.SEED_ROW: "with the seed's replay ring",
    capacity.Design.REPLAYSSM: "with ReplaySSM's ring",
}


def _given_seqs(given: Given, /) -> int | None:
    value = given.get("max_num_seqs")
    return None if value is None else whole(given, "max_num_seqs")


#: Past this many requests at once, the concurrency says so in words beside the figure.
_MANY_REQUESTS: Final = 10**6


def _concurrency(value: float, /) -> str:
    """The concurrency as vLLM logs it (``37.33x``), with separators; past a million, in words."""
    shown = f"{value:,.2f}x"
    return f"{shown} (over a million requests)" if value >= _MANY_REQUESTS else shown


def _needed_bytes(fit: capacity.Fit, requests: int, /) -> int:
    # The requests' blocks and rings at max_model_len, and the null block.
    cost = fit.capacity.blocks_per_request * fit.plan.block_bytes + fit.ring_bytes_per_request
    return requests * cost + fit.plan.block_bytes


class VllmFitOutcome(FitOutcome):
    """VLLM's startup line for each design, and the flags that gave its memory."""

    def __init__(
        self,
        fits: Sequence[capacity.Fit],
        utilization: capacity.VllmUtilization | None,
        /,
        *,
        setup: vllm.VllmSetup | None = None,
        max_num_seqs: int | None = None,
        max_length: vllm.ModelLength | None = None,
    ) -> None:
        self.fits = list(fits)
        self.utilization = utilization
        self.setup = setup or vllm.VllmSetup()
        #: ``--max-num-seqs`` as given (None: vLLM's default).
        self.max_num_seqs = max_num_seqs
        #: The longest ``--max-model-len`` the model's config lets vLLM start with.
        self.max_length = max_length

    def _memory(self, kv_bytes: int, /) -> str:
        # The least memory, as the flags that gave it take it.
        u = self.utilization
        if u is None:
            # Two decimals, so a least memory just above a round input does not read as it.
            return f"--kv-cache-memory-bytes {kv_bytes} ({kv_bytes / 2**30:,.2f} GiB)"
        needed = kv_bytes + u.weights_bytes + u.activation_bytes
        # The smallest utilization, in hundredths of a percent, whose ceil(total x it) covers it.
        share = math.ceil(needed / u.gpu_memory_bytes * 10_000) / 10_000
        while math.ceil(u.gpu_memory_bytes * share) < needed:
            share += 0.0001
        if share > 1:
            return (
                f"{kv_bytes:,} B of KV cache, more than --gpu-memory-bytes"
                f" {u.gpu_memory_bytes:,} leaves at any --gpu-memory-utilization"
            )
        return f"--gpu-memory-utilization {share:.4f} ({kv_bytes:,} B of KV cache)"

    def start(self) -> StartCheck:
        """VLLM's two startup checks as it runs: one request fits, and ``max_num_seqs`` blocks.

        With full CUDA graphs (vLLM's default) and Mamba layers, vLLM refuses
        ``max_num_seqs`` above the KV cache's blocks (``vllm.SOURCES``).
        """
        fit = self.fits[0]
        length = fit.capacity.max_model_len
        if self.max_length is not None and self.max_length.refuses(length):
            derived = self.max_length
            return StartCheck(
                starts=False,
                says=(
                    f'vLLM raises "User-specified max_model_len ({length}) is greater than the'
                    f' derived max_model_len ({derived.key}={derived.tokens} ...)" for'
                    f" --max-model-len {length:,}"
                ),
                source=vllm.SOURCES["max_model_len check"],
                largest=(
                    f"largest --max-model-len that starts: {derived.tokens:,}"
                    " (VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 lets more through)"
                ),
            )
        seqs = vllm.max_num_seqs(self.setup, self.max_num_seqs)
        named = (
            f"--max-num-seqs {seqs}"
            if self.max_num_seqs is not None
            else f"--max-num-seqs {seqs} (vLLM's default on {self.setup.gpu.value.upper()})"
        )
        blocks = fit.capacity.num_blocks
        one = _needed_bytes(fit, 1)
        least = max(one, seqs * fit.plan.block_bytes)
        if not fit.fits:
            return StartCheck(
                starts=False,
                says=(
                    f"one request of {fit.capacity.max_model_len:,} tokens needs"
                    f" {one - fit.plan.block_bytes:,} B of KV cache beside the null block"
                ),
                source=vllm.SOURCES["memory check"],
                smallest_memory=f"smallest memory that starts: {self._memory(least)}",
            )
        if seqs > blocks:
            return StartCheck(
                starts=False,
                says=(
                    f'vLLM raises "max_num_seqs ({seqs}) exceeds available Mamba cache blocks'
                    f' ({blocks})" for {named}'
                ),
                source=vllm.SOURCES["max_num_seqs check"],
                largest=f"largest --max-num-seqs that starts: {blocks:,}",
                smallest_memory=(
                    f"smallest memory that starts with {named}: {self._memory(least)}"
                ),
            )
        return StartCheck(
            starts=True,
            says=f"{named} is within the {blocks:,} Mamba cache blocks",
            source=vllm.SOURCES["max_num_seqs check"],
            largest=f"largest --max-num-seqs that starts: {blocks:,}",
        )

    def why(self) -> list[Row]:
        """Why the block has its tokens, and how tokens follow from concurrency."""
        fit = self.fits[0]
        plan, cap = fit.plan, fit.capacity
        rows: list[Row] = []
        page = plan.layout
        if page.block_size is not None and page.padded_page_bytes is not None:
            per_token = page.padded_page_bytes // page.block_size
            alignment = max(vllm.FLASH_ATTN_KERNEL_BLOCK, vllm.DEFAULT_BLOCK_SIZE)
            if self.setup.checkpoint_blocks:
                alignment = math.lcm(alignment, vllm.FLASHINFER_GDN_CHECKPOINT_ALIGNMENT)
            rows.append(
                (
                    "why the block has its tokens",
                    (
                        f"the attention block grows until its page ({per_token:,} B per token)"
                        f" holds the GDN page of {page.page_bytes:,} B, in steps of {alignment}"
                        f" tokens: {page.block_size:,} tokens ({vllm.SOURCES['page padding']})"
                    ),
                )
            )
        attention = cap.blocks_per_request - plan.gdn_groups * plan.admission_blocks
        rows.append(
            (
                "why tokens are not blocks x block size",
                (
                    f"{fit.tokens:,} tokens = int({cap.num_blocks:,} blocks /"
                    f" {cap.blocks_per_request} per request x {cap.max_model_len:,}); a request"
                    f" takes {attention} attention and"
                    f" {plan.gdn_groups * plan.admission_blocks} GDN blocks"
                    f" ({plan.gdn_groups} groups x {plan.admission_blocks}), whatever its length"
                    f" ({vllm.SOURCES['concurrency']})"
                ),
            )
        )
        return rows

    def requests(self) -> str:
        """VLLM's concurrency at ``--max-model-len`` as it logs it, then each replay ring's."""
        fit, *rings = self.fits
        length = fit.capacity.max_model_len

        def fits(one: capacity.Fit, /) -> str:
            return _concurrency(one.concurrency) if one.fits else "none"

        others = ", ".join(f"{_DESIGN_LABELS[ring.design]} {fits(ring)}" for ring in rings)
        tokens = f" ({fit.tokens:,} tokens)" if fit.fits else ""
        return f"{fits(fit)} at --max-model-len {length:,}{tokens}; {others} (estimates)"

    def section(self) -> Section:
        """How many requests fit: vLLM's startup line for each design, under a heading.

        The heading names the memory flags given: ``--kv-cache-memory-bytes``, or
        the utilization's flags and the KV memory they leave.
        """
        length = self.fits[0].capacity.max_model_len
        memory = self.fits[0].capacity.kv_cache_bytes
        rows = []
        for fit in self.fits:
            ring = (
                ""
                if not fit.ring_bytes_per_request
                else f", ring {human(fit.ring_bytes_per_request)} per request"
            )
            verdict = "" if fit.fits else "; vLLM refuses to start: one request does not fit"
            rows.append(
                (
                    _DESIGN_LABELS[fit.design],
                    (
                        f"GPU KV cache size: {fit.tokens:,} tokens, Maximum concurrency for"
                        f" {length:,} tokens per request: {_concurrency(fit.concurrency)}"
                        f"  ({fit.capacity.num_blocks:,} blocks of"
                        f" {human(fit.plan.block_bytes)},"
                        f" {fit.capacity.blocks_per_request} per request{ring}){verdict}"
                    ),
                )
            )
        given = f"in --kv-cache-memory-bytes {memory:,} per GPU"
        u = self.utilization
        if u is not None:
            given = (
                f"in the KV memory left by --gpu-memory-utilization {u.gpu_memory_utilization} of"
                f" --gpu-memory-bytes {u.gpu_memory_bytes:,} less --weights-bytes"
                f" {u.weights_bytes:,} and --activation-bytes {u.activation_bytes:,}"
                f" ({memory:,} B per GPU)"
            )
        heading = (
            f"How many requests fit {given} at --max-model-len {length:,} ({VLLM.engine};"
            " the replay lines are estimates)"
        )
        return heading, rows

    def report(self) -> capacity.VllmFitReport:
        """The fits with their memory inputs, as JSON."""
        return capacity.vllm_fit_report(self.fits, self.utilization)


#: ``--max-num-seqs``, which either vLLM fit takes.
_MAX_NUM_SEQS: Final = MemoryFlag(
    "max_num_seqs",
    "N",
    "vLLM's request cap (default 1024 on sm90, 256 on sm80)",
)


class KvBytesFit(MemoryFit):
    """VLLM given ``--kv-cache-memory-bytes``: the memory its profiling run is skipped for."""

    kind = FitKind.VLLM_KV_BYTES
    flag = "kv_cache_memory_bytes"
    needs = ("max_model_len",)
    optional = ("max_num_seqs",)
    flags = (
        MemoryFlag(
            "kv_cache_memory_bytes",
            "BYTES",
            "vLLM's KV-cache memory: will it start, how many requests fit",
        ),
        MemoryFlag(
            "max_model_len",
            "TOKENS",
            "vLLM's tokens per request, for its memory flags",
        ),
        _MAX_NUM_SEQS,
    )

    def fit(self, model: Model, setup: Setup, given: Given, num_drafts: int, /) -> FitOutcome:
        """VLLM's startup figures in that memory (:func:`..capacity.vllm_fit`)."""
        return _fit(
            model,
            setup,
            given,
            kv_cache_bytes=whole(given, "kv_cache_memory_bytes"),
            utilization=None,
            num_drafts=num_drafts,
        )


def _fit(  # noqa: PLR0913 - the fit's inputs, each separate
    model: Model,
    setup: Setup,
    given: Given,
    /,
    *,
    kv_cache_bytes: int,
    utilization: capacity.VllmUtilization | None,
    num_drafts: int,
) -> VllmFitOutcome:
    fits = capacity.vllm_fit(
        model,
        setup,
        num_drafts=num_drafts,
        kv_cache_bytes=kv_cache_bytes,
        max_model_len=whole(given, "max_model_len"),
    )
    return VllmFitOutcome(
        fits,
        utilization,
        setup=vllm.options(setup),
        max_num_seqs=_given_seqs(given),
        max_length=model.max_length,
    )


class UtilizationFit(MemoryFit):
    """VLLM given ``--gpu-memory-utilization``: its KV memory left after what it profiles."""

    kind = FitKind.VLLM_UTILIZATION
    flag = "gpu_memory_utilization"
    needs = ("gpu_memory_bytes", "weights_bytes", "activation_bytes", "max_model_len")
    optional = ("max_num_seqs",)
    flags = (
        MemoryFlag(
            "gpu_memory_utilization",
            "FRACTION",
            "vLLM's share of --gpu-memory-bytes, less weights and activation",
        ),
        MemoryFlag(
            "activation_bytes",
            "BYTES",
            "the peak vLLM profiles at startup (activation, CUDA graphs)",
        ),
    )

    def fit(self, model: Model, setup: Setup, given: Given, num_drafts: int, /) -> FitOutcome:
        """VLLM's startup figures in the KV memory the flags leave.

        Raises:
            FitFlagsError: they leave no KV-cache memory.
        """
        used = capacity.VllmUtilization(
            fraction(given, "gpu_memory_utilization"),
            whole(given, "gpu_memory_bytes"),
            whole(given, "weights_bytes"),
            whole(given, "activation_bytes"),
        )
        if used.kv_cache_bytes <= 0:
            raise FitFlagsError(
                f"--gpu-memory-utilization {used.gpu_memory_utilization} leaves no KV-cache memory"
            )
        return _fit(
            model,
            setup,
            given,
            kv_cache_bytes=used.kv_cache_bytes,
            utilization=used,
            num_drafts=num_drafts,
        )


class VllmView(EngineUnit):
    """VLLM as ``vllm serve`` runs by default (:class:`..state.Setup` selects other setups)."""

    name = vllm.NAME
    engine = VLLM.engine
    plot_label = f"{VLLM.engine} snapshot (resident blocks)"
    base_formula = "the resident blocks with no drafts (GDN groups x blocks of the pool)"
    speculative_formula = "the resident blocks at these drafts, less the base"
    release = VLLM
    sources = vllm.SOURCES
    fits = (KvBytesFit(), UtilizationFit())
    per_layer = False

    def describe(self, setup: Setup, /) -> str:
        """The vLLM setup, as a vLLM user would say it."""
        return vllm.options(setup).describe()

    def dtypes(self, model: Model, setup: Setup, /) -> StateDtypes:
        """VLLM's state dtypes (:func:`.facts.view_dtypes`)."""
        return vllm.view_dtypes(model, setup)

    def size(self, model: Model, setup: Setup, drafting: Drafting, /) -> SnapshotSizing:
        """The resident blocks at the drafts over those with none, and the null block."""
        dtypes = self.dtypes(model, setup)
        h, column = layer_bytes(model.dimensions, dtypes)
        plan = vllm_plan(model, setup, drafting.num_drafts)
        # What a decoding request holds with no drafts: no drafter layer, no
        # speculative blocks, a page without the widened window.
        held = vllm_plan(model, setup, 0).resident_bytes_per_request
        return vllm.VllmSizing(
            view=self.name,
            engine=self.engine,
            setup=self.describe(setup),
            dtypes=dtypes,
            requests=drafting.requests,
            base_bytes_per_request=held,
            speculative_bytes_per_request=plan.resident_bytes_per_request - held,
            # One block of the shared pool, whatever the layer count.
            base_padding_bytes=plan.null_block_bytes,
            plan=plan,
            recurrent_bytes_per_layer=h,
            conv_column_bytes_per_layer=column,
        )

    def rows(self, sizing: SnapshotSizing, /) -> list[Row]:
        """VLLM's page, grouping, pool block and per-request blocks."""
        plan = sizing.plan if isinstance(sizing, vllm.VllmSizing) else None
        return [] if plan is None else _plan_rows(plan)

    def need(
        self, model: Model, setup: Setup, /, *, requests: int, context: int, num_drafts: int
    ) -> tuple[str, list[Need]]:
        """The ``--kv-cache-memory-bytes`` each design needs for ``requests`` at ``context``.

        The requests' blocks at ``--max-model-len`` context (attention KV
        included), each replay ring beside them, and the null block; vLLM then
        starts with ``--max-num-seqs`` up to ``requests``.
        """
        fits = capacity.vllm_fit(
            model, setup, num_drafts=num_drafts, kv_cache_bytes=0, max_model_len=context
        )
        heading = (
            f"{VLLM.engine}: --kv-cache-memory-bytes for {count(requests, 'request')} at"
            f" --max-model-len {context:,} (blocks per request at that length, the null block;"
            " the replay lines are estimates)"
        )
        needs = []
        for fit in fits:
            needed = _needed_bytes(fit, requests)
            needs.append(
                Need(
                    _DESIGN_LABELS[fit.design],
                    needed,
                    f"--kv-cache-memory-bytes {needed} ({short(needed)})"
                    f"  ({fit.capacity.blocks_per_request} blocks of"
                    f" {human(fit.plan.block_bytes)} per request)",
                )
            )
        return heading, needs


#: The unit.
VLLM_VIEW: Final = VllmView()
