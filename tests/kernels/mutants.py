# SPDX-License-Identifier: MIT OR Apache-2.0
"""Small changes to the engines' own code, made at test time in a copy of the unpacked wheel.

Each :class:`Mutant` is one line of an engine's release changed where its
bookkeeping decides a row, a slot, a count or a gather:

- vLLM 0.33.0's GDN metadata builder (``v1/attention/backends/gdn_attn.py``),
  its layer's core (``model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py``)
  and Model Runner V2's accepted counts
  (``v1/worker/gpu/model_states/mamba_hybrid.py``);
- SGLang 0.5.23's commit after a verify (``srt/speculative/spec_utils.py``),
  its scatter of the accepted step (``srt/layers/attention/
  hybrid_linear_attn_backend.py``), its pools (``srt/mem_cache/memory_pool.py``)
  and its Mamba slot allocator (``srt/mem_cache/allocator/mamba.py``), on the
  path each runs on: the default one or ReplaySSM.

:func:`mutated_cache` lays a cache folder whose unpacked wheel is the
release's own, hard-linked, but for the one file changed; the adapter reads
it through ``$SSM_ROLLBACK_ENGINE_CACHE`` (``adapters/engines/wheels.py``).
Nothing of the engine is written into the repository: a mutant is the text it
replaces and the text it puts there, which must occur exactly once.

A mutant the tier cannot tell apart is ``equivalent``: its reason says why
no batch this protocol can send differs, and the tier checks that it passes
(docs/mutation.md, "The engines' own code").
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ssm_rollback_spec.sizing.releases import SGLANG, VLLM

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["MUTANTS", "Mutant", "MutantError", "mutated_cache"]

#: The unpacked folders the mutants' files are in, under the engine cache's ``unpacked/``.
_VLLM_WHEEL: Final = f"{VLLM.distribution}-{VLLM.version}"
#: SGLang's bookkeeping files, which its batch adapter unpacks beside its kernels.
_SGLANG_SOURCES: Final = f"{SGLANG.distribution}-{SGLANG.version}-bookkeeping"
_BUILDER: Final = f"{_VLLM_WHEEL}/vllm/v1/attention/backends/gdn_attn.py"
_LAYER: Final = f"{_VLLM_WHEEL}/vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py"
_V2: Final = f"{_VLLM_WHEEL}/vllm/v1/worker/gpu/model_states/mamba_hybrid.py"
_COMMIT: Final = f"{_SGLANG_SOURCES}/sglang/srt/speculative/spec_utils.py"
_SCATTER: Final = f"{_SGLANG_SOURCES}/sglang/srt/layers/attention/hybrid_linear_attn_backend.py"
_POOLS: Final = f"{_SGLANG_SOURCES}/sglang/srt/mem_cache/memory_pool.py"
_ALLOCATOR: Final = f"{_SGLANG_SOURCES}/sglang/srt/mem_cache/allocator/mamba.py"
#: Vectors run over every vLLM batch: both judges, the model's and the engine's own.
_V1: Final = ("--cache-mode", "none")
_RUNNER_V2: Final = ("--cache-mode", "none", "--runner", "v2")
#: SGLang's two paths (its adapter's ``--cache-mode``).
_SGLANG_DEFAULT: Final = ("--cache-mode", "snapshot")
_REPLAYSSM: Final = ("--cache-mode", "replayssm")
#: Why a choice of free slot or free row does not matter to a batch.
_ANY_FREE: Final = (
    "the adapter reads and writes each sequence through the row and slot SGLang gave it, "
    "so which free one SGLang hands out changes no state"
)
#: Why the spec rows' position does not matter: vLLM's own reorder puts them first.
_SPEC_FIRST: Final = (
    "vLLM's reorder (reorder_batch_to_split_decodes_and_prefills) puts every verify, "
    "done with its prompt and within the threshold of 1 + num_spec tokens, before any "
    "prompt chunk, so the spec rows are the batch's first rows and their tokens its first tokens"
)


class MutantError(ValueError):
    """A mutant's text is not in the release's file exactly once (the release moved on)."""


@dataclass(frozen=True)
class Mutant:
    """One line of an engine's unpacked wheel, changed: where, from what, to what, and run how."""

    name: str
    #: The file, relative to the engine cache's ``unpacked/`` folder.
    path: str
    old: str
    new: str
    #: The adapter's batch flags it is run with.
    flags: tuple[str, ...] = _V1
    #: Why no batch of the protocol tells it apart, for an equivalent mutant; else empty.
    equivalent: str = ""

    @property
    def engine(self) -> str:
        """The adapter the mutant is run through (``python -m adapters.engines.NAME``)."""
        return self.path.partition("-")[0]

    @property
    def release(self) -> str:
        """The start of the release's folders (``vllm-0.33.0``), that mutated_cache links."""
        folder = self.path.partition("/")[0]
        return folder.removesuffix("-bookkeeping")


