# SPDX-License-Identifier: MIT OR Apache-2.0
"""The llama.cpp view: the GDN state llama.cpp 0c1e57098 holds per sequence.

Every fact below is read from the released source (``llama-cpp-python``
0.3.36's sdist, which vendors llama.cpp at commit ``0c1e57098`` under
``vendor/llama.cpp``), cited by file and line in :data:`SOURCES`, the paths
relative to ``vendor/llama.cpp``.

Per sequence and GDN layer, llama.cpp's recurrent memory holds one row of the
conv state ((K-1) conv columns) and one of the recurrent state h, both FP32
whatever the model's dtype, in each of ``1 + n_rs_seq`` planes: the current
state and ``n_rs_seq`` per-token snapshots, from which
``llama_memory_seq_rm`` rolls a sequence back by 1 to ``n_rs_seq`` tokens.
``llama-server`` asks for ``n_rs_seq`` = ``--spec-draft-n-max`` (the drafts
per step) with MTP and the other draft-model methods. Only the
architectures in ``llm_arch_supports_rs_rollback`` get the snapshots: Qwen3.5
does, Qwen3-Next does not, and for it llama.cpp clamps ``n_rs_seq`` to 0; the
server then saves the sequence's whole recurrent state before each verify and
restores it on a partial acceptance (``spec_ckpt``), in host memory. For
prompt caching the server also keeps up to ``--ctx-checkpoints`` (32) copies
of that state per slot, for both architectures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ....releases import LLAMA_CPP, LLAMA_CPP_COMMIT
from ...dtypes import Dtype, StateDtypes, UnsupportedDtypeError
from ...facts import Source

if TYPE_CHECKING:
    from ...dimensions import GdnDimensions
    from ...state import Model, Setup

__all__ = [
    "CHECKPOINT_HEADER_BYTES",
    "CHECKPOINT_LAYER_HEADER_BYTES",
    "CTX_CHECKPOINTS",
    "ENGINE",
    "GGUF_ARCHITECTURES",
    "NO_ROLLBACK_ARCHITECTURES",
    "SOURCES",
    "STATE_DTYPES",
    "checkpoint_bytes",
    "gguf_architecture",
    "has_snapshots",
    "layer_state_bytes",
    "view_dtypes",
]

#: How outputs name the engine: its commit, and the release that vendors it.
ENGINE: Final = f"llama.cpp {LLAMA_CPP_COMMIT} ({LLAMA_CPP.distribution} {LLAMA_CPP.version})"
#: Both recurrent tensors are FP32, whatever the model's dtype; no flag changes them.
STATE_DTYPES: Final = StateDtypes(recurrent=Dtype.FP32, conv=Dtype.FP32)
#: ``--ctx-checkpoints``'s default: the context checkpoints a server slot keeps at most.
CTX_CHECKPOINTS: Final = 32
#: A saved sequence's bytes besides its rows: the magic and seq id
#: (llama_context), the cell count, one cell's position and seq-id count, the
#: transposition flag and the layer count (llama_memory_recurrent), 4 bytes each.
CHECKPOINT_HEADER_BYTES: Final = 4 + 4 + 4 + (4 + 4) + 4 + 4
#: And per GDN layer: each of the two rows' type (4 bytes) and row size (8 bytes).
CHECKPOINT_LAYER_HEADER_BYTES: Final = 2 * (4 + 8)

#: The Hugging Face architectures of the package's configs and the llama.cpp
#: architecture each converts to.
GGUF_ARCHITECTURES: Final = {
    "Qwen3NextForCausalLM": "qwen3next",
    "Qwen3_5ForConditionalGeneration": "qwen35",
    "Qwen3_5ForCausalLM": "qwen35",
    "Qwen3_5MoeForConditionalGeneration": "qwen35moe",
    "Qwen3_5MoeForCausalLM": "qwen35moe",
}
#: The llama.cpp architectures of those that ``llm_arch_supports_rs_rollback`` leaves out.
NO_ROLLBACK_ARCHITECTURES: Final = frozenset({"qwen3next"})

#: Each fact of this view and where llama.cpp 0c1e57098 says it.
SOURCES: Final = {
    "n_rs_seq": Source(
        "include/llama.h",
        "370",
        "llama_context_params.n_rs_seq: recurrent-state snapshots per sequence for rollback "
        "(0 = no rollback), [EXPERIMENTAL]",
    ),
    "rollback architectures": Source(
        "src/llama-arch.cpp",
        "1123-1140",
        "llm_arch_supports_rs_rollback: true for qwen35 and qwen35moe (among others), false "
        "for qwen3next",
    ),
    "clamp": Source(
        "src/llama-context.cpp",
        "100, 105-110",
        "n_seq_max is at least 1; n_rs_seq is clamped to 0 for an architecture without rs rollback",
    ),
    "hybrid memory": Source(
        "src/llama-model.cpp",
        "2698-2705, 2756-2773",
        "Qwen3-Next and Qwen3.5: llama_memory_hybrid, its recurrent part over the recurrent "
        "layers, types GGML_TYPE_F32 and GGML_TYPE_F32, max(1, n_seq_max) cells, n_rs_seq "
        "snapshots",
    ),
    "planes": Source(
        "src/llama-memory-recurrent.cpp",
        "101-104",
        "per layer, r (n_embd_r) and s (n_embd_s) tensors of mem_size x (1 + n_rs_seq) rows",
    ),
    "tensor split": Source(
        "src/llama-model.cpp",
        "556, 637-638, 653-658",
        "--split-mode tensor splits cache_r_l and cache_s_l by head across devices, as --tp "
        "divides the heads here",
    ),
    "row sizes": Source(
        "src/llama-hparams.cpp",
        "229, 257",
        "n_embd_r = (ssm_d_conv - 1) x (ssm_d_inner + 2 ssm_n_group ssm_d_state): the conv "
        "columns; n_embd_s = ssm_d_state x ssm_d_inner: h",
    ),
    "gguf shape": Source(
        "conversion/qwen.py",
        "377-381, 652-660",
        "Qwen3-Next (and the Qwen3.5 models built on it): ssm.conv_kernel = conv kernel, "
        "state_size = key head dim, group_count = key heads, inner_size = value heads x "
        "value head dim",
    ),
    "rollback": Source(
        "src/llama-memory-recurrent.cpp",
        "193-203",
        "llama_memory_seq_rm rolls back 1 to n_rs_seq tokens through the snapshot index, "
        "once before the next decode",
    ),
    "snapshots written": Source(
        "src/models/delta-net-base.cpp",
        "564",
        "build_recurrent_attn: K = n_rs_seq + 1 states out of ggml_gated_delta_net",
    ),
    "server n_rs_seq": Source(
        "common/common.h",
        "396-402",
        "need_n_rs_seq: the draft's n_max (--spec-draft-n-max) for MTP, EAGLE3, DFlash and "
        "DSpark; 0 otherwise",
    ),
    "server context": Source(
        "common/common.cpp",
        "1635",
        "cparams.n_rs_seq = params.speculative.need_n_rs_seq()",
    ),
    "mtp drafter": Source(
        "src/llama-model.cpp",
        "2661-2664, 2792-2794",
        "an MTP draft context on Qwen3-Next or Qwen3.5 holds a plain KV cache of the nextn "
        "layer, no GDN state",
    ),
    "speculative checkpoint": Source(
        "tools/server/server-context.cpp",
        "216, 3050-3060, 3905-3926",
        "spec_ckpt: a slot's target state saved before the verify when seq_rm is FULL (or "
        "the draft exceeds n_rs_seq) and restored on a partial acceptance",
    ),
    "checkpoint bytes": Source(
        "common/common.cpp",
        "2260-2262, 2288-2303",
        "a checkpoint holds llama_state_seq_get_data_ext(..., PARTIAL_ONLY): the target's, "
        "a draft model's and the drafter's own bytes",
    ),
    "partial state": Source(
        "src/llama-memory-hybrid.cpp",
        "190-195",
        "PARTIAL_ONLY writes the recurrent part alone, not the attention KV cache",
    ),
    "state layout": Source(
        "src/llama-context.cpp",
        "3191-3200",
        "a sequence's saved state starts with the magic and the seq id",
    ),
    "recurrent layout": Source(
        "src/llama-memory-recurrent.cpp",
        "841, 885-886, 901-902, 912-916, 945-949",
        "cell count, per cell its position and seq-id count, the transposition flag and "
        "layer count, then per layer each row's type, row size and rows",
    ),
    "context checkpoints": Source(
        "common/common.h",
        "631",
        "n_ctx_checkpoints = 32: the most context checkpoints per slot (--ctx-checkpoints)",
    ),
    "checkpoint creation": Source(
        "tools/server/server-context.cpp",
        "2290-2352, 3446-3454",
        "create_checkpoint keeps at most n_ctx_checkpoints per slot, each the slot's "
        "PARTIAL_ONLY state; made when seq_rm is FULL or bounded by n_rs_seq (or the model "
        "has SWA)",
    ),
}


def gguf_architecture(model: Model, /) -> str | None:
    """The llama.cpp architecture ``model``'s config converts to (None: not one of the known)."""
    return GGUF_ARCHITECTURES.get(model.architecture or "")


