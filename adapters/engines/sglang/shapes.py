# SPDX-License-Identifier: MIT OR Apache-2.0
"""The request's layer dims as SGLang's kernels take them: each key head padded to 32 channels.

SGLang's ReplaySSM kernels take a key head of at least :data:`SMALLEST_KEY_HEAD`
channels; a smaller one is padded with zero channels, which add nothing to
any sum. ``replay`` (``adapter.py``) and ``replay_batch`` (``batch.py``) both
lay their columns out by :class:`Shapes`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["SMALLEST_KEY_HEAD", "Shapes"]

#: The smallest key head size SGLang's ReplaySSM kernels take.
SMALLEST_KEY_HEAD: Final = 32


@dataclass(frozen=True)
class Shapes:
    """The request's dims, the key heads padded to what SGLang's kernels take."""

    nk: int
    dk_given: int
    nv: int
    dv: int
    width: int

    @property
    def dk(self) -> int:
        """The key head size the kernels run with: at least 32 (zero channels added)."""
        return max(self.dk_given, SMALLEST_KEY_HEAD)

    @property
    def key_dim(self) -> int:
        """The padded q (or k) columns."""
        return self.nk * self.dk

    @property
    def conv_dim(self) -> int:
        """The padded conv channels: q, k, v."""
        return 2 * self.key_dim + self.nv * self.dv

    def pad(self, columns: Any, /) -> Any:
        """Columns in the request's channel order, each key head padded with zero channels."""
        import numpy as np  # noqa: PLC0415

        heads = np.zeros((*columns.shape[:-1], self.conv_dim))
        heads[..., self.kept] = columns
        return heads

    @functools.cached_property
    def kept(self) -> list[int]:
        """The padded channels the request's channels are, in its order."""
        return [
            part * self.key_dim + head * self.dk + channel
            for part in range(2)
            for head in range(self.nk)
            for channel in range(self.dk_given)
        ] + list(range(2 * self.key_dim, self.conv_dim))
