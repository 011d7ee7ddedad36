# SPDX-License-Identifier: MIT OR Apache-2.0
"""What stands in for SGLang's server where the batch runs its code (``batch.py``'s docstring).

:func:`module_names` are the module-level names SGLang's extracted
definitions (``wheel_code.py``) read from modules a CPU cannot import:
``envs`` (every flag off, except the CUDA-only fused slot kernels' switch),
``get_exec`` (no Mamba extra buffer), the memory saver and custom pool (off),
and the rest. :class:`ForwardMetadata`, :class:`ExtendMode` and :class:`Kv`
are the objects SGLang's extend and pool read, with the fields they read.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import math
import time
import types
import typing
from dataclasses import dataclass
from typing import Any

__all__ = ["ExtendMode", "ForwardMetadata", "Kv", "module_names"]


class _Flag:
    def __init__(self, value: bool, /) -> None:  # noqa: FBT001
        self.value = value

    def get(self) -> bool:
        return self.value


class _Envs:
    """SGLang's ``envs``: every flag off, but the CUDA-only fused slot kernels' switch."""

    def __getattr__(self, name: str, /) -> _Flag:
        return _Flag(name == "SGLANG_DISABLE_FUSED_MAMBA_SLOT_OPS")


class _NoMemorySaver:
    @staticmethod
    def create(*, enable: bool) -> _NoMemorySaver:  # noqa: ARG004
        return _NoMemorySaver()

    @staticmethod
    def region(_: object, /) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()


def module_names(torch: Any, /, **more: object) -> dict[str, object]:
    """The module-level names SGLang's extracted definitions read."""
    import numpy as np  # noqa: PLC0415

    exec_config = types.SimpleNamespace(
        mamba=types.SimpleNamespace(
            enable_mamba_extra_buffer=False, enable_mamba_extra_buffer_lazy=False
        )
    )
    return {
        "torch": torch,
        "np": np,
        "math": math,
        "time": time,
        "dataclass": dataclass,
        "dataclasses": dataclasses,
        "fields": dataclasses.fields,
        "cached_property": functools.cached_property,
        "nullcontext": contextlib.nullcontext,
        "logger": logging.getLogger("sglang"),
        "envs": _Envs(),
        "get_exec": lambda: exec_config,
        "TorchMemorySaverAdapter": _NoMemorySaver,
        "GPU_MEMORY_TYPE_KV_CACHE": "kv_cache",
        "maybe_init_custom_mem_pool": lambda device: (False, None, None),  # noqa: ARG005
        "get_eager_max_batch_size": lambda size: size,
        "is_pin_memory_available": lambda device=None: False,  # noqa: ARG005
        "mambaish_config": lambda config: config,
        "GB": 1 << 30,
        **{
            name: getattr(typing, name)
            for name in ("Any", "Callable", "List", "Optional", "Tuple", "Union")
        },
        **more,
    }


class ForwardMetadata(types.SimpleNamespace):
    """SGLang's ``ForwardMetadata`` (``layers/attention/mamba/mamba2_metadata.py``): its fields.

    The fields ``_forward_metadata`` does not set keep their defaults: no
    paged conv table, no state checkpoints.
    """

    def __init__(self, **fields: object) -> None:
        defaults = {
            "conv_block_table": None,
            "state_checkpoint_cu_starts": None,
            "num_state_checkpoints": None,
            "state_checkpoint_every_n_tokens": None,
        }
        super().__init__(**(defaults | fields))


class ExtendMode:
    """SGLang's ``ForwardMode.EXTEND``, as the extend path asks it."""

    @staticmethod
    def is_extend(*, include_draft_extend_v2: bool = False) -> bool:  # noqa: ARG004
        """An extend, whatever is asked."""
        return True

    @staticmethod
    def is_decode_or_idle() -> bool:
        """Not a decode, nor idle."""
        return False

    @staticmethod
    def is_target_verify() -> bool:
        """Not a verify."""
        return False

    @staticmethod
    def is_draft_extend_v2() -> bool:
        """Not a draft extend."""
        return False


class Kv:
    """A request's pool handles, as ``Req.kv`` holds them (``managers/schedule_batch.py`` ~1003)."""

    def __init__(self) -> None:
        self.req_pool_idx: int | None = None
        self.mamba_pool_idx: Any = None
        self.kv_allocated_len = 0
        self.mamba_needs_clear = False

    @property
    def holds_kv(self) -> bool:
        """Whether the request holds a request row."""
        return self.req_pool_idx is not None

    @property
    def holds_mamba(self) -> bool:
        """Whether the request holds a Mamba slot."""
        return self.mamba_pool_idx is not None
