# SPDX-License-Identifier: MIT OR Apache-2.0
"""The ``Model`` a config gives on one GPU, as the sizing tests build it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ssm_rollback_spec.sizing import dimensions as dims
from ssm_rollback_spec.sizing.dtypes import dtypes_from_config
from ssm_rollback_spec.sizing.views import Model

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["model_from_config"]


def model_from_config(
    config: Mapping[str, object], tp: int, /, *, sglang_layers: bool = False
) -> Model:
    """The model one of ``tp`` GPUs holds, from a config that names its attention.

    ``sglang_layers`` also counts the GDN layers as SGLang does, from
    ``full_attention_interval``; without it they are ``dimensions``' count, as
    the vllm view and the re-derivation read them.
    """
    attention = dims.attention_from_config(config)
    assert attention is not None
    return Model(
        dimensions=dims.dimensions_from_config(config).per_gpu(tp),
        attention=attention.per_gpu(tp),
        dtypes=dtypes_from_config(config),
        architecture=dims.architecture_from_config(config),
        attention_layers=dims.attention_layers_from_config(config),
        drafter_layers=dims.drafter_layers_from_config(config),
        sglang_gdn_layers=dims.interval_gdn_layers_from_config(config) if sglang_layers else None,
    )
