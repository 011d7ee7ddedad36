# SPDX-License-Identifier: MIT OR Apache-2.0
"""One ``size`` review, below the command line: a typed request in, a typed report out.

:func:`model_from_config` reads the model one GPU holds; :func:`size_review`
sizes the seed's replay ring and one view (or, for several draft counts, a
sweep over the views), asks the view's engine for its startup figures when
memory flags were given, and returns a :class:`SizeReport` that
:mod:`.presentation` words and :meth:`SizeReport.as_dict` writes as JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TypedDict

from .. import SPEC_VERSION
from ..rollback import USIZE_MAX
from . import dimensions as dims
from . import rings
from .dtypes import dtypes_from_config
from .engines.replayssm.unit import SGLANG_REPLAYSSM
from .engines.vllm import facts as vllm
from .registry import ALIASES, DEFAULT, ENGINES
from .state import Drafting, Model, Setup, SnapshotFigures
from .views import SweepFigures, SweepRow, sweep

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .capacity import SglangFitReport, VllmFitReport
    from .state import SnapshotSizing
    from .unit import EngineUnit, FitOutcome, Given, MemoryFit, Need, NeedFigures, StartFigures

__all__ = [
    "STATE_FIGURE",
    "EngineNeed",
    "FlagValue",
    "NeedReport",
    "OneReviewError",
    "Review",
    "ReviewFigures",
    "ReviewOverflowError",
    "SizeInputs",
    "SizeReport",
    "SizeRequest",
    "SweepReport",
    "ViewFigures",
    "WhyFigures",
    "model_from_config",
    "model_from_dimensions",
    "size_review",
    "view_name",
]

#: How an overflow names a view's state: this, then the view's name.
STATE_FIGURE: Final = "state:"

#: The request fields that size one review only, as a sweep refuses them.
_ONE_REVIEW: Final = ("num_intermediates", "mtp_state_slots", "context")


class OneReviewError(ValueError):
    """A request field that sizes one review was given with several draft counts."""

    def __init__(self, name: str, /) -> None:
        super().__init__(f"{name} sizes one review, not a sweep")
        #: The request field.
        self.name: Final = name


class ReviewOverflowError(rings.SizingOverflowError):
    """A figure exceeds the usize range; the review's values beside it, to name them."""

    def __init__(
        self, figure: str, num_drafts: int, mtp_state_slots: int | None, k: int | None, /
    ) -> None:
        super().__init__(figure)
        #: The draft count that overflowed, and the slots and k the review used (None: a sweep).
        self.num_drafts: Final = num_drafts
        self.mtp_state_slots: Final = mtp_state_slots
        self.num_intermediates: Final = k


def view_name(name: str | None, /) -> str:
    """The view a name stands for (an old name as its new one; None: the default view)."""
    chosen = name or DEFAULT
    return ALIASES.get(chosen, chosen)


def model_from_config(config: Mapping[str, object], tp: int, /) -> Model:
    """The model one of ``tp`` GPUs holds, as a config describes it.

    Raises:
        ConfigError: the config is not one this sizing reads.
        TensorParallelError: ``tp`` does not divide the heads.
    """
    dimensions = dims.dimensions_from_config(config)
    attention = dims.attention_from_config(config)
    found = dtypes_from_config(config)
    attention_layers = dims.attention_layers_from_config(config)
    drafter_layers = dims.drafter_layers_from_config(config)
    sglang_layers = dims.interval_gdn_layers_from_config(config)
    architecture = dims.architecture_from_config(config)
    return Model(
        dimensions=dimensions.per_gpu(tp),
        attention=None if attention is None else attention.per_gpu(tp),
        dtypes=found,
        architecture=architecture,
        attention_layers=attention_layers,
        drafter_layers=drafter_layers,
        sglang_gdn_layers=sglang_layers,
        max_length=vllm.model_length(dims.text_config(config)),
    )


