# SPDX-License-Identifier: MIT OR Apache-2.0
"""What every view sizes: the model on one GPU, how the engines are served, one view's figures."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from . import replayssm, sglang, vllm
from .dtypes import ConfigDtypes, Dtype, StateDtypes

if TYPE_CHECKING:
    from .dimensions import AttentionDimensions, GdnDimensions

__all__ = ["Drafting", "Model", "Setup", "SnapshotFigures", "SnapshotSizing"]


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
    #: The longest ``--max-model-len`` vLLM starts with (None: the config names no length).
    max_length: vllm.ModelLength | None = None


@dataclass(frozen=True)
class Setup:
    """How each engine is served, and the dtypes a review forces on every view."""

    vllm: vllm.VllmSetup = field(default_factory=vllm.VllmSetup)
    sglang: sglang.SglangSetup = field(default_factory=sglang.SglangSetup)
    replayssm_cache_len: int = replayssm.DEFAULT_CACHE_LEN
    recurrent: Dtype | None = None
    conv: Dtype | None = None


@dataclass(frozen=True)
class Drafting:
    """What a view is sized for: drafts per step, and the requests (or slots) that draft."""

    num_drafts: int
    #: The engine's requests; for the module view, its slots.
    requests: int
    #: The module's verify window k (None: ``num_drafts + 1``); the engines' views ignore it.
    num_intermediates: int | None = None


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

    ``view`` is the view's name (``--engine``), ``engine`` the engine and
    version it follows. ``*_per_request`` figures are one request's;
    ``*_padding_bytes`` what the engine's pools hold beyond the requests
    (vLLM's null block, SGLang's padding slots). ``base`` is what the view
    holds with no drafts; the speculative figure is what drafting adds.
    """

    view: str
    engine: str
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
            view=self.view,
            engine=self.engine,
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
