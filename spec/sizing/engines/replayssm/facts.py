# SPDX-License-Identifier: MIT OR Apache-2.0
"""The ReplaySSM view: SGLang 0.5.23's GDN spec-verify ring (``--enable-linear-replayssm-spec``).

As shipped (the facts cited in :data:`SOURCES`): the ring drops the per-draft
``intermediate_ssm`` snapshots but keeps the shared conv windows, and adds, per
slot and GDN layer, ``--linear-replayssm-cache-len`` (L, default 16) records,
over ``spec_state_size + 1`` slots. A record holds d (value heads x value head
dim) and the normalized k (key heads x key head dim) in the conv dtype, their
low parts in the conv dtype when that is not fp32, and the scalar log-decay g
per value head in fp32. The base states are SGLang's (:mod:`..sglang.facts`).

vLLM 0.33.0 has no GDN ReplaySSM: ``use_replayssm`` (``vllm/config/cache.py``
318-328) zeroes the speculative blocks of every mamba spec
(``vllm/model_executor/layers/mamba/abstract.py`` 84-90), but its ring dtypes
and layers are Mamba-2's and KDA's (``mamba_utils.py`` 85-95); this view does
not model it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ....releases import SGLANG
from ....replay_rows import GdnShape, RecordStorage
from ....replay_rows import replayssm_record_bytes as _record_bytes
from ...dtypes import Dtype, StateDtypes
from ...facts import Source
from ..sglang.facts import sglang_dtypes

if TYPE_CHECKING:
    from ...dimensions import GdnDimensions
    from ...state import Model, Setup

__all__ = [
    "DEFAULT_CACHE_LEN",
    "ENGINE",
    "NAME",
    "SOURCES",
    "ReplaySsmSetup",
    "cache_len",
    "replayssm_record_bytes",
    "view_dtypes",
]

#: The engine and version whose ring this view follows.
ENGINE: Final = SGLANG.engine
#: ``--linear-replayssm-cache-len``'s default: records per slot and layer.
DEFAULT_CACHE_LEN: Final = 16
#: The view's registry name (``--engine``), which keys its entry of :attr:`.Setup.options`.
NAME: Final = "sglang-replayssm"


@dataclass(frozen=True)
class ReplaySsmSetup:
    """How SGLang's ReplaySSM ring is served: ``--linear-replayssm-cache-len``."""

    cache_len: int = DEFAULT_CACHE_LEN


def cache_len(setup: Setup, /) -> int:
    """The ring's records per slot and layer in ``setup`` (its entry under :data:`NAME`)."""
    found = setup.options.get(NAME)
    return found.cache_len if isinstance(found, ReplaySsmSetup) else DEFAULT_CACHE_LEN


#: Each fact of this view and where SGLang 0.5.23 says it.
SOURCES: Final = {
    "record": Source(
        "sglang/srt/configs/mamba_utils.py",
        "127-152",
        "replayssm_ring_bytes_per_req: d (hv x v) and k (h_k x k) in the conv dtype, g (hv) in "
        "fp32, and the low parts of d and k when the conv dtype is not fp32",
    ),
    "ring": Source(
        "sglang/srt/mem_cache/memory_pool.py",
        "762-816, 849-862",
        "spec mode: spec_state_size + 1 slots; ring dtype = conv dtype; d, k and g of L "
        "records (record_len = L for GDN, whose spec fold is off); low parts when not fp32",
    ),
    "drops intermediate h": Source(
        "sglang/srt/mem_cache/memory_pool.py",
        "880-881",
        "under --enable-linear-replayssm-spec the intermediate_ssm buffer is None",
    ),
    "keeps conv windows": Source(
        "sglang/srt/mem_cache/memory_pool.py",
        "895-938",
        "the intermediate conv windows are allocated either way",
    ),
    "spec fold is KDA only": Source(
        "sglang/srt/mem_cache/memory_pool.py",
        "675-677, 784-791",
        "replayssm_spec_fold needs is_kda, so GDN keeps record_len = L",
    ),
    "cache length": Source(
        "sglang/srt/arg_groups/fields/exec_.py",
        "582-585",
        "--linear-replayssm-cache-len defaults to 16",
    ),
    "flag": Source(
        "sglang/srt/arg_groups/fields/exec_.py",
        "592-595",
        "--enable-linear-replayssm-spec, off by default, linear draft chain only",
    ),
}


def view_dtypes(model: Model, setup: Setup, /) -> StateDtypes:
    """The state dtypes of the sglang-replayssm view for ``model``, unless ``setup`` forces them.

    Raises:
        UnsupportedDtypeError: a forced dtype SGLang does not offer.
    """
    # --enable-linear-replayssm-spec sets --mamba-ssm-dtype float32 when it is
    # unset, whatever the config says (sglang/srt/arg_groups/attention_hook.py:506-515).
    return sglang_dtypes(model.dtypes, recurrent=setup.recurrent or Dtype.FP32, conv=setup.conv)


def replayssm_record_bytes(dimensions: GdnDimensions, conv: Dtype, /) -> int:
    """Bytes of one ReplaySSM record in one GDN layer, on one GPU (``dimensions`` per GPU).

    d and k in ``conv``; g in fp32; the low parts of d and k in ``conv`` when
    it is not fp32. The record is the replay model's design (c)
    (:func:`ssm_rollback_spec.replay_rows.replayssm_record_bytes`), stored as FP32 or as
    high and low parts; an fp16 conv dtype's parts take a BF16 pair's bytes.

    Raises:
        SsmReplayBytesOverflowError: the size exceeds ``USIZE_MAX``.
    """
    storage = RecordStorage.FP32 if conv is Dtype.FP32 else RecordStorage.BF16_HI_LO
    shape = GdnShape(
        num_key_heads=dimensions.num_key_heads,
        key_head_dim=dimensions.key_head_dim,
        num_value_heads=dimensions.num_value_heads,
        value_head_dim=dimensions.value_head_dim,
        conv_kernel=dimensions.conv_kernel,
    )
    return _record_bytes(shape, storage)