def model_from_dimensions(dimensions: dims.GdnDimensions, tp: int, /) -> Model:
    """The model one of ``tp`` GPUs holds, from explicit dimensions (a bf16 model, no attention).

    Raises:
        TensorParallelError: ``tp`` does not divide the heads.
    """
    return Model(dimensions=dimensions.per_gpu(tp))


#: A flag's value as the command line parsed it.
FlagValue = str | int | float | bool | list[int]


class SizeInputs(TypedDict):
    """What a review was asked, as JSON: the config, the engine and its release, every flag."""

    #: ``--config`` as typed, and the file read (None: explicit dimensions).
    config: str | None
    config_path: str | None
    engine: str
    #: The engine's release (``vLLM 0.33.0``; None: the module's own view).
    release: str | None
    num_drafts: list[int]
    #: Every flag's value, given or defaulted, by its name on the command line.
    flags: dict[str, FlagValue]


class WhyFigures(TypedDict):
    """One startup figure's reason, as JSON."""

    figure: str
    why: str


class NeedReport(TypedDict):
    """One engine's memory for the requests asked, as JSON."""

    engine: str
    heading: str
    designs: list[NeedFigures]


@dataclass(frozen=True)
class EngineNeed:
    """One engine's memory for ``--batch`` requests at ``--context``: a heading, each design's."""

    engine: str
    heading: str
    needs: list[Need]

    def as_dict(self) -> NeedReport:
        """The need as a JSON-ready mapping."""
        return NeedReport(
            engine=self.engine,
            heading=self.heading,
            designs=[need.as_dict() for need in self.needs],
        )


@dataclass(frozen=True)
class SizeRequest:
    """What one ``size`` asks: the model, the drafts and slots, the view, the memory.

    ``config`` or ``dimensions`` gives the model. Several ``num_drafts`` ask for
    a sweep over ``engine``'s view, or every view when it is None. ``fit`` is
    the memory fit the flags in ``memory`` (by argparse dest) asked for.
    """

    num_drafts: tuple[int, ...]
    mtp_slots: int
    config: Mapping[str, object] | None = None
    dimensions: dims.GdnDimensions | None = None
    mtp_state_slots: int | None = None
    num_intermediates: int | None = None
    engine: str | None = None
    setup: Setup = field(default_factory=Setup)
    fit: MemoryFit | None = None
    memory: Given = field(default_factory=dict)
    tp: int = 1
    batch: int | None = None
    #: Whether to size the plot's rows too.
    plot: bool = False
    #: With ``batch``: the context length the memory each engine needs is sized for.
    context: int | None = None
    #: ``--config`` as typed, the file it read, and every flag, for the JSON's record.
    config_name: str | None = None
    config_path: str | None = None
    flags: Mapping[str, FlagValue] = field(default_factory=dict)


@dataclass(frozen=True)
class Review:
    """One review's figures: the seed's ring, the view's state, the engine's fit."""

    replay: rings.ReplaySizing
    unit: EngineUnit
    snapshot: SnapshotSizing
    #: One request's speculative state over one slot's seed ring (None: no ring).
    ratio: float | None
    fit: FitOutcome | None


class ReviewFigures(TypedDict):
    """One review as JSON."""

    spec_version: str
    inputs: SizeInputs
    tp: int
    replay: rings.ReplayFigures
    snapshot: SnapshotFigures
    fit: VllmFitReport | SglangFitReport | None
    snapshot_to_replay: float | None
    preflight_covers_pool: bool
    shortfall_bytes: int
    #: Whether the engine starts, and each startup figure's reason (None, []: no fit).
    start: StartFigures | None
    why: list[WhyFigures]
    needs: list[NeedReport]


class ViewFigures(TypedDict):
    """What a sweep's view follows, as JSON."""

    engine: str
    setup: str
    recurrent: str
    conv: str


class SweepReport(TypedDict):
    """A sweep as JSON."""

    spec_version: str
    inputs: SizeInputs
    tp: int
    slots: int
    requests: int
    requests_from: str
    minimal_ring_is: str
    replayssm_ring_follows: str
    views: dict[str, ViewFigures]
    rows: list[SweepFigures]


