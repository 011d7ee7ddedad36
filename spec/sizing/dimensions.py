# SPDX-License-Identifier: MIT OR Apache-2.0
"""Design-review sizing: the replay ring, and the snapshot state engines hold instead.

The ring sizes come from :mod:`spec.rollback`, the contract. The snapshot
figures beside them follow each engine's own state layout (``docs/sizing.md``
names the source files); they are estimates for comparison, not part of the
contract.

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

import enum
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final, TypedDict

from spec.replay.rows import minimal_replay_ring_bytes, minimal_replay_row_bytes
from spec.rollback import (
    SsmReplayBytesOverflowError,
    UsizeRangeError,
    ssm_replay_ring_bytes,
    ssm_replay_row_bytes,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = [
    "DTYPE_BYTES",
    "ConfigDtypes",
    "ConfigError",
    "Engine",
    "GdnDimensions",
    "NotGatedDeltaNetError",
    "ReplayFigures",
    "ReplaySizing",
    "SizingOverflowError",
    "SnapshotFigures",
    "SnapshotSizing",
    "StateDtypes",
    "SweepFigures",
    "SweepRow",
    "TensorParallelError",
    "dimensions_from_config",
    "dtypes_from_config",
    "engine_dtypes",
    "size_replay",
    "size_snapshot",
    "sweep",
]

#: Bytes per value of the state dtypes a review may choose between.
DTYPE_BYTES: Final = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}

#: The dtype names a Hugging Face config writes, and the name used here.
_CONFIG_DTYPE_NAMES: Final = {
    "float32": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "float8_e4m3fn": "fp8",
}

#: The GDN fields every Gated DeltaNet config carries.
_GDN_FIELDS: Final = (
    "linear_num_key_heads",
    "linear_key_head_dim",
    "linear_num_value_heads",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
)


class Engine(enum.Enum):
    """Whose snapshot-state layout a snapshot figure follows."""

    #: Engine-neutral: ``k`` full states (recurrent and conv) per slot.
    MODULE = "module"
    #: vLLM: ``1 + num_drafts`` blocks, each with a widened conv window.
    VLLM = "vllm"
    #: vLLM with prefix caching in "align" mode: one block more.
    VLLM_ALIGN = "vllm-align"
    #: SGLang, one draft chain: ``D`` intermediate states, one shared conv window.
    SGLANG = "sglang"


class ConfigError(ValueError):
    """A model config whose GDN fields cannot be read."""


class NotGatedDeltaNetError(ConfigError):
    """A model config that is not a Gated DeltaNet model at all."""


class TensorParallelError(ValueError):
    """A tensor-parallel size that does not split the heads evenly.

    ``heads`` names the heads (``key heads`` or ``value heads``), ``count``
    how many there are and ``tp`` the size that does not divide them.
    """

    def __init__(self, tp: int, count: int, heads: str, /) -> None:
        super().__init__(f"{tp} does not divide the {count} {heads}")
        self.tp: Final = tp
        self.count: Final = count
        self.heads: Final = heads


class SizingOverflowError(OverflowError):
    """A figure whose exact value does not fit the runtime's 64-bit usize.

    ``figure`` names it: ``row``, ``preflight``, ``pool``, ``batch`` or, in a
    sweep, ``ring``.
    """

    def __init__(self, figure: str, /) -> None:
        super().__init__(f"the {figure} size exceeds the 64-bit usize range")
        self.figure: Final = figure


@dataclass(frozen=True)
class GdnDimensions:
    """The shapes of a model's Gated DeltaNet layers (on one GPU, once split)."""

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
    def conv_dim(self) -> int:
        """Channels the causal convolution runs over: q, k and v."""
        return 2 * self.key_dim + self.value_dim

    @property
    def conv_state_values(self) -> int:
        """Values of one layer's conv state: kernel - 1 columns of q, k and v."""
        return (self.conv_kernel - 1) * self.conv_dim

    @property
    def recurrent_state_values(self) -> int:
        """Values of one layer's recurrent state: a dk x dv matrix per value head."""
        return self.num_value_heads * self.key_head_dim * self.value_head_dim

    def per_gpu(self, tp: int, /) -> GdnDimensions:
        """The dimensions one of ``tp`` tensor-parallel GPUs holds.

        Both engines shard by head: key and value heads, and so the conv
        channels, divide by ``tp``; the head dimensions do not change.

        Raises:
            TensorParallelError: ``tp`` does not divide the key or value heads.
        """
        if self.num_key_heads % tp:
            raise TensorParallelError(tp, self.num_key_heads, "key heads")
        if self.num_value_heads % tp:
            raise TensorParallelError(tp, self.num_value_heads, "value heads")
        return replace(
            self,
            num_key_heads=self.num_key_heads // tp,
            num_value_heads=self.num_value_heads // tp,
        )


