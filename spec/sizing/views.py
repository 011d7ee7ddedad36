# SPDX-License-Identifier: MIT OR Apache-2.0
"""The views side by side: what each holds for speculative decoding, per request and per GPU.

A view follows one engine and version (:mod:`.vllm`, :mod:`.sglang`,
:mod:`.replayssm`) or this module's own engine-neutral layout. Per request and
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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TypedDict

from . import replayssm, sglang, vllm
from .dtypes import ConfigDtypes, Dtype, StateDtypes, UnsupportedDtypeError
from .rings import minimal_ring_bytes, seed_ring_bytes

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from .dimensions import AttentionDimensions, GdnDimensions

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

#: How outputs name the module view's source.
MODULE_ENGINE: Final = "this module (engine-neutral, spec/rollback.py)"


class View(enum.Enum):
    """Whose state layout a snapshot figure follows."""

    #: Engine-neutral: ``k`` full states (recurrent and conv) per slot.
    MODULE = "module"
    #: vLLM 0.33.0 as ``vllm serve`` runs by default (options select other setups).
    VLLM = "vllm"
    #: SGLang 0.5.23, one draft chain, radix cache on.
    SGLANG = "sglang"
    #: SGLang 0.5.23 with ``--enable-linear-replayssm-spec``.
    SGLANG_REPLAYSSM = "sglang-replayssm"

    @property
    def engine(self) -> str:
        """The engine and version the view follows."""
        return _ENGINES[self]


_ENGINES: Final = {
    View.MODULE: MODULE_ENGINE,
    View.VLLM: vllm.ENGINE,
    View.SGLANG: sglang.ENGINE,
    View.SGLANG_REPLAYSSM: replayssm.ENGINE,
}


@dataclass(frozen=True)
class Model:
    """What a config says about a model, on one GPU (``dimensions`` and ``attention`` split)."""

    dimensions: GdnDimensions
    attention: AttentionDimensions | None = None
    dtypes: ConfigDtypes = field(default_factory=ConfigDtypes)
    architecture: str | None = None
    #: The target's full-attention layers (0 without attention fields).
    attention_layers: int = 0
    #: The MTP drafter's full-attention layers.
    drafter_layers: int = 1
    #: The GDN layers SGLang counts from ``full_attention_interval`` (None: as ``dimensions``).
    sglang_gdn_layers: int | None = None


@dataclass(frozen=True)
class Setup:
    """How each engine is served, and the dtypes a review forces on every view."""

    vllm: vllm.VllmSetup = field(default_factory=vllm.VllmSetup)
    sglang: sglang.SglangSetup = field(default_factory=sglang.SglangSetup)
    replayssm_cache_len: int = replayssm.DEFAULT_CACHE_LEN
    recurrent: Dtype | None = None
    conv: Dtype | None = None

    def describe(self, view: View, /) -> str:
        """The setup ``view`` follows, in a line."""
        if view is View.VLLM:
            return self.vllm.describe()
        if view is View.SGLANG:
            return self.sglang.describe()
        if view is View.SGLANG_REPLAYSSM:
            return (
                f"--enable-linear-replayssm-spec, --linear-replayssm-cache-len "
                f"{self.replayssm_cache_len}; {self.sglang.describe()}"
            )
        return "k full states per slot (the dense layout), slots as the module counts them"


def view_dtypes(view: View, model: Model, setup: Setup, /) -> StateDtypes:
    """The state dtypes ``view`` uses for ``model``, unless ``setup`` forces them.

    Raises:
        UnsupportedDtypeError: the engine the view follows offers no such dtype.
    """
    if view is View.VLLM:
        return vllm.vllm_dtypes(
            model.dtypes, model.architecture, recurrent=setup.recurrent, conv=setup.conv
        )
    if view is View.SGLANG_REPLAYSSM:
        # --enable-linear-replayssm-spec sets --mamba-ssm-dtype float32 when it is
        # unset, whatever the config says (sglang/srt/arg_groups/attention_hook.py:506-515).
        return sglang.sglang_dtypes(
            model.dtypes, recurrent=setup.recurrent or Dtype.FP32, conv=setup.conv
        )
    if view is View.SGLANG:
        return sglang.sglang_dtypes(model.dtypes, recurrent=setup.recurrent, conv=setup.conv)
    return StateDtypes(recurrent=setup.recurrent or Dtype.FP32, conv=setup.conv or Dtype.BF16)


class SnapshotFigures(TypedDict):
    """The figures of one view as JSON."""

    view: str
    engine: str
    setup: str
    recurrent_dtype: str
    conv_dtype: str
    recurrent_bytes_per_layer: int
    conv_column_bytes_per_layer: int
    requests: int
    base_bytes_per_request: int
    speculative_bytes_per_request: int
    base_padding_bytes: int
    speculative_padding_bytes: int
    base_bytes: int
    speculative_bytes: int
    total_bytes: int
    page_bytes: int | None
    padded_page_bytes: int | None
    block_size: int | None
    group_size: int | None
    gdn_groups: int | None
    block_bytes: int | None
    resident_blocks: int | None
    admission_blocks: int | None
    admission_bytes_per_request: int | None
    replayssm_record_bytes: int | None
    replayssm_cache_len: int | None


@dataclass(frozen=True)
class SnapshotSizing:
    """What a view holds for ``requests`` requests, on one GPU, over every GDN layer.

    ``*_per_request`` figures are one request's; ``*_padding_bytes`` what the
    engine's pools hold beyond the requests (vLLM's null block, SGLang's
    padding slots). ``base`` is what the view holds with no drafts; the
    speculative figure is what drafting adds.
    """

    view: View
    setup: str
    dtypes: StateDtypes
    recurrent_bytes_per_layer: int
    conv_column_bytes_per_layer: int
    requests: int
    base_bytes_per_request: int
    speculative_bytes_per_request: int
    base_padding_bytes: int = 0
    speculative_padding_bytes: int = 0
    plan: vllm.VllmPlan | None = None
    replayssm_record_bytes: int | None = None
    replayssm_cache_len: int | None = None

    @property
    def base_bytes(self) -> int:
        """The base state of every request, with the pools' padding."""
        return self.requests * self.base_bytes_per_request + self.base_padding_bytes

    @property
    def speculative_bytes(self) -> int:
        """What speculation adds for every request, with the pools' padding."""
        return self.requests * self.speculative_bytes_per_request + self.speculative_padding_bytes

    @property
    def total_bytes(self) -> int:
        """Base and speculative state together."""
        return self.base_bytes + self.speculative_bytes

    def as_dict(self) -> SnapshotFigures:
        """The figures as a JSON-ready mapping."""
        plan = self.plan
        page = None if plan is None else plan.layout
        return SnapshotFigures(
            view=self.view.value,
            engine=self.view.engine,
            setup=self.setup,
            recurrent_dtype=self.dtypes.recurrent.value,
            conv_dtype=self.dtypes.conv.value,
            recurrent_bytes_per_layer=self.recurrent_bytes_per_layer,
            conv_column_bytes_per_layer=self.conv_column_bytes_per_layer,
            requests=self.requests,
            base_bytes_per_request=self.base_bytes_per_request,
            speculative_bytes_per_request=self.speculative_bytes_per_request,
            base_padding_bytes=self.base_padding_bytes,
            speculative_padding_bytes=self.speculative_padding_bytes,
            base_bytes=self.base_bytes,
            speculative_bytes=self.speculative_bytes,
            total_bytes=self.total_bytes,
            page_bytes=None if page is None else page.page_bytes,
            padded_page_bytes=None if page is None else page.padded_page_bytes,
            block_size=None if page is None else page.block_size,
            group_size=None if plan is None else plan.group_size,
            gdn_groups=None if plan is None else plan.gdn_groups,
            block_bytes=None if plan is None else plan.block_bytes,
            resident_blocks=None if plan is None else plan.resident_blocks,
            admission_blocks=None if plan is None else plan.admission_blocks,
            admission_bytes_per_request=(
                None if plan is None else plan.admission_bytes_per_request
            ),
            replayssm_record_bytes=self.replayssm_record_bytes,
            replayssm_cache_len=self.replayssm_cache_len,
        )


