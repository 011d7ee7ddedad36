# SPDX-License-Identifier: MIT OR Apache-2.0
"""What one replay-ring row must hold, in bytes (the replay profile; RB-REPLAY-3..5).

Standard library only, so the ``size`` command can report these figures
without the ``replay`` extra: it stands on the contract's floor, beside
:mod:`ssm_rollback_spec.rollback`, below the sizing views and the replay
model (:mod:`ssm_rollback_spec.replay`) that both use it.

The seed's row (``ssm_replay_row_bytes`` in ``rollback.rs``, seed
``000_fd8074ae8876e187.txt``) is the deinterleaved qkvz row in BF16 plus a
gate and a beta in FP32 per value head. The model in :mod:`ssm_rollback_spec.replay.paths`
shows that the rebuilt (h, conv) state depends on the pre-conv q, k and v and
on g and beta, never on z (z only gates the layer's output, see
``Qwen3NextGatedDeltaNet.forward`` in Hugging Face transformers,
``src/transformers/models/qwen3_next/modeling_qwen3_next.py``). So the minimal
row is the seed's formula with ``qkvz_elems`` replaced by ``conv_dim``, the
channels of the causal convolution: ``2 * key_dim + value_dim``.

A ring of post-conv values (after the SiLU) rebuilds h, but not the conv
state: the conv state holds pre-conv columns, which the SiLU and the
convolution do not let one recover (RB-REPLAY-4). Such a ring must keep a
conv window beside it; :func:`post_conv_ring_bytes` counts what that costs.
"""

from __future__ import annotations

import enum
from typing import Final, TypedDict

# Relative, as the contract beside it (tests/project/test_layers.py): it keeps
# working wherever the package is copied.
from .rollback import (
    USIZE_MAX,
    SsmReplayBytesOverflowError,
    UsizeRangeError,
    UsizeTypeError,
    ssm_replay_ring_bytes,
    ssm_replay_row_bytes,
)

__all__ = [
    "BF16_BYTES",
    "DESIGN_MINIMAL_FOR",
    "FP32_BYTES",
    "QWEN3_NEXT_80B_A3B",
    "REPLAYSSM_RING_LENGTH",
    "GdnShape",
    "RecordStorage",
    "ReplayDesign",
    "ReplayRowSizes",
    "conv_dim",
    "conv_window_bytes",
    "design_ring_bytes",
    "design_ring_rows",
    "design_row_bytes",
    "minimal_replay_ring_bytes",
    "minimal_replay_row_bytes",
    "post_conv_ring_bytes",
    "post_conv_row_bytes",
    "post_conv_row_with_conv_window_bytes",
    "replay_row_sizes",
    "replayssm_record_bytes",
    "seed_row_bytes",
]

#: Bytes of one stored value of each ring dtype.
BF16_BYTES: Final = 2
FP32_BYTES: Final = 4


#: ReplaySSM's ring length L, in records, by default (SGLang 0.5.23's
#: ``--linear-replayssm-cache-len``, ``srt/arg_groups/fields/exec_.py`` line 585).
REPLAYSSM_RING_LENGTH: Final = 16


class ReplayDesign(enum.Enum):
    """A replay design: what its ring row holds and how it rolls back (RB-REPLAY-6..9).

    ``SEED_ROW``: the seed's row, the deinterleaved qkvz in BF16 plus g and
    beta in FP32, K - 1 rows a slot, a checkpoint per verify.
    ``MINIMAL_PRE_CONV``: the seed's row without z (RB-REPLAY-5), minimal for
    a ring of pre-conv rows that rebuilds both the conv state and h.
    ``REPLAYSSM``: one checkpoint and a ring of L (k, u, g) records, u =
    beta (v - S^T k); rollback is a cursor move, a fold moves the records into
    the checkpoint, and the conv state is rebuilt from a conv window apart.
    ``POST_CONV_WITH_CONV_WINDOW``: post-SiLU k and v with g and beta, K - 1
    rows, and a conv window of the K - 1 pre-conv columns (RB-REPLAY-4).
    ``SGLANG_GDN_REPLAYSSM``: SGLang 0.5.23's GDN ReplaySSM as it runs: a
    circular ring of L records, u and the normed k as BF16 high and low
    parts and g in FP32, folded by the closed form after a commit
    (RB-REPLAY-11).
    """

    SEED_ROW = "seed-row"
    MINIMAL_PRE_CONV = "minimal-pre-conv"
    REPLAYSSM = "replayssm"
    POST_CONV_WITH_CONV_WINDOW = "post-conv-with-conv-window"
    SGLANG_GDN_REPLAYSSM = "sglang-gdn-replayssm"