def _text_config(config: Mapping[str, object], /) -> Mapping[str, object]:
    text_config = config.get("text_config")
    return text_config if isinstance(text_config, dict) else config


def _positive_int(config: Mapping[str, object], key: str, /) -> int:
    if key not in config:
        raise ConfigError(f"the config has no {key!r}")
    value = config[key]
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"the config's {key!r} must be a positive integer, got {value!r}")
    return value


def _no_gdn_layer(layers: int, /) -> NotGatedDeltaNetError:
    return NotGatedDeltaNetError(
        f"not a Gated DeltaNet config: no linear_attention (GDN) layer among its {layers} layers"
    )


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
        count = layer_types.count("linear_attention")
        if count == 0:
            raise _no_gdn_layer(len(layer_types))
        return count
    layers = _positive_int(config, "num_hidden_layers")
    if "full_attention_interval" not in config:
        raise ConfigError("the config has neither 'layer_types' nor 'full_attention_interval'")
    interval = _positive_int(config, "full_attention_interval")
    # Every interval-th layer is full attention; counted, not enumerated, so
    # any layer count takes constant time.
    count = layers - layers // interval
    if count == 0:
        raise _no_gdn_layer(layers)
    return count


def _refuse_kda(config: Mapping[str, object], /) -> None:
    # Kimi Linear's KDA keeps a per-channel gate and its own field names; sizing
    # it with GDN's formulas would print plausible, wrong figures.
    if "linear_attn_config" in config:
        raise NotGatedDeltaNetError(
            "not a Gated DeltaNet config: it has 'linear_attn_config' "
            "(Kimi Linear's KDA layers), which this sizing does not model"
        )


def _refuse_other_families(config: Mapping[str, object], /) -> None:
    _refuse_kda(config)
    if not any(field in config for field in _GDN_FIELDS):
        model_type = config.get("model_type")
        found = f"model_type {model_type!r}" if isinstance(model_type, str) else "no model_type"
        raise NotGatedDeltaNetError(
            f"not a Gated DeltaNet config: none of the linear_* GDN fields ({found})"
        )


def dimensions_from_config(config: Mapping[str, object], /) -> GdnDimensions:
    """The GDN dimensions of a Hugging Face style ``config.json`` (Qwen3-Next names).

    A multimodal config's ``text_config`` (Qwen3.5) is read when present.

    Raises:
        NotGatedDeltaNetError: the config has no GDN layer, or describes
            another linear-attention family (Kimi Linear's KDA).
        ConfigError: a field is missing or not a positive integer, or
            ``layer_types`` does not list every layer.
    """
    _refuse_kda(config)
    config = _text_config(config)
    _refuse_other_families(config)
    return GdnDimensions(
        num_gdn_layers=_gdn_layer_count(config),
        num_key_heads=_positive_int(config, "linear_num_key_heads"),
        key_head_dim=_positive_int(config, "linear_key_head_dim"),
        num_value_heads=_positive_int(config, "linear_num_value_heads"),
        value_head_dim=_positive_int(config, "linear_value_head_dim"),
        conv_kernel=_positive_int(config, "linear_conv_kernel_dim"),
    )


@dataclass(frozen=True)
class ConfigDtypes:
    """The dtypes a config names: the model's and, if set, the SSM state's."""

    model: str | None = None
    ssm: str | None = None


