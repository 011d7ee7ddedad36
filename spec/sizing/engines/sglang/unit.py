# SPDX-License-Identifier: MIT OR Apache-2.0
"""The sglang unit: SGLang's view with one draft chain, its memory fit and its startup line.

The arithmetic and the cited facts are :mod:`.facts`'s.
Per request and GDN layer: base R (h + (K-1)c), R = 5 states with the radix
cache, 1 without; speculative D h + (D+K-2)c, D = s + 1; one padding slot in
each pool. :func:`sglang_sizing` is shared with the ReplaySSM view.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Final

from ....releases import SGLANG
from ... import capacity
from ...state import SnapshotSizing
from ...unit import (
    EngineUnit,
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
from . import facts as sglang

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ...dtypes import StateDtypes
    from ...state import Drafting, Model, Setup
    from ...unit import Given
    from ...wording import Row, Section

__all__ = ["SGLANG_FIT", "SGLANG_VIEW", "SglangFitOutcome", "SglangStaticFit", "SglangView"]

#: How each design is named in SGLang's fit section.
_DESIGN_LABELS: Final = {
    capacity.Design.SNAPSHOT: f"{SGLANG.engine} as it runs",
    capacity.Design.SEED_ROW: "with the seed's replay ring",
    capacity.Design.REPLAYSSM: "with ReplaySSM's ring",
}


#: The most bytes the searches for the least memory try (1 PiB per GPU).
_MOST_BYTES: Final = 1 << 50


def _least_gpu_bytes(
    serves: Callable[[sglang.SglangMemory], bool], memory: sglang.SglangMemory, /
) -> int | None:
    """The least ``gpu_memory_bytes`` with which ``serves`` holds, the rest of ``memory`` kept.

    More GPU memory leaves SGLang more for both pools, so ``serves`` only
    turns true once; None when even :data:`_MOST_BYTES` does not serve.
    """
    low, high = memory.weights_bytes, _MOST_BYTES
    if not serves(dataclasses.replace(memory, gpu_memory_bytes=high)):
        return None
    while high - low > 1:
        middle = (low + high) // 2
        if serves(dataclasses.replace(memory, gpu_memory_bytes=middle)):
            high = middle
        else:
            low = middle
    return high


def _serving(  # noqa: PLR0913, PLR0917 - the design and what it must serve, each separate
    model: Model, setup: Setup, num_drafts: int, design: int, requests: int, tokens: int, /
) -> Callable[[sglang.SglangMemory], bool]:
    # Whether one design starts and serves the requests, and the tokens, in that memory.
    def serves(memory: sglang.SglangMemory) -> bool:
        up = capacity.sglang_fit(model, setup, memory, num_drafts=num_drafts)[design].startup
        return (
            up is not None
            and up.max_running_requests >= requests
            and up.max_total_num_tokens >= tokens
        )

    return serves


class SglangFitOutcome(FitOutcome):
    """SGLang's startup figures for each design, and the memory they came from."""

    def __init__(  # noqa: PLR0913 - the figures, the memory and the searches over it
        self,
        fits: Sequence[capacity.SglangFit],
        memory: sglang.SglangMemory,
        /,
        *,
        least: Callable[[int], int | None] | None = None,
        least_start: Callable[[], int | None] | None = None,
        setup: sglang.SglangSetup | None = None,
        drafts: int = 0,
    ) -> None:
        self.fits = list(fits)
        self.memory = memory
        #: The least --gpu-memory-bytes with which SGLang as it runs serves N requests.
        self.least = least
        #: The least --gpu-memory-bytes with which it starts, the other flags as given.
        self.least_start = least_start
        self.setup = setup or sglang.SglangSetup()
        self.drafts = drafts

    def _wanted(self) -> int | None:
        given = self.memory.max_running_requests
        if given is None and self.drafts:
            return sglang.SPECULATIVE_MAX_RUNNING_REQUESTS
        return given

    def _least(self, requests: int, /) -> str | None:
        found = None if self.least is None else self.least(requests)
        if found is None:
            return None
        return f"--gpu-memory-bytes {found} ({short(found)})"

    def start(self) -> StartCheck:
        """Whether SGLang as it runs starts, and what it makes of ``--max-running-requests``.

        SGLang refuses only when no state, token or request fits; a larger
        ``--max-running-requests`` than its pools hold is capped, not refused.
        """
        fit = self.fits[0]
        up = fit.startup
        wanted = self._wanted()
        if up is None:
            # Starting asks less than serving --max-running-requests (or its 48): say each.
            found = None if self.least_start is None else self.least_start()
            smallest = [] if found is None else [f"--gpu-memory-bytes {found} ({short(found)})"]
            serving = None if wanted is None else self._least(wanted)
            named = [f"smallest memory that starts: {smallest[0]}"] if smallest else []
            if serving is not None and serving not in smallest:
                named.append(f"smallest memory that serves {wanted}: {serving}")
            return StartCheck(
                starts=False,
                says=f'SGLang raises "{fit.refused}"',
                source=sglang.SOURCES["mamba pool size"],
                smallest_memory="; ".join(named) or None,
            )
        if wanted is None or up.max_running_requests >= wanted:
            return StartCheck(
                starts=True,
                says=f"max_running_requests={up.max_running_requests}",
                source=sglang.SOURCES["max running requests"],
            )
        least = self._least(wanted)
        return StartCheck(
            starts=True,
            says=(
                f"--max-running-requests {wanted} is capped at {up.max_running_requests}"
                " (SGLang caps it, it does not refuse)"
            ),
            source=sglang.SOURCES["running requests cap"],
            largest=f"largest --max-running-requests it serves: {up.max_running_requests}",
            smallest_memory=(
                None if least is None else f"smallest memory that serves {wanted}: {least}"
            ),
        )

    def why(self) -> list[Row]:
        """Why SGLang caps the requests, how replay moves the pools, what is reserved."""
        snapshot = self.fits[0]
        up = snapshot.startup
        if up is None:
            return []
        ratio = self.setup.state_slots_per_request
        wanted = self._wanted()
        asked = (
            f"the estimate from {up.max_total_num_tokens:,} tokens"
            if wanted is None
            else f"{wanted} asked"
        )
        rows: list[Row] = [
            (
                "why max_running_requests",
                (
                    f"{up.max_running_requests} = min({asked}, {up.max_total_num_tokens:,} tokens"
                    f" // 2, {up.max_mamba_cache_size} states // {ratio} per request)"
                    f" ({sglang.SOURCES['max running requests']})"
                ),
            ),
            (
                "why the speculative reservation",
                f"{up.speculative_bytes:,} B ({short(up.speculative_bytes)}): the draft tokens'"
                " intermediate h states and conv windows of each running request slot and one"
                f" padding slot, taken from the mamba budget ({sglang.SOURCES['speculative pool']})"
                if up.speculative_bytes
                else "none: no drafts, so SGLang reserves no intermediate states",
            ),
        ]
        share = self.memory.mamba_full_memory_ratio
        for fit in self.fits[1:]:
            ring = fit.startup
            if ring is None:
                continue
            states = ring.max_mamba_cache_size - up.max_mamba_cache_size
            tokens = ring.max_total_num_tokens - up.max_total_num_tokens
            rows.append(
                (
                    f"why the pools move {_DESIGN_LABELS[fit.design]}",
                    (
                        "its ring is charged per slot and no intermediate states are reserved, so"
                        f" the mamba share ({share} / {1 + share:g} of the rest) keeps"
                        f" {states:+,} states and the KV pool {tokens:+,} tokens:"
                        " the replay ring does not cost the memory, the larger mamba pool takes it"
                        f" ({sglang.SOURCES['replayssm ring reservation']})"
                    ),
                )
            )
        return rows

    def requests(self) -> str:
        """The requests SGLang runs at once, and how many hold a whole context, per design."""
        length = self.memory.context_length

        def fits(one: capacity.SglangFit, /) -> tuple[str, str]:
            up = one.startup
            if up is None:
                return "none", ""
            whole = up.max_total_num_tokens // length
            return f"{up.max_running_requests:,}", f"{whole:,}"

        fit, *rings = self.fits
        running, whole = fits(fit)
        held = f", {whole} of {count(length, 'token')} in its KV pool at once" if whole else ""
        others = ", ".join(
            f"{_DESIGN_LABELS[ring.design]} {' and '.join(filter(None, fits(ring)))}"
            for ring in rings
        )
        return f"max_running_requests {running}{held}; {others} (estimates)"

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
                        f" {count(memory.context_length, 'token')} fit)"
                    ),
                )
            )
        running = (
            ""
            if memory.max_running_requests is None
            else f" and --max-running-requests {memory.max_running_requests}"
        )
        if memory.mamba_full_memory_ratio != sglang.MAMBA_FULL_MEMORY_RATIO:
            running += f", --mamba-full-memory-ratio {memory.mamba_full_memory_ratio}"
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
    optional = ("max_running_requests", "mamba_full_memory_ratio")
    flags = (
        MemoryFlag(
            "mem_fraction_static",
            "FRACTION",
            "SGLang's share of GPU memory for weights and pools",
        ),
        MemoryFlag(
            "context_length",
            "TOKENS",
            "SGLang's tokens per request, for --mem-fraction-static",
        ),
        MemoryFlag(
            "max_running_requests",
            "N",
            "SGLang's request cap (default 48 with drafts)",
        ),
        MemoryFlag(
            "mamba_full_memory_ratio",
            "RATIO",
            "SGLang's mamba share of the pools' memory (default 0.9)",
        ),
    )

    def fit(self, model: Model, setup: Setup, given: Given, num_drafts: int, /) -> FitOutcome:
        """SGLang's startup figures (:func:`..capacity.sglang_fit`)."""
        running = given.get("max_running_requests")
        share = given.get("mamba_full_memory_ratio")
        memory = sglang.SglangMemory(
            gpu_memory_bytes=whole(given, "gpu_memory_bytes"),
            weights_bytes=whole(given, "weights_bytes"),
            mem_fraction_static=fraction(given, "mem_fraction_static"),
            context_length=whole(given, "context_length"),
            max_running_requests=None if running is None else whole(given, "max_running_requests"),
            mamba_full_memory_ratio=(
                sglang.MAMBA_FULL_MEMORY_RATIO
                if share is None
                else fraction(given, "mamba_full_memory_ratio")
            ),
        )
        fits = capacity.sglang_fit(model, setup, memory, num_drafts=num_drafts)

        def least(requests: int) -> int | None:
            asked = dataclasses.replace(memory, max_running_requests=requests)
            return _least_gpu_bytes(_serving(model, setup, num_drafts, 0, requests, 1), asked)

        def least_start() -> int | None:
            # One request of one token: what SGLang needs to start at all, with the flags given.
            return _least_gpu_bytes(_serving(model, setup, num_drafts, 0, 1, 1), memory)

        return SglangFitOutcome(
            fits,
            memory,
            least=least,
            least_start=least_start,
            setup=sglang.options(setup),
            drafts=num_drafts,
        )