#: What "minimal" means for each design that has a minimal claim: which
#: layout it is the smallest of. Never cite "minimal" without it.
DESIGN_MINIMAL_FOR: Final = {
    ReplayDesign.MINIMAL_PRE_CONV: (
        "minimal among rows of pre-conv inputs that rebuild both the conv state and h "
        "from a per-verify checkpoint (the seed's row without z)"
    ),
}


#: The designs whose ring is L records, whatever K.
_RING_OF_L: Final = frozenset({ReplayDesign.REPLAYSSM, ReplayDesign.SGLANG_GDN_REPLAYSSM})


class RecordStorage(enum.Enum):
    """How a ReplaySSM record stores its k and u (g is FP32 in every one).

    ``FP32``: the state's dtype (float64 in the model's float64 pipeline), 4
    bytes a value. ``BF16_HI_LO``: a BF16 high part and a BF16 low part (the
    rounding error of the high part), 4 bytes a value. ``BF16``: 2 bytes a value.
    """

    FP32 = "fp32"
    BF16_HI_LO = "bf16-hi-lo"
    BF16 = "bf16"

    @property
    def value_bytes(self) -> int:
        """Bytes of one stored k or u value."""
        return BF16_BYTES if self is RecordStorage.BF16 else 2 * BF16_BYTES


class GdnShape(TypedDict):
    """The head shapes of one Gated DeltaNet layer (the fields of a vector case's ``dims``)."""

    num_key_heads: int
    key_head_dim: int
    num_value_heads: int
    value_head_dim: int
    conv_kernel: int


#: Qwen3-Next-80B-A3B's GDN layers (Hugging Face ``config.json``:
#: ``linear_num_key_heads`` 16, ``linear_key_head_dim`` 128,
#: ``linear_num_value_heads`` 32, ``linear_value_head_dim`` 128,
#: ``linear_conv_kernel_dim`` 4).
QWEN3_NEXT_80B_A3B: Final = GdnShape(
    num_key_heads=16, key_head_dim=128, num_value_heads=32, value_head_dim=128, conv_kernel=4
)


class ReplayRowSizes(TypedDict):
    """Per-token bytes of each ring layout, for one SSM layer (what ``size`` may report)."""

    seed_row_bytes: int
    minimal_replay_row_bytes: int
    post_conv_row_bytes: int
    post_conv_row_with_conv_window_bytes: int


def _count(function: str, name: str, value: object, /) -> int:
    # The same argument rules as the contract's sizes (RB-PY-2, RB-PY-3):
    # a bool is not a count, and a count has a usize to stand for it.
    if not isinstance(value, int) or isinstance(value, bool):
        raise UsizeTypeError(
            f"{function}() argument '{name}' must be int, not {type(value).__name__}"
        )
    number = int.__int__(value)
    if not 0 <= number <= USIZE_MAX:
        raise UsizeRangeError(
            f"{function}() argument '{name}' must be in [0, {USIZE_MAX}], got {number}"
        )
    return number


def _fits(function: str, value: int, /) -> int:
    if value > USIZE_MAX:
        raise SsmReplayBytesOverflowError(f"{function}() = {value} exceeds usize max {USIZE_MAX}")
    return value


def conv_dim(shape: GdnShape, /) -> int:
    """Channels of the causal convolution: q, k and v, ``2 * key_dim + value_dim``.

    Raises:
        UsizeTypeError, UsizeRangeError: a dimension is not a count.
        SsmReplayBytesOverflowError: the channel count exceeds ``USIZE_MAX``.

    RB-REPLAY-5.
    """
    name = "conv_dim"
    nk = _count(name, "num_key_heads", shape["num_key_heads"])
    dk = _count(name, "key_head_dim", shape["key_head_dim"])
    nv = _count(name, "num_value_heads", shape["num_value_heads"])
    dv = _count(name, "value_head_dim", shape["value_head_dim"])
    return _fits(name, 2 * nk * dk + nv * dv)


