# SPDX-License-Identifier: MIT OR Apache-2.0
"""What an engine's unit gives ``size``: its view, memory fits, startup lines and citations.

Each engine sizing follows is one unit (:mod:`.engines`), an instance of
:class:`EngineUnit` listed in :data:`.registry.ENGINES`; the command line,
the presentation and the plot call units through this interface alone, never
by their names. A unit sizes what the engine holds for speculative decoding
(:meth:`EngineUnit.size`), words its own rows, and offers the memory fits
(:class:`MemoryFit`) that print the engine's startup figures.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Final, TypedDict

from .wording import human

if TYPE_CHECKING:
    from ..releases import Release
    from .capacity import SglangFitReport, VllmFitReport
    from .dimensions import GdnDimensions
    from .dtypes import StateDtypes
    from .facts import Source
    from .state import Drafting, Model, Setup, SnapshotSizing
    from .wording import Row, Section

__all__ = [
    "NOT_CHECKED",
    "EngineUnit",
    "FitFlagsError",
    "FitKind",
    "FitOutcome",
    "Given",
    "MemoryFit",
    "MemoryFlag",
    "Need",
    "NeedFigures",
    "StartCheck",
    "StartFigures",
    "fraction",
    "layer_bytes",
    "whole",
]


class FitFlagsError(ValueError):
    """The memory flags given do not make one fit; the message says what to give."""


class FitKind(enum.Enum):
    """Which startup figures the flags ask for."""

    NONE = "none"
    #: vLLM with ``--kv-cache-memory-bytes``.
    VLLM_KV_BYTES = "vllm-kv-cache-memory-bytes"
    #: vLLM with ``--gpu-memory-utilization``.
    VLLM_UTILIZATION = "vllm-gpu-memory-utilization"
    #: SGLang with ``--mem-fraction-static``.
    SGLANG = "sglang"


#: The memory flags given, by argparse dest (None: not given).
Given = Mapping[str, int | float | None]


@dataclass(frozen=True)
class MemoryFlag:
    """One memory flag: its argparse dest, metavar (``BYTES``, ``FRACTION``, ``TOKENS``, ``N``).

    The metavar picks how the flag is read: every ``BYTES`` flag as
    :func:`.units.byte_count`, every ``TOKENS`` flag as :func:`.units.token_count`.
    """

    dest: str
    metavar: str
    help: str


class StartFigures(TypedDict):
    """A startup check as JSON."""

    starts: bool | None
    says: str
    source: str | None
    largest: str | None
    smallest_memory: str | None


@dataclass(frozen=True)
class StartCheck:
    """Whether the engine starts with the flags given, as its own startup check decides.

    ``starts`` is None where the unit models no startup check. When the engine
    refuses, ``says`` is its own message; ``largest`` names the flag's largest
    value that starts and ``smallest_memory`` the least memory that starts with
    the value given.
    """

    starts: bool | None
    says: str
    source: Source | None = None
    largest: str | None = None
    smallest_memory: str | None = None

    def line(self) -> str:
        """The check in one line, with what to change when the engine refuses."""
        if self.starts is None:
            return self.says
        verdict = "starts" if self.starts else "refuses to start"
        extra = [part for part in (self.largest, self.smallest_memory) if part]
        where = "" if self.source is None else f" ({self.source})"
        return "; ".join([f"{verdict}: {self.says}{where}", *extra])

    def as_dict(self) -> StartFigures:
        """The check as a JSON-ready mapping."""
        return StartFigures(
            starts=self.starts,
            says=self.says,
            source=None if self.source is None else str(self.source),
            largest=self.largest,
            smallest_memory=self.smallest_memory,
        )


#: What a fit says when its engine's unit models no startup check.
NOT_CHECKED: Final = StartCheck(None, "not modelled: this engine's unit has no startup check")


class NeedFigures(TypedDict):
    """One design's memory for the requests asked, as JSON."""

    design: str
    bytes: int | None
    says: str
    why: str | None


@dataclass(frozen=True)
class Need:
    """The memory one design needs for a number of requests at a context length."""

    design: str
    #: The bytes per GPU (None: no memory serves them, ``says`` tells why).
    bytes: int | None
    #: What the bytes are, as the engine's flag takes them.
    says: str
    #: Why the figure is not what a reader would expect of it (None: nothing to explain).
    why: str | None = None

    def as_dict(self) -> NeedFigures:
        """The need as a JSON-ready mapping."""
        return NeedFigures(design=self.design, bytes=self.bytes, says=self.says, why=self.why)


def whole(given: Given, dest: str, /) -> int:
    """The whole number given for ``dest``, which the fit's checks made sure of."""
    value = given[dest]
    assert isinstance(value, int)
    return value


def fraction(given: Given, dest: str, /) -> float:
    """The fraction given for ``dest``, which the fit's checks made sure of."""
    value = given[dest]
    assert isinstance(value, float)
    return value