@dataclass(frozen=True)
class SizeReport:
    """What :func:`size_review` found: one review, or a sweep's rows (and a plot's)."""

    model: Model
    setup: Setup
    tp: int
    #: The seed's slots (``--batch``, or ``--mtp-slots`` + 1) and the engines' requests.
    slots: int
    requests: int
    batch: int | None
    #: Whether explicit dimensions, not a config, gave the model.
    explicit: bool
    #: The views a sweep or plot shows.
    views: list[EngineUnit]
    review: Review | None
    rows: list[SweepRow] | None
    #: What was asked, for the JSON's record.
    inputs: SizeInputs
    #: Each engine's memory for ``--batch`` requests at ``--context`` (empty: not asked).
    needs: list[EngineNeed] = field(default_factory=list)

    def as_dict(self) -> ReviewFigures | SweepReport:
        """The report as a JSON-ready mapping.

        Raises:
            UnsupportedDtypeError: a forced dtype a swept view's engine does not offer.
        """
        if self.review is not None:
            r = self.review
            return ReviewFigures(
                spec_version=SPEC_VERSION,
                inputs=self.inputs,
                tp=self.tp,
                replay=r.replay.as_dict(),
                snapshot=r.snapshot.as_dict(),
                fit=None if r.fit is None else r.fit.report(),
                snapshot_to_replay=r.ratio,
                preflight_covers_pool=r.replay.preflight_covers_pool,
                shortfall_bytes=r.replay.shortfall_bytes,
                start=None if r.fit is None else r.fit.start().as_dict(),
                why=[]
                if r.fit is None
                else [WhyFigures(figure=label, why=text) for label, text in r.fit.why()],
                needs=[need.as_dict() for need in self.needs],
            )
        views = {}
        for unit in self.views:
            chosen = unit.dtypes(self.model, self.setup)
            views[unit.name] = ViewFigures(
                engine=unit.engine,
                setup=unit.describe(self.setup),
                recurrent=chosen.recurrent.value,
                conv=chosen.conv.value,
            )
        return SweepReport(
            spec_version=SPEC_VERSION,
            inputs=self.inputs,
            tp=self.tp,
            slots=self.slots,
            requests=self.requests,
            requests_from="--batch" if self.batch else "--mtp-slots",
            minimal_ring_is=rings.MINIMAL_RING_SCOPE,
            replayssm_ring_follows=(
                f"{SGLANG_REPLAYSSM.engine}, {SGLANG_REPLAYSSM.describe(self.setup)}"
            ),
            views=views,
            rows=[row.as_dict() for row in self.rows or []],
        )


def _model(request: SizeRequest, /) -> Model:
    if request.config is not None:
        return model_from_config(request.config, request.tp)
    if request.dimensions is None:
        raise ValueError("give config or dimensions")
    return model_from_dimensions(request.dimensions, request.tp)


def _rows(request: SizeRequest, model: Model, views: list[EngineUnit], /) -> list[SweepRow]:
    rows = []
    for drafts in request.num_drafts:
        try:
            rows += sweep(
                model,
                num_drafts=[drafts],
                slots=request.batch or request.mtp_slots + 1,
                requests=request.batch or request.mtp_slots,
                views=[unit.name for unit in views],
                setup=request.setup,
            )
        except rings.SizingOverflowError as error:
            # The one draft count that overflowed, as a single review would name it.
            raise ReviewOverflowError(error.figure, drafts, None, None) from None
        held = {**rows[-1].speculative, SGLANG_REPLAYSSM.name: rows[-1].replayssm_ring}
        for view, (_, per_gpu) in held.items():
            if per_gpu > USIZE_MAX:
                raise ReviewOverflowError(f"{STATE_FIGURE}{view}", drafts, None, None)
    return rows


