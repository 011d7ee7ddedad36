# SPDX-License-Identifier: MIT OR Apache-2.0
"""vLLM's prefix cache in mode "align", as its scheduler offers a hit, over stand-in token ids.

A row's token id stands in as the bytes of its inputs (:func:`row_tokens`),
a checkpoint's as its state's (:func:`stand_in_token`); :class:`PrefixCache`
says where it offers a hit and where vLLM might offer one it does not.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PrefixCache", "row_tokens", "stand_in_token"]


def stand_in_token(*values: Any) -> bytes:
    """A stand-in token id: the bytes of a row's inputs (or a checkpoint's), in float32."""
    return b"".join(value.float().cpu().contiguous().numpy().tobytes() for value in values)


def row_tokens(rows: dict[str, Any], /) -> list[bytes]:
    """Each row's stand-in token id."""
    keys = ("qkv", "a", "b")
    return [
        stand_in_token(*(rows[key][index] for key in keys)) for index in range(len(rows["qkv"]))
    ]


class PrefixCache:
    """vLLM's prefix cache in mode "align", as its scheduler offers a hit: blocks by token prefix.

    Stands in for the KV cache manager's hashing and lookup
    (``v1/core/kv_cache_manager.py``, vLLM 0.33.0 lines 266-328 and 621-625;
    ``single_type_kv_cache_manager.py``, ``MambaManager``, 1470-1547). A
    block is cached under the tokens it ends, at two points where the
    scheduler hashes the block of a boundary ``n`` (a multiple of the block
    size) while that block is the request's running one: a prompt chunk that
    ends at ``n``, whose state the chunk leaves in place; and a verify whose
    first row is the ``n``-th token, whose fused post-copy saves the state
    after that row into the block where the kept tokens reach no later
    boundary (``mamba_utils.py`` 455-476). A join whose tokens begin with a
    cached prefix, and go on past it (the last token is
    never a hit, line 302), takes the longest one cached before this step (a
    block cached in the step is put off, 1704-1712): its row is the null
    block below that column and the cached block at it, and vLLM's own
    pre-copy moves the state out of it. What it does not offer, vLLM might:
    a boundary a verify crossed within its window, hashed at a later step.
    A slot taken again drops the blocks its row held.
    """

    def __init__(self, block_size: int, /) -> None:
        self.block_size = block_size
        #: Tokens of a prefix -> (its block, the step it was cached in).
        self.blocks: dict[tuple[bytes, ...], tuple[int, int]] = {}

    def save(self, tokens: list[bytes], row: list[int], step: int, /) -> None:
        """Cache the block that ends ``tokens``, if they end at a block boundary."""
        if tokens and len(tokens) % self.block_size == 0:
            self.blocks[tuple(tokens)] = (row[len(tokens) // self.block_size - 1], step)

    def drop(self, row: list[int], /) -> None:
        """Forget every prefix whose block is in ``row`` (its slot is taken again)."""
        held = set(row)
        self.blocks = {key: value for key, value in self.blocks.items() if value[0] not in held}

    def hit(self, tokens: list[bytes], step: int, /) -> tuple[int, int] | None:
        """The longest prefix of ``tokens`` cached before ``step``, never all: (length, block)."""
        for end in range(len(tokens) - 1, 0, -1):
            found = self.blocks.get(tuple(tokens[:end])) if end % self.block_size == 0 else None
            if found is not None and found[1] < step:
                return end, found[0]
        return None
