# SPDX-License-Identifier: MIT OR Apache-2.0
"""The sglang unit: SGLang's view with one draft chain, its memory fit and its startup line.

The arithmetic and the cited facts are :mod:`ssm_rollback_spec.sizing.sglang`'s.
Per request and GDN layer: base R (h + (K-1)c), R = 5 states with the radix
cache, 1 without; speculative D h + (D+K-2)c, D = s + 1; one padding slot in
each pool. :func:`sglang_sizing` is shared with the ReplaySSM view.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from .. import capacity, sglang
from ..engine import (
    FitKind,
    FitOutcome,
    MemoryFit,
    MemoryFlag,
    SizingEngine,
    fraction,
    layer_bytes,
    whole,
)
from ..releases import SGLANG
from ..state import SnapshotSizing
from ..wording import count, human

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ..dtypes import StateDtypes
    from ..engine import Given
    from ..state import Drafting, Model, Setup
    from ..wording import Section

__all__ = ["SGLANG_FIT", "SGLANG_VIEW", "SglangFitOutcome", "SglangStaticFit", "SglangView"]

#: How each design is named in SGLang's fit section.
_DESIGN_LABELS: Final = {
    capacity.Design.SNAPSHOT: f"{SGLANG.engine} as it runs",
    capacity.Design.SEED_ROW: "with the seed's replay ring",
    capacity.Design.REPLAYSSM: "with ReplaySSM's ring",
}


class SglangFitOutcome(FitOutcome):
    """SGLang's startup figures for each design, and the memory they came from."""

    def __init__(self, fits: Sequence[capacity.SglangFit], memory: sglang.SglangMemory, /) -> None:
        self.fits = list(fits)
        self.memory = memory

    def section(self) -> Section:
        """SGLang's startup figures for each design, as rows under a heading."""
        memory = self.memory
        rows = []
        for fit in self.fits:
            label = _DESIGN_LABELS[fit.design]
            if fit.design is capacity.Design.REPLAYSSM:
                label += " (--enable-linear-replayssm-spec)"
            up = fit.startup
            if up is None:
                rows.append((label, f"SGLang refuses to start: {fit.refused}"))
                continue
            ring = (
                f", ring {human(fit.ring_bytes_per_request)} per request slot"
                if fit.ring_bytes_per_request
                else ""
            )
            whole_requests = up.max_total_num_tokens // memory.context_length
            rows.append(
                (
                    label,
                    (
                        f"max_total_num_tokens={up.max_total_num_tokens},"
                        f" max_running_requests={up.max_running_requests},"
                        f" max_mamba_cache_size={up.max_mamba_cache_size}"
                        f"  (KV pool {human(up.kv_pool_bytes)} at"
                        f" {human(up.kv_bytes_per_token)} per token; mamba state"
                        f" {human(up.mamba_bytes_per_state)} per slot{ring};"
                        f" {count(whole_requests, 'request')} of"
                        f" {memory.context_length:,} tokens fit)"
                    ),
                )
            )
        running = (
            ""
            if memory.max_running_requests is None
            else f" and --max-running-requests {memory.max_running_requests}"
        )
        heading = (
            f"What {SGLANG.engine} sizes at startup with --mem-fraction-static"
            f" {memory.mem_fraction_static}, --gpu-memory-bytes {memory.gpu_memory_bytes:,}"
            f" and --weights-bytes {memory.weights_bytes:,} per GPU, at --context-length"
            f" {memory.context_length:,}{running} (the replay lines are estimates)"
        )
        return heading, rows

    def report(self) -> capacity.SglangFitReport:
        """The fits with their memory inputs, as JSON."""
        return capacity.sglang_fit_report(self.fits, self.memory)


