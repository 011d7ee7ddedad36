# SPDX-License-Identifier: MIT OR Apache-2.0
"""The state dtypes a review chooses between, and the ones a config names."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from .dimensions import ConfigError, text_config

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "ConfigDtypes",
    "Dtype",
    "StateDtypes",
    "UnsupportedDtypeError",
    "dtypes_from_config",
]


class Dtype(enum.Enum):
    """A state dtype, by the short name the command line takes."""

    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"

    @property
    def bytes(self) -> int:
        """Bytes per stored value."""
        return _BYTES[self]


_BYTES: Final = {Dtype.FP32: 4, Dtype.BF16: 2, Dtype.FP16: 2, Dtype.FP8: 1}

#: The dtype names a Hugging Face config (and torch) writes, and the dtype each names.
_CONFIG_DTYPE_NAMES: Final = {
    "float32": Dtype.FP32,
    "bfloat16": Dtype.BF16,
    "float16": Dtype.FP16,
    "float8_e4m3fn": Dtype.FP8,
}


class UnsupportedDtypeError(ValueError):
    """A dtype the engine a view follows does not offer for that state.

    ``engine`` names the engine and version, ``dtype`` the refused dtype.
    """

    def __init__(self, engine: str, dtype: Dtype, offered: str, /) -> None:
        super().__init__(f"{engine} offers no {dtype.value} state dtype (only {offered})")
        self.engine: Final = engine
        self.dtype: Final = dtype


@dataclass(frozen=True)
class ConfigDtypes:
    """The dtypes a config names: the model's and, if set, the SSM state's."""

    model: Dtype | None = None
    ssm: Dtype | None = None


@dataclass(frozen=True)
class StateDtypes:
    """The dtypes of the recurrent (h) state and of the conv state."""

    recurrent: Dtype
    conv: Dtype


def _config_dtype(config: Mapping[str, object], key: str, /) -> Dtype | None:
    value = config.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or value not in _CONFIG_DTYPE_NAMES:
        names = ", ".join(repr(name) for name in _CONFIG_DTYPE_NAMES)
        raise ConfigError(f"the config's {key!r} is {value!r}, not one of {names}")
    return _CONFIG_DTYPE_NAMES[value]


def dtypes_from_config(config: Mapping[str, object], /) -> ConfigDtypes:
    """The model dtype (``torch_dtype``, or ``dtype``) and ``mamba_ssm_dtype`` of a config.

    Read from ``text_config`` when present, as both engines do for Qwen3.5.

    Raises:
        ConfigError: a dtype field names a dtype this sizing does not know.
    """
    config = text_config(config)
    model_key = "torch_dtype" if "torch_dtype" in config else "dtype"
    return ConfigDtypes(
        model=_config_dtype(config, model_key), ssm=_config_dtype(config, "mamba_ssm_dtype")
    )