def minimal_replay_row_bytes(conv_dim: int, nv: int, /) -> int:
    """Bytes of the minimal replay row: ``conv_dim`` BF16 values plus ``nv * 2`` FP32 values.

    This is the seed's ``ssm_replay_row_bytes`` with z left out, so it keeps
    that function's argument rules and exact overflow (RB-SIZE-3).

    Raises:
        UsizeTypeError, UsizeRangeError: an argument is not a count.
        SsmReplayBytesOverflowError: the size exceeds ``USIZE_MAX``.

    RB-REPLAY-3, RB-REPLAY-5.
    """
    return ssm_replay_row_bytes(conv_dim, nv)


def minimal_replay_ring_bytes(
    num_ssm_layers: int, conv_dim: int, nv: int, k_ceiling: int, mtp_state_slots: int, /
) -> int:
    """The replay ring of minimal rows: ``slots * max(K - 1, 0) * layers * row``.

    Raises:
        UsizeTypeError, UsizeRangeError: an argument is not a count.
        SsmReplayBytesOverflowError: the size exceeds ``USIZE_MAX``.

    RB-REPLAY-2, RB-REPLAY-5.
    """
    row = minimal_replay_row_bytes(conv_dim, nv)
    return ssm_replay_ring_bytes(num_ssm_layers, row, k_ceiling, mtp_state_slots)


def post_conv_row_bytes(key_dim: int, value_dim: int, nv: int, /) -> int:
    """Bytes of a post-conv row that rebuilds h: post-SiLU k and v in BF16, g and beta in FP32.

    Post-conv q is left out: h never reads q (only the replayed tokens'
    outputs would, and those were emitted during the verify).

    Raises:
        UsizeTypeError, UsizeRangeError: an argument is not a count.
        SsmReplayBytesOverflowError: the size exceeds ``USIZE_MAX``.

    RB-REPLAY-4, RB-REPLAY-5.
    """
    name = "post_conv_row_bytes"
    key = _count(name, "key_dim", key_dim)
    value = _count(name, "value_dim", value_dim)
    heads = _count(name, "nv", nv)
    return _fits(name, (key + value) * BF16_BYTES + heads * 2 * FP32_BYTES)


def conv_window_bytes(conv_dim: int, /) -> int:
    """Bytes per window token of the conv window a post-conv ring must keep beside it.

    Rebuilding the conv state after ``a`` accepted tokens needs the pre-conv
    columns of tokens ``a - conv_kernel + 1 .. a - 1`` (the older ones are in
    the checkpoint), so over every ``a`` in ``1..K-1`` the window keeps the
    pre-conv columns of the first ``K - 1`` tokens: ``conv_dim`` BF16 values
    per token. (Per-token conv-state snapshots would keep ``conv_kernel - 1``
    times as much.)

    Raises:
        UsizeTypeError, UsizeRangeError: the argument is not a count.
        SsmReplayBytesOverflowError: the size exceeds ``USIZE_MAX``.

    RB-REPLAY-4, RB-REPLAY-5.
    """
    return _fits("conv_window_bytes", _count("conv_window_bytes", "conv_dim", conv_dim) * 2)


def post_conv_ring_bytes(
    num_ssm_layers: int,
    shape: GdnShape,
    k_ceiling: int,
    mtp_state_slots: int,
    /,
) -> int:
    """The ring of post-conv rows plus its conv window, for every slot and layer.

    Raises:
        UsizeTypeError, UsizeRangeError: an argument is not a count.
        SsmReplayBytesOverflowError: the size exceeds ``USIZE_MAX``.

    RB-REPLAY-4, RB-REPLAY-5.
    """
    channels = conv_dim(shape)
    key_dim = shape["num_key_heads"] * shape["key_head_dim"]
    value_dim = shape["num_value_heads"] * shape["value_head_dim"]
    per_token = _fits(
        "post_conv_ring_bytes",
        post_conv_row_bytes(key_dim, value_dim, shape["num_value_heads"])
        + conv_window_bytes(channels),
    )
    return ssm_replay_ring_bytes(num_ssm_layers, per_token, k_ceiling, mtp_state_slots)