class FitOutcome(abc.ABC):
    """What one fit makes of the memory: the engine's startup lines and their JSON."""

    @abc.abstractmethod
    def section(self) -> Section:
        """The startup figures of each design, as rows under a heading naming the flags."""

    @abc.abstractmethod
    def report(self) -> VllmFitReport | SglangFitReport:
        """The figures and their memory inputs, as JSON."""

    def start(self) -> StartCheck:
        """Whether the engine starts with these flags (:data:`NOT_CHECKED` unless the unit says)."""
        return NOT_CHECKED

    def why(self) -> list[Row]:
        """Each startup figure's reason in one short line (none unless the unit says)."""
        return []

    def requests(self) -> str | None:
        """How many requests each design fits, for the answer's first lines (None: not said)."""
        return None


class MemoryFit(abc.ABC):
    """One way to give an engine its memory: a leading flag, the flags it needs, the fit."""

    kind: ClassVar[FitKind]
    #: The flag (argparse dest) that asks for this fit.
    flag: ClassVar[str]
    #: The flags it needs besides, and those it takes if given.
    needs: ClassVar[tuple[str, ...]]
    optional: ClassVar[tuple[str, ...]] = ()
    #: This fit's own flags, declared here; the flags fits share are :data:`.memory.SHARED`.
    flags: ClassVar[tuple[MemoryFlag, ...]] = ()

    @abc.abstractmethod
    def fit(self, model: Model, setup: Setup, given: Given, num_drafts: int, /) -> FitOutcome:
        """The engine's startup figures for the memory ``given``, and each replay ring's.

        Raises:
            FitFlagsError: the flags leave the engine no memory.
            UnsupportedDtypeError: a forced dtype the engine does not offer.
            SizingOverflowError: a ring exceeds the usize range.
        """


def layer_bytes(dimensions: GdnDimensions, dtypes: StateDtypes, /) -> tuple[int, int]:
    """One GDN layer's recurrent state h and one conv column, in bytes, on one GPU."""
    return (
        dimensions.recurrent_state_values * dtypes.recurrent.bytes,
        dimensions.conv_dim * dtypes.conv.bytes,
    )


class EngineUnit(abc.ABC):
    """One engine's unit: its view of the state, its wording, its fits and its citations."""

    #: The view's name, as ``--engine`` takes it.
    name: ClassVar[str]
    #: The engine and version the view follows, as outputs name it.
    engine: ClassVar[str]
    #: How the plot's legend names the view's speculative state.
    plot_label: ClassVar[str]
    #: What the base and the speculative state are, per request and layer.
    base_formula: ClassVar[str]
    speculative_formula: ClassVar[str]
    #: The release it follows (None: no engine's).
    release: ClassVar[Release | None] = None
    #: Each fact of the view and where the release says it.
    sources: ClassVar[Mapping[str, Source]] = {}
    #: The memory fits that print the engine's startup figures.
    fits: ClassVar[tuple[MemoryFit, ...]] = ()
    #: Whether the view counts the module's slots rather than the engine's requests.
    seed_slots: ClassVar[bool] = False
    #: Whether its formulas count layers (vLLM's blocks already span them).
    per_layer: ClassVar[bool] = True
    #: Whether its pools hold padding beyond the requests.
    pads_pools: ClassVar[bool] = True

    @abc.abstractmethod
    def describe(self, setup: Setup, /) -> str:
        """The setup the view follows, in a line."""

    @abc.abstractmethod
    def dtypes(self, model: Model, setup: Setup, /) -> StateDtypes:
        """The state dtypes the view uses for ``model``, unless ``setup`` forces them.

        Raises:
            UnsupportedDtypeError: the engine offers no such dtype.
        """

    @abc.abstractmethod
    def size(self, model: Model, setup: Setup, drafting: Drafting, /) -> SnapshotSizing:
        """What the view holds for ``drafting``'s requests at its drafts per step.

        Raises:
            UnsupportedDtypeError: a forced dtype the engine does not offer.
        """

    def rows(self, sizing: SnapshotSizing, /) -> list[Row]:
        """The view's own report rows, after the state's (none unless it has its own)."""
        del sizing
        return []

    def speculative_says(self, sizing: SnapshotSizing, /) -> str:
        """What the speculative state is, for these figures (the view's formula unless it says)."""
        del sizing
        return self.speculative_formula

    def total_rows(self, sizing: SnapshotSizing, /) -> list[Row]:
        """The state's total, as one row (a view that holds some of it off the GPU says where)."""
        return [("base + speculative", human(sizing.total_bytes))]

    def in_host_memory(self, sizing: SnapshotSizing, /) -> bool:
        """Whether the speculative state lies in host memory, not on the GPU (no, unless said)."""
        del sizing
        return False

    def plot_says(self, *, host: bool) -> str:
        """How the plot's legend names the speculative state, on the GPU or in host memory."""
        del host
        return self.plot_label

    def need(
        self, model: Model, setup: Setup, /, *, requests: int, context: int, num_drafts: int
    ) -> tuple[str, list[Need]] | None:
        """The memory each design needs for ``requests`` of ``context`` tokens (None: no model).

        Returns what the memory is (a heading) and each design's need.

        Raises:
            UnsupportedDtypeError: a forced dtype the engine does not offer.
        """
        del model, setup, requests, context, num_drafts
        return None