def vllm_plan(model: Model, setup: Setup, num_drafts: int, /) -> vllm.VllmPlan:
    """VLLM's grouping and block for ``model`` at ``num_drafts`` drafts.

    Raises:
        UnsupportedDtypeError: a forced dtype vLLM does not offer.
    """
    return vllm.vllm_plan(
        model.dimensions,
        model.attention,
        view_dtypes(View.VLLM, model, setup),
        vllm.model_dtype(model.dtypes),
        setup.vllm,
        num_spec=num_drafts,
        attention_layers=model.attention_layers,
        drafter_layers=model.drafter_layers,
    )


def _vllm(  # noqa: PLR0913, PLR0917 - the view's inputs, each separate
    model: Model, setup: Setup, dtypes: StateDtypes, requests: int, s: int, h: int, column: int, /
) -> SnapshotSizing:
    plan = vllm_plan(model, setup, s)
    # What a decoding request holds with no drafts: no drafter layer, no
    # speculative blocks, a page without the widened window.
    held = vllm_plan(model, setup, 0).resident_bytes_per_request
    return SnapshotSizing(
        view=View.VLLM,
        setup=setup.describe(View.VLLM),
        dtypes=dtypes,
        requests=requests,
        base_bytes_per_request=held,
        speculative_bytes_per_request=plan.resident_bytes_per_request - held,
        # One block of the shared pool, whatever the layer count.
        base_padding_bytes=plan.null_block_bytes,
        plan=plan,
        recurrent_bytes_per_layer=h,
        conv_column_bytes_per_layer=column,
    )