def replay_row_sizes(shape: GdnShape, /) -> ReplayRowSizes:
    """Per-token bytes of the seed's row, the minimal row and the post-conv layout.

    Raises:
        UsizeTypeError, UsizeRangeError: a dimension is not a count.
        SsmReplayBytesOverflowError: a size exceeds ``USIZE_MAX``.

    RB-REPLAY-5.
    """
    channels = conv_dim(shape)
    nv = shape["num_value_heads"]
    value_dim = nv * shape["value_head_dim"]
    key_dim = shape["num_key_heads"] * shape["key_head_dim"]
    post_conv = post_conv_row_bytes(key_dim, value_dim, nv)
    return ReplayRowSizes(
        seed_row_bytes=ssm_replay_row_bytes(_fits("replay_row_sizes", channels + value_dim), nv),
        minimal_replay_row_bytes=minimal_replay_row_bytes(channels, nv),
        post_conv_row_bytes=post_conv,
        post_conv_row_with_conv_window_bytes=_fits(
            "replay_row_sizes", post_conv + conv_window_bytes(channels)
        ),
    )


def seed_row_bytes(shape: GdnShape, /) -> int:
    """Bytes of the seed's row (design (a)): ``ssm_replay_row_bytes(conv_dim + value_dim, nv)``.

    Raises:
        UsizeTypeError, UsizeRangeError: a dimension is not a count.
        SsmReplayBytesOverflowError: the size exceeds ``USIZE_MAX``.

    RB-REPLAY-6.
    """
    channels = conv_dim(shape)
    value_dim = (
        _count("seed_row_bytes", "value_head_dim", shape["value_head_dim"])
        * shape["num_value_heads"]
    )
    return ssm_replay_row_bytes(
        _fits("seed_row_bytes", channels + value_dim), shape["num_value_heads"]
    )


def post_conv_row_with_conv_window_bytes(shape: GdnShape, /) -> int:
    """Bytes per window token of design (d): a post-conv row plus its conv-window column.

    Raises:
        UsizeTypeError, UsizeRangeError: a dimension is not a count.
        SsmReplayBytesOverflowError: the size exceeds ``USIZE_MAX``.

    RB-REPLAY-4, RB-REPLAY-9.
    """
    channels = conv_dim(shape)
    nv = shape["num_value_heads"]
    key_dim = shape["num_key_heads"] * shape["key_head_dim"]
    row = post_conv_row_bytes(key_dim, nv * shape["value_head_dim"], nv)
    return _fits("post_conv_row_with_conv_window_bytes", row + conv_window_bytes(channels))


def replayssm_record_bytes(
    shape: GdnShape, storage: RecordStorage, /, *, raw_inputs: bool = False
) -> int:
    """Bytes of one ReplaySSM record (design (c)) for one SSM layer.

    The normed k per key head (``key_dim`` values) and u per value head
    (``value_dim`` values), each in ``storage``, and g, one FP32 per value head.
    ``raw_inputs`` adds what the closed-loop exact fold replays (SGLang PR
    #28695; the 0.5.23 wheel runs it for KDA models only): the raw
    post-conv k and v in BF16 and beta in FP32, a post-conv row less its g
    (:func:`post_conv_row_bytes` minus ``nv * 4``).
    For Qwen3-Next: 12416 bytes in BF16 and 24704 with BF16 low parts, the
    figures SGLang's ``replayssm_ring_bytes_per_req`` counts (0.5.23,
    ``sglang/srt/configs/mamba_utils.py``). The conv window is apart:
    :func:`conv_window_bytes` per window token.

    Raises:
        UsizeTypeError, UsizeRangeError: a dimension is not a count.
        SsmReplayBytesOverflowError: the size exceeds ``USIZE_MAX``.

    RB-REPLAY-8.
    """
    name = "replayssm_record_bytes"
    nk = _count(name, "num_key_heads", shape["num_key_heads"])
    dk = _count(name, "key_head_dim", shape["key_head_dim"])
    nv = _count(name, "num_value_heads", shape["num_value_heads"])
    dv = _count(name, "value_head_dim", shape["value_head_dim"])
    record = (nk * dk + nv * dv) * storage.value_bytes + nv * FP32_BYTES
    if raw_inputs:
        record += post_conv_row_bytes(nk * dk, nv * dv, nv) - nv * FP32_BYTES
    return _fits(name, record)


