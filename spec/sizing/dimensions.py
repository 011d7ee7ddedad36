# SPDX-License-Identifier: MIT OR Apache-2.0
"""The shapes sizing reads from a model config: its GDN layers and its attention page.

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

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "AttentionDimensions",
    "ConfigError",
    "GdnDimensions",
    "ModelLength",
    "NotGatedDeltaNetError",
    "TensorParallelError",
    "architecture_from_config",
    "attention_from_config",
    "attention_layers_from_config",
    "dimensions_from_config",
    "drafter_layers_from_config",
    "interval_gdn_layers_from_config",
    "text_config",
]

#: The GDN fields every Gated DeltaNet config carries.
_GDN_FIELDS: Final = (
    "linear_num_key_heads",
    "linear_key_head_dim",
    "linear_num_value_heads",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
)


#: transformers' class defaults (5.19.0) for the attention fields a config may leave out:
#: (num_key_value_heads, head_dim) by text model_type. Both engines load these classes
#: (``configuration_qwen3_next.py`` lines 96-107, ``configuration_qwen3_5.py`` 86-97,
#: ``configuration_qwen3_5_moe.py`` 92-103), so the page they pad to always has them.
_ATTENTION_DEFAULTS: Final = {
    "qwen3_next": (2, 256),
    "qwen3_5_text": (4, 256),
    "qwen3_5_moe_text": (2, 256),
}
#: Multimodal model types whose language model's fields live in ``text_config``.
_NESTED_MODEL_TYPES: Final = frozenset({"qwen3_5", "qwen3_5_moe"})
#: The field naming the MTP drafter's layers, by text model_type, as vLLM reads it
#: (``qwen3_next_mtp.py`` line 63, ``qwen3_5_mtp.py`` line 82); 1 when absent.
_DRAFTER_FIELDS: Final = {
    "qwen3_next": "num_nextn_predict_layers",
    "qwen3_5_text": "mtp_num_hidden_layers",
    "qwen3_5_moe_text": "mtp_num_hidden_layers",
}


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


def text_config(config: Mapping[str, object], /) -> Mapping[str, object]:
    """The part of a config that describes the language model: ``text_config`` if present.

    Multimodal configs (Qwen3.5) nest the text model's fields there; both
    engines read them from it (vLLM's ``hf_text_config``, SGLang's
    ``config.text_config``).
    """
    nested = config.get("text_config")
    if isinstance(nested, dict):
        return nested
    if config.get("model_type") in _NESTED_MODEL_TYPES:
        raise ConfigError(
            f"the config's model_type is {config['model_type']!r} but it has no 'text_config':"
            " both engines would size the text model from transformers' class defaults,"
            " not from these fields"
        )
    return config


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
    config = text_config(config)
    _refuse_other_families(config)
    key_heads = _positive_int(config, "linear_num_key_heads")
    value_heads = _positive_int(config, "linear_num_value_heads")
    if value_heads % key_heads:
        # Both engines' GDN kernels repeat each key head over a whole group of
        # value heads; other counts are no model they serve.
        raise ConfigError(
            f"the config's 'linear_num_value_heads' ({value_heads}) is not a multiple of"
            f" its 'linear_num_key_heads' ({key_heads})"
        )
    return GdnDimensions(
        num_gdn_layers=_gdn_layer_count(config),
        num_key_heads=key_heads,
        key_head_dim=_positive_int(config, "linear_key_head_dim"),
        num_value_heads=value_heads,
        value_head_dim=_positive_int(config, "linear_value_head_dim"),
        conv_kernel=_positive_int(config, "linear_conv_kernel_dim"),
    )


@dataclass(frozen=True)
class AttentionDimensions:
    """The full-attention layers' KV shape, which sets the attention page size."""

    num_kv_heads: int
    head_dim: int

    def per_gpu(self, tp: int, /) -> AttentionDimensions:
        """The KV heads one of ``tp`` GPUs holds: at least one, replicated past that.

        As vLLM's ``ModelConfig.get_num_kv_heads``: ``max(1, heads // tp)``.
        """
        return replace(self, num_kv_heads=max(1, self.num_kv_heads // tp))


def attention_from_config(config: Mapping[str, object], /) -> AttentionDimensions | None:
    """The attention fields of a config as the engines see it, or None without any.

    ``num_key_value_heads`` (else ``num_attention_heads``) and ``head_dim``
    (else ``hidden_size // num_attention_heads``), read from ``text_config``
    when present, as vLLM's ``get_total_num_kv_heads`` and ``get_head_size`` do.
    A Qwen3-Next or Qwen3.5 config that leaves them out gets transformers'
    class defaults, as both engines do when they load it.

    Raises:
        ConfigError: a field is present but not a positive integer, or the
            head size cannot be found.
    """
    config = text_config(config)
    fields = ("num_key_value_heads", "num_attention_heads", "head_dim")
    model_type = config.get("model_type")
    if isinstance(model_type, str) and model_type in _ATTENTION_DEFAULTS:
        heads, head_dim = _ATTENTION_DEFAULTS[model_type]
        if "num_key_value_heads" in config:
            heads = _positive_int(config, "num_key_value_heads")
        if "head_dim" in config:
            head_dim = _positive_int(config, "head_dim")
        return AttentionDimensions(num_kv_heads=heads, head_dim=head_dim)
    if not any(field in config for field in fields):
        return None
    heads_key = "num_key_value_heads" if "num_key_value_heads" in config else "num_attention_heads"
    kv_heads = _positive_int(config, heads_key)
    if "head_dim" in config:
        head_dim = _positive_int(config, "head_dim")
    else:
        head_dim = _positive_int(config, "hidden_size") // _positive_int(
            config, "num_attention_heads"
        )
    return AttentionDimensions(num_kv_heads=kv_heads, head_dim=head_dim)


def attention_layers_from_config(config: Mapping[str, object], /) -> int:
    """The target model's full-attention layers: every layer that is not GDN.

    Raises:
        ConfigError: as :func:`dimensions_from_config`.
    """
    config = text_config(config)
    layer_types = config.get("layer_types")
    total = len(layer_types) if isinstance(layer_types, list) else None
    if total is None:
        total = _positive_int(config, "num_hidden_layers")
    return total - _gdn_layer_count(config)


def interval_gdn_layers_from_config(config: Mapping[str, object], /) -> int | None:
    """The GDN layers SGLang 0.5.23 counts: from ``full_attention_interval`` alone.

    SGLang's ``Qwen3NextConfig.layers_block_type`` (``sglang/srt/configs/qwen3_next.py``
    lines 260-277, inherited by its Qwen3.5 config) ignores ``layer_types``; None when
    the config has no interval.

    Raises:
        ConfigError: ``num_hidden_layers`` or the interval is not a positive integer.
    """
    config = text_config(config)
    if "full_attention_interval" not in config:
        return None
    layers = _positive_int(config, "num_hidden_layers")
    return layers - layers // _positive_int(config, "full_attention_interval")


def drafter_layers_from_config(config: Mapping[str, object], /) -> int:
    """The MTP drafter's layers, each one full-attention layer, as vLLM builds them.

    Raises:
        ConfigError: the field is present but not a positive integer.
    """
    config = text_config(config)
    model_type = config.get("model_type")
    field = _DRAFTER_FIELDS.get(model_type, "") if isinstance(model_type, str) else ""
    return _positive_int(config, field) if field in config else 1


def architecture_from_config(config: Mapping[str, object], /) -> str | None:
    """The first of the config's ``architectures``, which picks the engines' model hooks."""
    architectures = config.get("architectures")
    if isinstance(architectures, list) and architectures and isinstance(architectures[0], str):
        return architectures[0]
    return None


@dataclass(frozen=True)
class ModelLength:
    """The longest ``--max-model-len`` vLLM starts with, as it derives it from the config."""

    #: The derived length, and the config key it came from.
    tokens: int
    key: str

    def refuses(self, max_model_len: int, /) -> bool:
        """Whether vLLM refuses ``max_model_len`` (``SOURCES["max_model_len check"]``).

        The ``model_max_length`` that check lets a longer length through with
        is the text config's (``hf_config`` there is ``hf_text_config``,
        vllm/config/model.py:2160-2161, 2661), which, when set, is already the
        derived length: a top config's is not read.
        """
        return max_model_len > self.tokens