def size_view(  # noqa: PLR0913 - each is a separate dimension of the review
    view: View,
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
    setup = setup or Setup()
    d = model.dimensions
    dtypes = view_dtypes(view, model, setup)
    layers, kernel = d.num_gdn_layers, d.conv_kernel
    h = d.recurrent_state_values * dtypes.recurrent.bytes
    column = d.conv_dim * dtypes.conv.bytes
    state = h + (kernel - 1) * column
    s = num_drafts
    if view is View.VLLM:
        return _vllm(model, setup, dtypes, requests, s, h, column)
    if view is View.MODULE:
        k = s + 1 if num_intermediates is None else num_intermediates
        return SnapshotSizing(
            view=view,
            setup=setup.describe(view),
            dtypes=dtypes,
            requests=requests,
            base_bytes_per_request=layers * state,
            speculative_bytes_per_request=layers * k * state,
            recurrent_bytes_per_layer=h,
            conv_column_bytes_per_layer=column,
        )
    if model.sglang_gdn_layers is not None:
        layers = model.sglang_gdn_layers
    drafts = s + 1
    windows = (drafts + kernel - 2) * column
    record, length = None, None
    if view is View.SGLANG:
        speculative = drafts * h + windows
    else:
        record, length = replayssm.replayssm_record_bytes(d, dtypes.conv), setup.replayssm_cache_len
        speculative = windows + length * record
    padding = sglang.POOL_PADDING_SLOTS * layers
    return SnapshotSizing(
        view=view,
        setup=setup.describe(view),
        dtypes=dtypes,
        requests=requests,
        base_bytes_per_request=layers * setup.sglang.state_slots_per_request * state,
        speculative_bytes_per_request=layers * speculative,
        base_padding_bytes=padding * state,
        speculative_padding_bytes=padding * speculative,
        replayssm_record_bytes=record,
        replayssm_cache_len=length,
        recurrent_bytes_per_layer=h,
        conv_column_bytes_per_layer=column,
    )


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
    speculative: Mapping[View, tuple[int, int]]

    def ratio(self, view: View, /) -> float | None:
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
            speculative={v.value: pair(f) for v, f in self.speculative.items()},
            speculative_to_seed_ring={v.value: self.ratio(v) for v in self.speculative},
        )


def sweep(  # noqa: PLR0913 - each is a separate dimension of the review
    model: Model,
    /,
    *,
    num_drafts: Iterable[int],
    slots: int,
    requests: int,
    views: Iterable[View],
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
        ring_dtype = view_dtypes(View.SGLANG, model, setup).conv
    except UnsupportedDtypeError:
        if {View.SGLANG, View.SGLANG_REPLAYSSM} & set(chosen):
            raise
        # No SGLang view is shown, so a dtype SGLang lacks is no reason to
        # refuse: its ring then keeps SGLang's own conv dtype.
        ring_dtype = sglang.sglang_dtypes(model.dtypes).conv
    record = replayssm.replayssm_record_bytes(d, ring_dtype)
    sglang_layers = model.sglang_gdn_layers or d.num_gdn_layers
    replay_ring = setup.replayssm_cache_len * record * sglang_layers
    rows = []
    for drafts in num_drafts:
        k = drafts + 1
        speculative = {}
        for view in chosen:
            count = slots if view is View.MODULE else requests
            sized = size_view(view, model, num_drafts=drafts, requests=count, setup=setup)
            speculative[view] = (sized.speculative_bytes_per_request, sized.speculative_bytes)
        rows.append(
            SweepRow(
                num_drafts=drafts,
                seed_ring=(seed_ring_bytes(d, k, 1), seed_ring_bytes(d, k, slots)),
                minimal_ring=(minimal_ring_bytes(d, k, 1), minimal_ring_bytes(d, k, slots)),
                replayssm_ring=(
                    replay_ring,
                    (requests + sglang.POOL_PADDING_SLOTS) * replay_ring,
                ),
                speculative=speculative,
            )
        )
    return rows
