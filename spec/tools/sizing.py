# SPDX-License-Identifier: MIT OR Apache-2.0
"""Design-review sizing: the replay ring at preflight and at pool construction.

The ring sizes come from :mod:`spec.rollback`, the contract. The snapshot
figures beside them are an estimate for comparison, not part of the contract.

Model facts, from Hugging Face transformers' Qwen3-Next code
(``src/transformers/models/qwen3_next/configuration_qwen3_next.py`` and
``modeling_qwen3_next.py``): the fused ``in_proj_qkvz`` projects each token to
``2 * key_dim + 2 * value_dim`` values and ``in_proj_ba`` to ``2 * num_v_heads``
(a gate and a beta per value head); the causal convolution runs over
``2 * key_dim + value_dim`` channels; the gated delta rule keeps a
``head_k_dim x head_v_dim`` state per value head; and, without ``layer_types``,
layer ``i`` is linear attention unless ``(i + 1) % full_attention_interval == 0``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Final

from spec.rollback import (
    SsmReplayBytesOverflowError,
    UsizeRangeError,
    ssm_replay_ring_bytes,
    ssm_replay_row_bytes,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "DTYPE_BYTES",
    "ConfigError",
    "GdnDimensions",
    "ReplaySizing",
    "SizingOverflowError",
    "dimensions_from_config",
    "size_replay",
]

#: Bytes per value of the state dtypes a review may choose between.
DTYPE_BYTES: Final = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}


class ConfigError(ValueError):
    """A model config that does not describe GDN linear-attention layers."""


class SizingOverflowError(OverflowError):
    """A figure whose exact value does not fit the runtime's 64-bit usize.

    ``figure`` names it: ``row``, ``preflight`` or ``pool``.
    """

    def __init__(self, figure: str, /) -> None:
        super().__init__(f"the {figure} size exceeds the 64-bit usize range")
        self.figure: Final = figure


@dataclass(frozen=True)
class GdnDimensions:
    """The shapes of a model's Gated DeltaNet layers."""

    num_gdn_layers: int
    num_key_heads: int
    key_head_dim: int
    num_value_heads: int
    value_head_dim: int
    conv_kernel: int

    @property
    def key_dim(self) -> int:
        """Channels of q (and of k): key heads times their dimension."""
        return self.num_key_heads * self.key_head_dim

    @property
    def value_dim(self) -> int:
        """Channels of v (and of z): value heads times their dimension."""
        return self.num_value_heads * self.value_head_dim

    @property
    def qkvz_elems(self) -> int:
        """Values of one token's deinterleaved qkvz row."""
        return 2 * self.key_dim + 2 * self.value_dim

    @property
    def conv_state_values(self) -> int:
        """Values of one layer's conv state: kernel - 1 columns of q, k and v."""
        return (self.conv_kernel - 1) * (2 * self.key_dim + self.value_dim)

    @property
    def recurrent_state_values(self) -> int:
        """Values of one layer's recurrent state: a dk x dv matrix per value head."""
        return self.num_value_heads * self.key_head_dim * self.value_head_dim


def _positive_int(config: Mapping[str, object], key: str, /) -> int:
    if key not in config:
        raise ConfigError(f"the config has no {key!r}")
    value = config[key]
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"the config's {key!r} must be a positive integer, got {value!r}")
    return value


def _gdn_layer_count(config: Mapping[str, object], /) -> int:
    layer_types = config.get("layer_types")
    if layer_types is not None:
        if not isinstance(layer_types, list) or not all(isinstance(t, str) for t in layer_types):
            raise ConfigError("the config's 'layer_types' must be a list of strings")
        if "num_hidden_layers" in config:
            layers = _positive_int(config, "num_hidden_layers")
            if len(layer_types) != layers:
                raise ConfigError(
                    f"the config's 'layer_types' has {len(layer_types)} entries "
                    f"but 'num_hidden_layers' is {layers}"
                )
        return layer_types.count("linear_attention")
    layers = _positive_int(config, "num_hidden_layers")
    if "full_attention_interval" not in config:
        raise ConfigError("the config has neither 'layer_types' nor 'full_attention_interval'")
    interval = _positive_int(config, "full_attention_interval")
    # Every interval-th layer is full attention; counted, not enumerated, so
    # any layer count takes constant time.
    return layers - layers // interval


