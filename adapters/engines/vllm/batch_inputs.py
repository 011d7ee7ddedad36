# SPDX-License-Identifier: MIT OR Apache-2.0
"""A ``replay_batch`` as vLLM's adapter takes it: its inputs and its options.

:class:`BatchInputs` is the request as the engine takes it, with the batch
options (:class:`CacheMode`, :class:`Runner`, the block size). ``batch.py``
runs it; the runner's draft counts are each release's own code
(``runner_code.py``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "ALIGN_COPIES_SINCE",
    "BLOCK_SIZE",
    "BLOCK_SIZES",
    "BatchInputs",
    "BlockSizeError",
    "CacheMode",
    "Runner",
]

#: Tokens per block in mode "align" by default: more than any request of the corpus
#: holds, so no request crosses a block and the runner's copies between blocks copy nothing.
BLOCK_SIZE: Final = 4096
#: The block sizes ``--block-size`` takes: the default, and two that every batch crosses.
BLOCK_SIZES: Final = (BLOCK_SIZE, 8, 4)
#: The first release whose runner's align copies are the fused ones this adapter runs
#: (``v1/worker/mamba_utils.py``'s ``MambaBuffers``; ``load.py`` looks for them).
ALIGN_COPIES_SINCE: Final = (0, 33, 0)


class BlockSizeError(ValueError):
    """A block size below :data:`BLOCK_SIZE` where the release's align copies are not run."""

    def __init__(self, block_size: int, /) -> None:
        super().__init__(
            f"--block-size {block_size} needs vLLM's fused align copies"
            " (v1/worker/mamba_utils.py's MambaBuffers, from 0.33.0) and --runner v1"
        )


class CacheMode(enum.Enum):
    """vLLM's ``mamba_cache_mode``: "align" (with prefix caching, the default) or "none"."""

    ALIGN = "align"
    NONE = "none"


class Runner(enum.Enum):
    """vLLM's model runner whose accepted counts the batch takes: V1's, or V2's own."""

    V1 = "v1"
    V2 = "v2"


@dataclass(frozen=True)
class BatchInputs:
    """A ``replay_batch`` request as the engine takes it (BF16 tensors on ``on``)."""

    #: (num_key_heads, key_head_dim, num_value_heads, value_head_dim, conv_kernel).
    dims: tuple[int, int, int, int, int]
    #: (conv weight, A_log, dt_bias).
    weights: tuple[Any, Any, Any]
    #: Per step, per entry: ``sequence``, ``slot``, ``finish``; but for a prompt
    #: chunk alone, ``qkv``, ``a``, ``b`` (its rows) and ``accepted`` (the count
    #: handed to vLLM); on a first entry ``conv`` and ``h`` (its checkpoint); before
    #: the request's first verify, optionally ``prefill`` (``qkv``, ``a``, ``b``).
    steps: Sequence[Sequence[dict[str, Any]]]
    slots: int
    mode: CacheMode
    #: The torch device.
    on: Any
    #: The vLLM release's version as numbers (named where its runner's code is refused).
    release: tuple[int, ...]
    #: Whose accepted counts the builder is handed (``batch.py``'s docstring).
    runner: Runner = Runner.V1
    #: Tokens per block in mode "align" (``batch.py``'s docstring).
    block_size: int = BLOCK_SIZE