def _config_dtype(config: Mapping[str, object], key: str, /) -> str | None:
    value = config.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or value not in _CONFIG_DTYPE_NAMES:
        names = ", ".join(repr(name) for name in _CONFIG_DTYPE_NAMES)
        raise ConfigError(f"the config's {key!r} is {value!r}, not one of {names}")
    return _CONFIG_DTYPE_NAMES[value]


def dtypes_from_config(config: Mapping[str, object], /) -> ConfigDtypes:
    """The model dtype (``torch_dtype``, or ``dtype``) and ``mamba_ssm_dtype`` of a config.

    Read from ``text_config`` when present, as SGLang does for Qwen3.5.

    Raises:
        ConfigError: a dtype field names a dtype this sizing does not know.
    """
    config = _text_config(config)
    model_key = "torch_dtype" if "torch_dtype" in config else "dtype"
    return ConfigDtypes(
        model=_config_dtype(config, model_key), ssm=_config_dtype(config, "mamba_ssm_dtype")
    )


@dataclass(frozen=True)
class StateDtypes:
    """The dtypes of the recurrent (h) state and of the conv state."""

    recurrent: str
    conv: str


def engine_dtypes(
    engine: Engine,
    config: ConfigDtypes,
    /,
    *,
    recurrent: str | None = None,
    conv: str | None = None,
) -> StateDtypes:
    """The state dtypes ``engine`` uses for a model, unless the review overrides them.

    module: fp32 h and bf16 conv, the module's own choice. vLLM: both take the
    model dtype (``torch_dtype``; bf16 when the config names none), as with
    ``--mamba-ssm-cache-dtype auto``. SGLang: h is ``mamba_ssm_dtype`` when the
    config sets it, else fp32; conv is bf16.

    Raises:
        KeyError: an override names an unknown dtype.
    """
    if engine is Engine.MODULE:
        chosen = StateDtypes(recurrent="fp32", conv="bf16")
    elif engine in {Engine.VLLM, Engine.VLLM_ALIGN}:
        model = config.model or "bf16"
        chosen = StateDtypes(recurrent=model, conv=model)
    else:
        chosen = StateDtypes(recurrent=config.ssm or "fp32", conv="bf16")
    chosen = StateDtypes(recurrent=recurrent or chosen.recurrent, conv=conv or chosen.conv)
    for name in (chosen.recurrent, chosen.conv):
        if name not in DTYPE_BYTES:
            raise KeyError(name)
    return chosen


class ReplayFigures(TypedDict):
    """The replay figures as JSON."""

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
    batch: int | None
    batch_ring_bytes: int | None
    #: Review note (docs/replay.md): the row with z left out, which is all a rebuild reads.
    minimal_replay_row_bytes: int
    #: The pool's ring of minimal rows.
    minimal_pool_ring_bytes: int


@dataclass(frozen=True)
class ReplaySizing:
    """The replay-ring figures a design review compares; ``*_bytes`` are exact."""

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
    minimal_replay_row_bytes: int
    minimal_pool_ring_bytes: int
    batch: int | None = None
    batch_ring_bytes: int | None = None

    def as_dict(self) -> ReplayFigures:
        """The figures as a JSON-ready mapping."""
        return ReplayFigures(
            num_gdn_layers=self.num_gdn_layers,
            qkvz_elems=self.qkvz_elems,
            row_bytes=self.row_bytes,
            preflight_k=self.preflight_k,
            preflight_slots=self.preflight_slots,
            preflight_ring_bytes=self.preflight_ring_bytes,
            pool_k=self.pool_k,
            pool_slots=self.pool_slots,
            pool_ring_bytes=self.pool_ring_bytes,
            preflight_covers_pool=self.preflight_covers_pool,
            shortfall_bytes=self.shortfall_bytes,
            batch=self.batch,
            batch_ring_bytes=self.batch_ring_bytes,
            minimal_replay_row_bytes=self.minimal_replay_row_bytes,
            minimal_pool_ring_bytes=self.minimal_pool_ring_bytes,
        )


