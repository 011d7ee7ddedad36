# SPDX-License-Identifier: MIT OR Apache-2.0
"""What every view sizes: the model on one GPU, how the engines are served, one view's figures."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from .dtypes import ConfigDtypes, Dtype, StateDtypes

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .dimensions import AttentionDimensions, GdnDimensions, ModelLength

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
    max_length: ModelLength | None = None


@dataclass(frozen=True)
class Setup:
    """How each engine is served, and the dtypes a review forces on every view.

    ``options`` holds each engine's own setup by its registry name (``--engine``);
    an engine reads its entry itself and takes its defaults where there is none,
    so this layer names no engine.
    """

    options: Mapping[str, object] = field(default_factory=dict)
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
        """The figures as a JSON-ready mapping (an engine's unit fills its own layout's)."""
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
            page_bytes=None,
            padded_page_bytes=None,
            block_size=None,
            group_size=None,
            gdn_groups=None,
            block_bytes=None,
            resident_blocks=None,
            admission_blocks=None,
            admission_bytes_per_request=None,
            replayssm_record_bytes=self.replayssm_record_bytes,
            replayssm_cache_len=self.replayssm_cache_len,
        )