class SglangStaticFit(MemoryFit):
    """SGLang given ``--mem-fraction-static``: what it sizes at startup."""

    kind = FitKind.SGLANG
    flag = "mem_fraction_static"
    needs = ("gpu_memory_bytes", "weights_bytes", "context_length")
    optional = ("max_running_requests",)
    flags = (
        MemoryFlag(
            "mem_fraction_static",
            "FRACTION",
            "SGLang's flag (the share of GPU memory for weights and pools): print what SGLang"
            " logs at startup (max_total_num_tokens, max_running_requests, the mamba cache size)"
            " and each replay ring beside it (sglang views; needs --gpu-memory-bytes,"
            " --weights-bytes and --context-length). SGLang's own default is a heuristic not"
            " modelled: give the value it logs",
        ),
        MemoryFlag(
            "context_length",
            "TOKENS",
            "tokens per request for the sglang views' fit (SGLang's flag)",
        ),
        MemoryFlag(
            "max_running_requests",
            "N",
            "SGLang's flag for the sglang views' fit (default: 48 with drafts, as SGLang sets it)",
        ),
    )

    def fit(self, model: Model, setup: Setup, given: Given, num_drafts: int, /) -> FitOutcome:
        """SGLang's startup figures (:func:`..capacity.sglang_fit`)."""
        running = given.get("max_running_requests")
        memory = sglang.SglangMemory(
            gpu_memory_bytes=whole(given, "gpu_memory_bytes"),
            weights_bytes=whole(given, "weights_bytes"),
            mem_fraction_static=fraction(given, "mem_fraction_static"),
            context_length=whole(given, "context_length"),
            max_running_requests=None if running is None else whole(given, "max_running_requests"),
        )
        fits = capacity.sglang_fit(model, setup, memory, num_drafts=num_drafts)
        return SglangFitOutcome(fits, memory)


#: The fit both sglang views offer.
SGLANG_FIT: Final = SglangStaticFit()


def sglang_sizing(
    view: SizingEngine,
    model: Model,
    setup: Setup,
    /,
    *,
    requests: int,
    speculative: Callable[[int, int, StateDtypes], tuple[int, int | None, int | None]],
) -> SnapshotSizing:
    """SGLang's base states and pools' padding, with what ``speculative`` says a request adds.

    ``speculative(h, column, dtypes)`` gives the speculative bytes per layer,
    and the ReplaySSM record's bytes and count (None for SGLang's own state).
    """
    d = model.dimensions
    dtypes = view.dtypes(model, setup)
    h, column = layer_bytes(d, dtypes)
    state = h + (d.conv_kernel - 1) * column
    layers = d.num_gdn_layers if model.sglang_gdn_layers is None else model.sglang_gdn_layers
    per_layer, record, length = speculative(h, column, dtypes)
    padding = sglang.POOL_PADDING_SLOTS * layers
    return SnapshotSizing(
        view=view.name,
        engine=view.engine,
        setup=view.describe(setup),
        dtypes=dtypes,
        requests=requests,
        base_bytes_per_request=layers * setup.sglang.state_slots_per_request * state,
        speculative_bytes_per_request=layers * per_layer,
        base_padding_bytes=padding * state,
        speculative_padding_bytes=padding * per_layer,
        replayssm_record_bytes=record,
        replayssm_cache_len=length,
        recurrent_bytes_per_layer=h,
        conv_column_bytes_per_layer=column,
    )


class SglangView(SizingEngine):
    """SGLang with one draft chain, radix cache on unless ``--disable-radix-cache``."""

    name = "sglang"
    engine = SGLANG.engine
    plot_label = f"{SGLANG.engine} snapshot (one draft chain)"
    base_formula = "R x (h + (K-1) conv columns), R states per running request"
    speculative_formula = "(D x h + (D+K-2) conv columns), D = num_drafts + 1"
    release = SGLANG
    sources = sglang.SOURCES
    fits = (SGLANG_FIT,)

    def describe(self, setup: Setup, /) -> str:
        """The SGLang setup, as an SGLang user would say it."""
        return setup.sglang.describe()

    def dtypes(self, model: Model, setup: Setup, /) -> StateDtypes:
        """SGLang's state dtypes (:func:`ssm_rollback_spec.sizing.sglang.view_dtypes`)."""
        return sglang.view_dtypes(model, setup)

    def size(self, model: Model, setup: Setup, drafting: Drafting, /) -> SnapshotSizing:
        """D intermediate states and the conv windows per request, D = the drafts + 1."""
        kernel = model.dimensions.conv_kernel
        drafts = drafting.num_drafts + 1
        return sglang_sizing(
            self,
            model,
            setup,
            requests=drafting.requests,
            speculative=lambda h, column, _: (
                drafts * h + (drafts + kernel - 2) * column,
                None,
                None,
            ),
        )


#: The unit.
SGLANG_VIEW: Final = SglangView()