def size_replay(  # noqa: PLR0913 - each is a separate dimension of the review
    dimensions: GdnDimensions,
    /,
    *,
    num_drafts: int,
    mtp_slots: int,
    mtp_state_slots: int,
    num_intermediates: int,
    batch: int | None = None,
) -> ReplaySizing:
    """Size the replay ring where the module says it is reserved and allocated.

    Preflight reserves with ``k = num_drafts + 1`` and ``mtp_state_slots``;
    the pool allocates with ``k = num_intermediates`` and ``mtp_slots + 1``
    (the dummy slot). ``batch`` adds the pool's ring for that many requests.

    Raises:
        SizingOverflowError: a size, or an argument of the module's functions,
            exceeds the usize range.
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
        figure = "batch"
        batch_ring = None if batch is None else ssm_replay_ring_bytes(layers, row, pool_k, batch)
        figure = "row"
        conv = dimensions.conv_dim
        minimal_row = minimal_replay_row_bytes(conv, dimensions.num_value_heads)
        figure = "pool"
        minimal_ring = minimal_replay_ring_bytes(
            layers, conv, dimensions.num_value_heads, pool_k, pool_slots
        )
    except (SsmReplayBytesOverflowError, UsizeRangeError):
        raise SizingOverflowError(figure) from None
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
        batch=batch,
        batch_ring_bytes=batch_ring,
        minimal_replay_row_bytes=minimal_row,
        minimal_pool_ring_bytes=minimal_ring,
    )


class SnapshotFigures(TypedDict):
    """The snapshot figures of one engine view as JSON."""

    engine: str
    recurrent_dtype: str
    conv_dtype: str
    recurrent_bytes_per_layer: int
    conv_column_bytes_per_layer: int
    slots: int
    base_bytes: int
    speculative_bytes: int
    total_bytes: int
    batch: int | None
    batch_base_bytes: int | None
    batch_speculative_bytes: int | None


@dataclass(frozen=True)
class SnapshotSizing:
    """What an engine view holds for speculative decoding by snapshots.

    ``base_bytes`` is what the engine holds with no drafts; the speculative
    figure is what drafting adds. Both cover ``slots`` requests and every GDN
    layer, on one GPU.
    """

    engine: Engine
    dtypes: StateDtypes
    recurrent_bytes_per_layer: int
    conv_column_bytes_per_layer: int
    slots: int
    base_bytes_per_request: int
    speculative_bytes_per_request: int
    batch: int | None = None

    @property
    def base_bytes(self) -> int:
        """The base state of ``slots`` requests."""
        return self.slots * self.base_bytes_per_request

    @property
    def speculative_bytes(self) -> int:
        """What speculation adds for ``slots`` requests."""
        return self.slots * self.speculative_bytes_per_request

    @property
    def total_bytes(self) -> int:
        """Base and speculative state together."""
        return self.base_bytes + self.speculative_bytes

    def as_dict(self) -> SnapshotFigures:
        """The figures as a JSON-ready mapping."""
        batch = self.batch
        return SnapshotFigures(
            engine=self.engine.value,
            recurrent_dtype=self.dtypes.recurrent,
            conv_dtype=self.dtypes.conv,
            recurrent_bytes_per_layer=self.recurrent_bytes_per_layer,
            conv_column_bytes_per_layer=self.conv_column_bytes_per_layer,
            slots=self.slots,
            base_bytes=self.base_bytes,
            speculative_bytes=self.speculative_bytes,
            total_bytes=self.total_bytes,
            batch=batch,
            batch_base_bytes=None if batch is None else batch * self.base_bytes_per_request,
            batch_speculative_bytes=(
                None if batch is None else batch * self.speculative_bytes_per_request
            ),
        )


def size_snapshot(  # noqa: PLR0913 - each is a separate dimension of the review
    dimensions: GdnDimensions,
    engine: Engine,
    /,
    *,
    num_drafts: int,
    slots: int,
    dtypes: StateDtypes,
    num_intermediates: int | None = None,
    batch: int | None = None,
) -> SnapshotSizing:
    """Size the snapshot state ``engine`` holds for ``num_drafts`` drafts per step.

    Per request and GDN layer, with h the recurrent state, c one conv column
    (``conv_dim`` values), K the conv kernel, s = ``num_drafts`` and
    k = ``num_intermediates`` (default s + 1):

    - module: base h + (K-1)c; speculative k (h + (K-1)c), the dense layout;
    - vllm: ``1 + s`` blocks of h + (K-1+s)c, less the base h + (K-1)c;
    - vllm-align: ``2 + s`` such blocks, less the base 2 (h + (K-1)c);
    - sglang: base h + (K-1)c; speculative D h + (D+K-2)c with D = s + 1.

    Raises:
        KeyError: an unknown dtype name.
    """
    layers, kernel = dimensions.num_gdn_layers, dimensions.conv_kernel
    h = dimensions.recurrent_state_values * DTYPE_BYTES[dtypes.recurrent]
    column = dimensions.conv_dim * DTYPE_BYTES[dtypes.conv]
    state = h + (kernel - 1) * column
    s = num_drafts
    if engine is Engine.MODULE:
        k = s + 1 if num_intermediates is None else num_intermediates
        base, speculative = state, k * state
    elif engine is Engine.VLLM:
        base = state
        speculative = (1 + s) * (h + (kernel - 1 + s) * column) - base
    elif engine is Engine.VLLM_ALIGN:
        base = 2 * state
        speculative = (2 + s) * (h + (kernel - 1 + s) * column) - base
    else:
        drafts = s + 1
        base, speculative = state, drafts * h + (drafts + kernel - 2) * column
    return SnapshotSizing(
        engine=engine,
        dtypes=dtypes,
        recurrent_bytes_per_layer=h,
        conv_column_bytes_per_layer=column,
        slots=slots,
        base_bytes_per_request=layers * base,
        speculative_bytes_per_request=layers * speculative,
        batch=batch,
    )


class SweepFigures(TypedDict):
    """One sweep row as JSON."""

    num_drafts: int
    replay_ring_bytes: int
    snapshot_bytes: dict[str, int]
    snapshot_to_replay: dict[str, float | None]


@dataclass(frozen=True)
class SweepRow:
    """The replay ring and each view's speculative snapshot state at one draft count."""

    num_drafts: int
    replay_ring_bytes: int
    snapshot_bytes: Mapping[Engine, int]

    def ratio(self, engine: Engine, /) -> float | None:
        """Snapshot state over replay ring; None when there is no ring (no drafts)."""
        if self.replay_ring_bytes == 0:
            return None
        return self.snapshot_bytes[engine] / self.replay_ring_bytes

    def as_dict(self) -> SweepFigures:
        """The row as a JSON-ready mapping."""
        return SweepFigures(
            num_drafts=self.num_drafts,
            replay_ring_bytes=self.replay_ring_bytes,
            snapshot_bytes={e.value: b for e, b in self.snapshot_bytes.items()},
            snapshot_to_replay={e.value: self.ratio(e) for e in self.snapshot_bytes},
        )