#: The fit both sglang views offer.
SGLANG_FIT: Final = SglangStaticFit()


def sglang_sizing(
    view: EngineUnit,
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
        base_bytes_per_request=layers * sglang.options(setup).state_slots_per_request * state,
        speculative_bytes_per_request=layers * per_layer,
        base_padding_bytes=padding * state,
        speculative_padding_bytes=padding * per_layer,
        replayssm_record_bytes=record,
        replayssm_cache_len=length,
        recurrent_bytes_per_layer=h,
        conv_column_bytes_per_layer=column,
    )


#: Why a replay ring, which holds less than the snapshots, can need more memory of SGLang.
_MORE_WITH_A_RING: Final = (
    "a ring reserves no intermediate states, so SGLang's fixed mamba share ({share} / {whole:g}"
    " of the rest) holds more states than the requests use and the KV pool gets less of the same"
    " memory: holding {tokens:,} tokens takes more memory in all; the larger mamba pool costs it,"
    " not the ring ({source})"
)


class SglangView(EngineUnit):
    """SGLang with one draft chain, radix cache on unless ``--disable-radix-cache``."""

    name = sglang.NAME
    engine = SGLANG.engine
    plot_label = f"{SGLANG.engine} snapshot (one draft chain)"
    base_formula = "R x (h + (K-1) conv columns), R states per running request"
    speculative_formula = "(D x h + (D+K-2) conv columns), D = num_drafts + 1"
    release = SGLANG
    sources = sglang.SOURCES
    fits = (SGLANG_FIT,)

    def describe(self, setup: Setup, /) -> str:
        """The SGLang setup, as an SGLang user would say it."""
        return sglang.options(setup).describe()

    def dtypes(self, model: Model, setup: Setup, /) -> StateDtypes:
        """SGLang's state dtypes (:func:`.facts.view_dtypes`)."""
        return sglang.view_dtypes(model, setup)

    def need(
        self, model: Model, setup: Setup, /, *, requests: int, context: int, num_drafts: int
    ) -> tuple[str, list[Need]]:
        """The memory beyond the weights each design needs for ``requests`` at ``context``.

        The least ``--gpu-memory-bytes`` less ``--weights-bytes`` at
        ``--mem-fraction-static 1`` with which SGLang's own sizing gives
        ``max_running_requests`` of at least ``requests`` and KV tokens for
        every one of them at ``context`` (the mamba pool, its speculative
        state, the KV pool and a multimodal model's reservation).
        """
        memory = sglang.SglangMemory(
            gpu_memory_bytes=0,
            weights_bytes=0,
            mem_fraction_static=1.0,
            context_length=context,
            max_running_requests=requests,
        )
        heading = (
            f"{SGLANG.engine}: memory beyond the weights for {count(requests, 'request')} of"
            f" {context:,} tokens (--gpu-memory-bytes less --weights-bytes at"
            " --mem-fraction-static 1: mamba pool, speculative state and KV pool; the replay"
            " lines are estimates)"
        )
        needs: list[Need] = []
        for index, design in enumerate(capacity.Design):
            serves = _serving(model, setup, num_drafts, index, requests, requests * context)
            found = _least_gpu_bytes(serves, memory)
            label = _DESIGN_LABELS[design]
            if found is None:
                needs.append(Need(label, found, "no memory serves them"))
                continue
            snapshot = needs[0].bytes if needs else None
            why = None
            if snapshot is not None and found > snapshot:
                why = _MORE_WITH_A_RING.format(
                    share=memory.mamba_full_memory_ratio,
                    whole=1 + memory.mamba_full_memory_ratio,
                    tokens=requests * context,
                    source=sglang.SOURCES["replayssm ring reservation"],
                )
            needs.append(Need(label, found, f"{found:,} B ({short(found)})", why))
        return heading, needs

    def size(self, model: Model, setup: Setup, drafting: Drafting, /) -> SnapshotSizing:
        """D intermediate states and the conv windows per request, D = the drafts + 1."""
        kernel = model.dimensions.conv_kernel
        drafts = drafting.num_drafts + 1
        return sglang_sizing(
            self,
            model,
            setup,
            requests=drafting.requests,
            # Without drafts SGLang runs no speculative decoding and allocates no scratch.
            speculative=lambda h, column, _: (
                drafts * h + (drafts + kernel - 2) * column if drafting.num_drafts else 0,
                None,
                None,
            ),
        )


#: The unit.
SGLANG_VIEW: Final = SglangView()