def dimensions_from_config(config: Mapping[str, object], /) -> GdnDimensions:
    """The GDN dimensions of a Hugging Face style ``config.json`` (Qwen3-Next names).

    A multimodal config's ``text_config`` is read when present.

    Raises:
        ConfigError: a field is missing or not a positive integer, or the
            config has no GDN layer.
    """
    text_config = config.get("text_config")
    if isinstance(text_config, dict):
        config = text_config
    dimensions = GdnDimensions(
        num_gdn_layers=_gdn_layer_count(config),
        num_key_heads=_positive_int(config, "linear_num_key_heads"),
        key_head_dim=_positive_int(config, "linear_key_head_dim"),
        num_value_heads=_positive_int(config, "linear_num_value_heads"),
        value_head_dim=_positive_int(config, "linear_value_head_dim"),
        conv_kernel=_positive_int(config, "linear_conv_kernel_dim"),
    )
    if dimensions.num_gdn_layers == 0:
        raise ConfigError("the config has no linear_attention (GDN) layer")
    return dimensions


@dataclass(frozen=True)
class ReplaySizing:
    """The figures a design review compares; ``*_bytes`` are exact integers."""

    num_gdn_layers: int
    qkvz_elems: int
    row_bytes: int
    preflight_k: int
    preflight_slots: int
    preflight_ring_bytes: int
    pool_k: int
    pool_slots: int
    pool_ring_bytes: int
    preflight_covers_pool: bool
    shortfall_bytes: int
    snapshot_estimate_bytes: int
    snapshot_recurrent_bytes_per_token_layer: int
    snapshot_conv_bytes_per_token_layer: int

    def as_dict(self) -> dict[str, object]:
        """The figures as a JSON-ready mapping."""
        return asdict(self)


def size_replay(  # noqa: PLR0913 - each is a separate dimension of the review
    dimensions: GdnDimensions,
    /,
    *,
    num_drafts: int,
    mtp_slots: int,
    mtp_state_slots: int,
    num_intermediates: int,
    state_dtype: str = "fp32",
    conv_dtype: str = "bf16",
) -> ReplaySizing:
    """Size the replay ring where the module says it is reserved and allocated.

    Preflight reserves with ``k = num_drafts + 1`` and ``mtp_state_slots``;
    the pool allocates with ``k = num_intermediates`` and ``mtp_slots + 1``
    (the dummy slot).

    Raises:
        SizingOverflowError: a size, or an argument of the module's functions,
            exceeds the usize range.
        KeyError: an unknown dtype name.
    """
    layers = dimensions.num_gdn_layers
    preflight_k, pool_k, pool_slots = num_drafts + 1, num_intermediates, mtp_slots + 1
    figure = "row"
    try:
        row = ssm_replay_row_bytes(dimensions.qkvz_elems, dimensions.num_value_heads)
        figure = "preflight"
        preflight = ssm_replay_ring_bytes(layers, row, preflight_k, mtp_state_slots)
        figure = "pool"
        pool = ssm_replay_ring_bytes(layers, row, pool_k, pool_slots)
    except (SsmReplayBytesOverflowError, UsizeRangeError):
        raise SizingOverflowError(figure) from None
    recurrent = dimensions.recurrent_state_values * DTYPE_BYTES[state_dtype]
    conv = dimensions.conv_state_values * DTYPE_BYTES[conv_dtype]
    return ReplaySizing(
        num_gdn_layers=layers,
        qkvz_elems=dimensions.qkvz_elems,
        row_bytes=row,
        preflight_k=preflight_k,
        preflight_slots=mtp_state_slots,
        preflight_ring_bytes=preflight,
        pool_k=pool_k,
        pool_slots=pool_slots,
        pool_ring_bytes=pool,
        preflight_covers_pool=preflight >= pool,
        shortfall_bytes=max(pool - preflight, 0),
        snapshot_estimate_bytes=pool_slots * pool_k * layers * (recurrent + conv),
        snapshot_recurrent_bytes_per_token_layer=recurrent,
        snapshot_conv_bytes_per_token_layer=conv,
    )