def sweep(
    dimensions: GdnDimensions,
    /,
    *,
    num_drafts: Iterable[int],
    requests: int,
    dtypes: Mapping[Engine, StateDtypes],
) -> list[SweepRow]:
    """One row per draft count: the pool's ring (k = drafts + 1) and each view's state.

    Every figure covers ``requests`` requests (slots, or a batch).

    Raises:
        SizingOverflowError: a ring size exceeds the usize range (``figure``
            is ``row`` or ``ring``).
        KeyError: an unknown dtype name.
    """
    layers = dimensions.num_gdn_layers
    try:
        row = ssm_replay_row_bytes(dimensions.qkvz_elems, dimensions.num_value_heads)
    except (SsmReplayBytesOverflowError, UsizeRangeError):
        raise SizingOverflowError("row") from None
    rows = []
    for drafts in num_drafts:
        try:
            ring = ssm_replay_ring_bytes(layers, row, drafts + 1, requests)
        except (SsmReplayBytesOverflowError, UsizeRangeError):
            raise SizingOverflowError("ring") from None
        snapshot = {
            engine: size_snapshot(
                dimensions, engine, num_drafts=drafts, slots=requests, dtypes=chosen
            ).speculative_bytes
            for engine, chosen in dtypes.items()
        }
        rows.append(SweepRow(drafts, ring, snapshot))
    return rows