def has_snapshots(model: Model, /) -> bool:
    """Whether llama.cpp keeps ``n_rs_seq`` snapshots for ``model`` (explicit dimensions: yes)."""
    return gguf_architecture(model) not in NO_ROLLBACK_ARCHITECTURES


def view_dtypes(model: Model, setup: Setup, /) -> StateDtypes:
    """FP32 h and conv state, as llama.cpp allocates them for every model.

    Raises:
        UnsupportedDtypeError: a forced dtype other than FP32 (llama.cpp has no such flag).
    """
    del model
    for forced in (setup.recurrent, setup.conv):
        if forced is not None and forced is not Dtype.FP32:
            raise UnsupportedDtypeError(ENGINE, forced, Dtype.FP32.value)
    return STATE_DTYPES


def layer_state_bytes(dimensions: GdnDimensions, /) -> int:
    """One plane of one GDN layer for one sequence: h and (K-1) conv columns, FP32."""
    return (dimensions.recurrent_state_values + dimensions.conv_state_values) * Dtype.FP32.bytes


def checkpoint_bytes(dimensions: GdnDimensions, /) -> int:
    """One sequence's saved recurrent state (``llama_state_seq_get_size_ext``, PARTIAL_ONLY).

    The current plane of every GDN layer and the headers around it, as one
    cell holds it after a decode.
    """
    layers = dimensions.num_gdn_layers
    return (
        CHECKPOINT_HEADER_BYTES
        + layers * CHECKPOINT_LAYER_HEADER_BYTES
        + layers * layer_state_bytes(dimensions)
    )