def design_row_bytes(
    design: ReplayDesign, shape: GdnShape, /, *, storage: RecordStorage = RecordStorage.BF16_HI_LO
) -> int:
    """Bytes of one row of ``design``'s ring, per SSM layer (what ``size`` may print per design).

    The post-conv design's row includes its conv-window column; ReplaySSM's
    record does not (its conv window is apart, :func:`design_ring_bytes`).
    ``storage`` is read for design (c) only; SGLang's GDN records are BF16 high and low
    parts (``memory_pool.py`` lines 775 and 850-862).

    Raises:
        UsizeTypeError, UsizeRangeError: a dimension is not a count.
        SsmReplayBytesOverflowError: the size exceeds ``USIZE_MAX``.

    RB-REPLAY-6 to RB-REPLAY-9.
    """
    if design is ReplayDesign.SEED_ROW:
        return seed_row_bytes(shape)
    if design is ReplayDesign.MINIMAL_PRE_CONV:
        return minimal_replay_row_bytes(conv_dim(shape), shape["num_value_heads"])
    if design is ReplayDesign.REPLAYSSM:
        return replayssm_record_bytes(shape, storage)
    if design is ReplayDesign.SGLANG_GDN_REPLAYSSM:
        return replayssm_record_bytes(shape, RecordStorage.BF16_HI_LO)
    return post_conv_row_with_conv_window_bytes(shape)


def design_ring_rows(
    design: ReplayDesign, k_ceiling: int, /, *, ring_length: int = REPLAYSSM_RING_LENGTH
) -> int:
    """Rows of ``design``'s ring a slot holds: ``max(K - 1, 0)``, or ReplaySSM's L, whatever K.

    Raises:
        UsizeTypeError, UsizeRangeError: an argument is not a count.

    RB-REPLAY-2, RB-REPLAY-8.
    """
    k = _count("design_ring_rows", "k_ceiling", k_ceiling)
    length = _count("design_ring_rows", "ring_length", ring_length)
    return length if design in _RING_OF_L else max(k - 1, 0)


def design_ring_bytes(  # noqa: PLR0913 (the ring's dimensions, each its own count)
    design: ReplayDesign,
    num_ssm_layers: int,
    shape: GdnShape,
    k_ceiling: int,
    mtp_state_slots: int,
    /,
    *,
    storage: RecordStorage = RecordStorage.BF16_HI_LO,
    ring_length: int = REPLAYSSM_RING_LENGTH,
) -> int:
    """The whole ring of ``design`` for every slot and layer, conv windows included.

    Per-verify designs: ``slots * max(K - 1, 0) * layers * row`` (RB-SIZE-2's
    arithmetic). ReplaySSM: ``slots * layers * (L * record + max(K - 1, 0) *
    conv_dim * 2)``, the ring of L records and a conv window of K - 1 pre-conv
    columns.

    Raises:
        UsizeTypeError, UsizeRangeError: an argument is not a count.
        SsmReplayBytesOverflowError: the size exceeds ``USIZE_MAX``.

    RB-REPLAY-6 to RB-REPLAY-9.
    """
    row = design_row_bytes(design, shape, storage=storage)
    if design not in _RING_OF_L:
        return ssm_replay_ring_bytes(num_ssm_layers, row, k_ceiling, mtp_state_slots)
    name = "design_ring_bytes"
    records = _fits(name, design_ring_rows(design, k_ceiling, ring_length=ring_length) * row)
    window = ssm_replay_ring_bytes(1, conv_window_bytes(conv_dim(shape)), k_ceiling, 1)
    per_layer = _fits(name, records + window)
    layers = _count(name, "num_ssm_layers", num_ssm_layers)
    slots = _count(name, "mtp_state_slots", mtp_state_slots)
    if not layers or not slots:
        return 0
    return _fits(name, slots * layers * per_layer)