#: The mutants of vLLM 0.33.0 and SGLang 0.5.23, each a decision of their
#: bookkeeping (docs/mutation.md).
MUTANTS: Final[tuple[Mutant, ...]] = (
    Mutant(
        "a verify with no drafts is not a spec row",
        _BUILDER,
        "spec_sequence_masks_cpu = num_decode_draft_tokens_cpu >= 0",
        "spec_sequence_masks_cpu = num_decode_draft_tokens_cpu > 0",
    ),
    Mutant(
        "the accepted counts taken by position",
        _BUILDER,
        "num_accepted_tokens = num_accepted_tokens[spec_sequence_masks_cpu]",
        "num_accepted_tokens = num_accepted_tokens[:num_spec_decodes]",
        equivalent=_SPEC_FIRST,
    ),
    Mutant(
        "a prompt's state in its row's last block",
        _BUILDER,
        "non_spec_sequence_masks_cpu, 0",
        "non_spec_sequence_masks_cpu, -1",
    ),
    Mutant(
        "a one-token prompt beside verifies left a decode",
        _BUILDER,
        "if num_decodes > 0 and num_spec_decodes > 0:",
        "if False:",
    ),
    Mutant(
        "the tokens split by position, not by the spec mask",
        _BUILDER,
        "index = torch.argsort(spec_token_masks, stable=True)",
        "index = torch.arange(spec_token_masks.numel(), device=spec_token_masks.device)",
    ),
    Mutant(
        "no one-token prompt counted a decode beside verifies",
        _BUILDER,
        "num_decodes = (non_spec_query_lens_cpu == 1).sum().item()",
        "num_decodes = 0",
        equivalent=(
            "beside verifies, the next lines move every such decode to the prefills "
            "(gdn_attn.py lines 422-430), which is where 0 puts them at once"
        ),
    ),
    Mutant(
        "a prompt's a gathered by position",
        _LAYER,
        "a_non_spec = a.index_select(0, non_spec_token_indx)",
        "a_non_spec = a[: non_spec_token_indx.numel()]",
    ),
    Mutant(
        "a prompt's b gathered by position",
        _LAYER,
        "b_non_spec = b.index_select(0, non_spec_token_indx)",
        "b_non_spec = b[: non_spec_token_indx.numel()]",
    ),
    Mutant(
        "a verify's a not gathered (vLLM #51812)",
        _LAYER,
        "a_spec = a.index_select(0, spec_token_indx)",
        "a_spec = a",
        equivalent=_SPEC_FIRST + " (#51812 lived where a prompt came first)",
    ),
    Mutant(
        "a prompt's final state never written (the symptom of vLLM #53051)",
        _LAYER,
        "ssm_state[prefill_state_indices] = last_recurrent_state.to(ssm_state.dtype)",
        "pass",
    ),
    Mutant(
        "a prompt from no prior state not zeroed",
        _LAYER,
        "initial_state[~prefill_has_initial_state, ...] = 0",
        "pass",
        equivalent=(
            "every sequence joins from its checkpoint, one computed token to vLLM, so every "
            "prompt row has an initial state and the mask selects none"
        ),
    ),
    Mutant(
        "Model Runner V2 keeps a row's last count for a new request (vLLM #48132)",
        _V2,
        "self.num_accepted_tokens_gpu[req_index].fill_(1)",
        "pass",
        _RUNNER_V2,
    ),
    Mutant(
        "Model Runner V2 takes a chunk that sampled nothing as a count of 0",
        _V2,
        "tl.store(num_accepted_ptr + req_state_idx, tl.maximum(num_sampled, 1))",
        "tl.store(num_accepted_ptr + req_state_idx, num_sampled)",
        _RUNNER_V2,
    ),
    Mutant(
        "SGLang takes the last accepted step by flat index, not the request's own",
        _COMMIT,
        "accept_index[req_idx, (accept_lens - 1).to(torch.int64)] - accept_indices_offset\n    )",
        "accept_index[req_idx, (accept_lens - 1).to(torch.int64)]\n    )",
        _SGLANG_DEFAULT,
    ),
    Mutant(
        "SGLang commits the step before the last accepted one",
        _COMMIT,
        "accept_index[req_idx, (accept_lens - 1).to(torch.int64)] - accept_indices_offset\n    )",
        "accept_index[req_idx, (accept_lens - 2).clamp(min=0).to(torch.int64)]"
        " - accept_indices_offset\n    )",
        _SGLANG_DEFAULT,
    ),
    Mutant(
        "SGLang's scatter skips a verify that kept only its bonus token",
        _SCATTER,
        "(steps >= 0)",
        "(steps >= 1)",
        _SGLANG_DEFAULT,
    ),
    Mutant(
        "SGLang's scatter skips a verify that kept every draft",
        _SCATTER,
        "& (steps < src.shape[2])",
        "& (steps < src.shape[2] - 1)",
        _SGLANG_DEFAULT,
    ),
    Mutant(
        "SGLang's scatter writes a request's state to its batch row, not its slot",
        _SCATTER,
        "dst[:, dst_indices[valid_indices]] = src[",
        "dst[:, src_indices[valid_indices]] = src[",
        _SGLANG_DEFAULT,
    ),
    Mutant(
        "SGLang's request row not mapped to its Mamba slot",
        _POOLS,
        "self.req_index_to_mamba_index_mapping[rows] = mamba_index_tensor",
        "pass",
        _SGLANG_DEFAULT,
    ),
    Mutant(
        "SGLang hands out the request row freed last from the list's head",
        _POOLS,
        "select_index = self.free_slots[-need_size:]\n        del self.free_slots[-need_size:]",
        "select_index = self.free_slots[:need_size]\n        del self.free_slots[:need_size]",
        _SGLANG_DEFAULT,
        equivalent=_ANY_FREE,
    ),
    Mutant(
        "SGLang hands a freed Mamba slot out first",
        _ALLOCATOR,
        "self.free_slots = torch.cat((self.free_slots, free_index))",
        "self.free_slots = torch.cat((free_index, self.free_slots))",
        _SGLANG_DEFAULT,
        equivalent=_ANY_FREE,
    ),
    Mutant(
        "ReplaySSM moves a cursor by the drafts kept, leaving the bonus token out",
        _COMMIT,
        "num_accepted=accept_lens,  # [bs], includes the bonus token",
        "num_accepted=accept_lens - 1,  # [bs], includes the bonus token",
        _REPLAYSSM,
    ),
    Mutant(
        "ReplaySSM's commit keys the ring by Mamba slot, not request row",
        _COMMIT,
        "replay_indices = batch.req_pool_indices\n",
        "replay_indices = state_batch_indices\n",
        _REPLAYSSM,
    ),
    Mutant(
        "ReplaySSM rolls the conv window back one token too far",
        _COMMIT,
        "state_batch_indices,\n            last_correct_step_indices,\n            src_indices_raw,"
        "\n        )\n        if batch.mamba_track_indices is not None:",
        "state_batch_indices,\n            last_correct_step_indices - 1,"
        "\n            src_indices_raw,\n        )"
        "\n        if batch.mamba_track_indices is not None:",
        _REPLAYSSM,
    ),
    Mutant(
        "ReplaySSM keeps a reused request row's write cursor",
        _POOLS,
        "spec_write_pos.index_fill_(0, fresh_rows, 0)",
        "pass",
        _REPLAYSSM,
    ),
    Mutant(
        "ReplaySSM keeps a reused request row's ring base",
        _POOLS,
        "self.mamba_pool.replayssm_cache_base.index_fill_(0, fresh_rows, 0)",
        "pass",
        _REPLAYSSM,
        equivalent=(
            "the write cursor is still reset, so the ring is empty, and a ring read and written "
            "from any base holds the same records: only their place in the circle moves"
        ),
    ),
    Mutant(
        "ReplaySSM keeps a reused request row's flush flag",
        _POOLS,
        "self.mamba_pool.replayssm_is_flush.index_fill_(0, fresh_rows, 0)",
        "pass",
        _REPLAYSSM,
        equivalent=(
            "the write cursor is still reset, so a stale flag folds an empty ring into the "
            "checkpoint (nothing) and the commit's new cursor is the same either way "
            "(gdn_replayssm_spec_decode.py lines 846-851)"
        ),
    ),
)


def mutated_cache(mutant: Mutant, unpacked: Path, into: Path, /) -> Path:
    """A cache folder at ``into``: the release's unpacked folders, with ``mutant``'s change.

    ``unpacked`` is the engine cache's ``unpacked/`` folder. Every folder of
    the mutant's release there (its kernels, and SGLang's bookkeeping files
    beside them) is copied as hard links to the cached files, but the one
    changed, which is written anew; the wheel's own cache is left as it is.

    Raises:
        MutantError: the mutant's text is not in its file exactly once.
    """
    for folder in sorted(unpacked.iterdir()):
        if folder.is_dir() and folder.name in {mutant.release, f"{mutant.release}-bookkeeping"}:
            shutil.copytree(folder, into / "unpacked" / folder.name, copy_function=os.link)
    target = into / "unpacked" / mutant.path
    text = target.read_text(encoding="utf-8")
    found = text.count(mutant.old)
    if found != 1:
        raise MutantError(f"{mutant.path}: {mutant.old!r} occurs {found} times, not once")
    target.unlink()
    target.write_text(text.replace(mutant.old, mutant.new), encoding="utf-8")
    return into
