# SPDX-License-Identifier: MIT OR Apache-2.0
"""The batch's requests and the blocks of its slots, as vLLM's scheduler gives them rows.

A :class:`Request` is one sequence from its join to its finish; the
:class:`Pool` gives each slot its block table row, wide enough for the
batch's longest request (:func:`longest_request`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .batch_inputs import CacheMode

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["Pool", "Request", "longest_request"]


class Request:
    """One request of the batch: its id, slot, block row, computed tokens and last accepted count.

    ``tokens`` stand in for its token ids, one a computed token, for the
    prefix cache (``prefix_cache.py``): its checkpoint's, then each row it kept.
    """

    def __init__(self, name: str, slot: int, row: list[int], /) -> None:
        self.name, self.slot, self.row = name, slot, row
        self.computed = 1
        self.accepted = 1
        self.tokens: list[bytes] = []


class Pool:
    """The blocks of the batch's slots, and the block table rows vLLM's scheduler gives them.

    Block 0 is vLLM's null block. Mode "none": slot ``s`` owns ``1 + num_spec``
    blocks, its row of the table. Mode "align": its row is ``columns`` blocks of
    the block size, enough for its longest request and ``num_spec`` more; the
    builder takes the row's ``1 + num_spec`` from ``seq_lens``.
    """

    def __init__(self, mode: CacheMode, slots: int, num_spec: int, columns: int, /) -> None:
        self.mode = mode
        self.width = 1 + num_spec if mode is CacheMode.NONE else columns
        self.blocks = 1 + slots * self.width

    def row(self, slot: int, /) -> list[int]:
        """The block table row of slot ``slot``."""
        return [1 + slot * self.width + column for column in range(self.width)]


def longest_request(steps: Sequence[Sequence[dict[str, Any]]], /) -> int:
    """The most tokens one request of ``steps`` computes, its checkpoint's one included."""
    tokens: dict[str, int] = {}
    longest = 1
    for step in steps:
        for entry in step:
            name = entry["sequence"]
            count = tokens.pop(name, 1)
            count += len(entry["prefill"]["qkv"]) if "prefill" in entry else 0
            count += len(entry["qkv"]) if "qkv" in entry else 0
            if not entry["finish"]:
                tokens[name] = count
            longest = max(longest, count)
    return longest