def _review(request: SizeRequest, model: Model, /) -> Review:
    (drafts,) = request.num_drafts
    state_slots = (
        request.mtp_slots + 1 if request.mtp_state_slots is None else request.mtp_state_slots
    )
    k = drafts + 1 if request.num_intermediates is None else request.num_intermediates
    try:
        replay = rings.size_replay(
            model.dimensions,
            num_drafts=drafts,
            mtp_slots=request.mtp_slots,
            mtp_state_slots=state_slots,
            num_intermediates=k,
            batch=request.batch,
        )
    except rings.SizingOverflowError as error:
        raise ReviewOverflowError(error.figure, drafts, state_slots, k) from None
    unit = ENGINES[view_name(request.engine)]
    # The module view covers the seed's slots; the engines their own
    # requests, to which they add their pools' padding.
    requests = request.batch or (replay.pool_slots if unit.seed_slots else request.mtp_slots)
    snapshot = unit.size(model, request.setup, Drafting(drafts, requests, k))
    if snapshot.total_bytes > USIZE_MAX:
        # No machine holds it: one line naming the flags, not a figure in EiB.
        raise ReviewOverflowError(f"{STATE_FIGURE}{unit.name}", drafts, state_slots, k)
    # The headline ratio, per request on both sides so that no count of
    # requests or slots changes it: what one request's drafting holds over
    # one slot's ring.
    ring = replay.pool_ring_bytes // replay.pool_slots
    try:
        fit = (
            None
            if request.fit is None
            else request.fit.fit(model, request.setup, request.memory, drafts)
        )
    except rings.SizingOverflowError as error:
        raise ReviewOverflowError(error.figure, drafts, state_slots, k) from None
    return Review(
        replay=replay,
        unit=unit,
        snapshot=snapshot,
        ratio=snapshot.speculative_bytes_per_request / ring if ring else None,
        fit=fit,
    )


def _inputs(request: SizeRequest, /) -> SizeInputs:
    unit = ENGINES[view_name(request.engine)]
    return SizeInputs(
        config=request.config_name,
        config_path=request.config_path,
        engine=unit.name,
        release=None if unit.release is None else unit.release.engine,
        num_drafts=list(request.num_drafts),
        flags=dict(request.flags),
    )


def _needs(request: SizeRequest, model: Model, /) -> list[EngineNeed]:
    if request.context is None or request.batch is None:
        return []
    units = list(ENGINES.values())
    if request.engine is not None:
        units = [ENGINES[view_name(request.engine)]]
    found = []
    for unit in units:
        need = unit.need(
            model,
            request.setup,
            requests=request.batch,
            context=request.context,
            num_drafts=request.num_drafts[0],
        )
        if need is not None:
            found.append(EngineNeed(unit.name, *need))
    return found


def size_review(request: SizeRequest, /) -> SizeReport:
    """Size what ``request`` asks.

    Raises:
        ConfigError: the config is not one this sizing reads.
        TensorParallelError: ``tp`` does not divide the heads.
        OneReviewError: a sweep given a field that sizes one review.
        ReviewOverflowError: a figure exceeds the runtime's usize.
        UnsupportedDtypeError: a forced dtype a view's engine does not offer.
        FitFlagsError: the memory flags leave the engine no memory.
    """
    model = _model(request)
    sweeping = len(request.num_drafts) > 1
    if sweeping:
        for name in _ONE_REVIEW:
            if getattr(request, name) is not None:
                raise OneReviewError(name)
    views = (
        list(ENGINES.values()) if request.engine is None else [ENGINES[view_name(request.engine)]]
    )
    review = None if sweeping else _review(request, model)
    return SizeReport(
        model=model,
        setup=request.setup,
        tp=request.tp,
        slots=request.batch or request.mtp_slots + 1,
        requests=request.batch or request.mtp_slots,
        batch=request.batch,
        explicit=request.config is None,
        views=views,
        review=review,
        rows=_rows(request, model, views) if sweeping or request.plot else None,
        inputs=_inputs(request),
        needs=[] if sweeping else _needs(request, model),
    )
