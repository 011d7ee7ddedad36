# SPDX-License-Identifier: MIT OR Apache-2.0
"""Small changes to the engines' own code, made at test time in a copy of the unpacked wheel.

Each :class:`Mutant` is one line of an engine's release changed where its
bookkeeping decides a row, a slot, a count or a gather:

- vLLM 0.33.0's GDN metadata builder (``v1/attention/backends/gdn_attn.py``),
  its layer's core (``model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py``),
  Model Runner V2's accepted counts
  (``v1/worker/gpu/model_states/mamba_hybrid.py``) and V1's align-mode copies
  between blocks (``v1/worker/mamba_utils.py``, run with blocks of 4 tokens);
- SGLang 0.5.23's commit after a verify (``srt/speculative/spec_utils.py``),
  its scatter of the accepted step (``srt/layers/attention/
  hybrid_linear_attn_backend.py``), its pools (``srt/mem_cache/memory_pool.py``)
  and its Mamba slot allocator (``srt/mem_cache/allocator/mamba.py``), on the
  path each runs on: the default one or ReplaySSM.

:class:`MutatedCache` lays a cache folder whose unpacked wheel is the
release's own, hard-linked, but for the one file changed; the adapter reads
it through ``$SSM_ROLLBACK_ENGINE_CACHE`` (``adapters/engines/wheels.py``).
Nothing of the engine is written into the repository: a mutant is the text it
replaces and the text it puts there, which must occur exactly once.

A mutant the tier cannot tell apart is ``equivalent``: its reason says why
no batch this protocol can send differs, and the tier checks that it passes
(docs/mutation.md, "The engines' own code"). One that is wrong in the engine
but only on a path no batch reaches is ``unreached``, with the path named; it
must pass too, so the day a batch reaches that path its row has to move.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ssm_rollback_spec.releases import SGLANG, VLLM

__all__ = ["MUTANTS", "Mutant", "MutantError", "MutatedCache"]

#: The unpacked folders the mutants' files are in, under the engine cache's ``unpacked/``.
_VLLM_WHEEL: Final = f"{VLLM.distribution}-{VLLM.version}"
#: SGLang's bookkeeping files, which its batch adapter unpacks beside its kernels.
_SGLANG_SOURCES: Final = f"{SGLANG.distribution}-{SGLANG.version}-bookkeeping"
_BUILDER: Final = f"{_VLLM_WHEEL}/vllm/v1/attention/backends/gdn_attn.py"
_LAYER: Final = f"{_VLLM_WHEEL}/vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py"
_V2: Final = f"{_VLLM_WHEEL}/vllm/v1/worker/gpu/model_states/mamba_hybrid.py"
_COPIES: Final = f"{_VLLM_WHEEL}/vllm/v1/worker/mamba_utils.py"
_COMMIT: Final = f"{_SGLANG_SOURCES}/sglang/srt/speculative/spec_utils.py"
_SCATTER: Final = f"{_SGLANG_SOURCES}/sglang/srt/layers/attention/hybrid_linear_attn_backend.py"
_POOLS: Final = f"{_SGLANG_SOURCES}/sglang/srt/mem_cache/memory_pool.py"
_ALLOCATOR: Final = f"{_SGLANG_SOURCES}/sglang/srt/mem_cache/allocator/mamba.py"
#: Vectors run over every vLLM batch: both judges, the model's and the engine's own.
_V1: Final = ("--cache-mode", "none")
_RUNNER_V2: Final = ("--cache-mode", "none", "--runner", "v2")
#: Mode "align" with blocks of 4 tokens: every batch crosses blocks, so the runner's copies run.
_ACROSS_BLOCKS: Final = ("--cache-mode", "align", "--block-size", "4")
#: The model's judge alone (batch.json): each caught mutant of the copies fails
#: it, and it costs less than both; an equivalent one still runs both judges.
_MODELS_JUDGE: Final = ("RB-REPLAY-12",)
#: A prompt's rows, where a change to the prompt path alone is seen: vLLM's
#: prompts are in batch_alone.json's cases (RB-REPLAY-13), and batch.json's in
#: mode "none" have none, so the engine's own judge runs first.
_PROMPTS_FIRST: Final = ("RB-REPLAY-13", "RB-REPLAY-12")
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
    #: For a mutant that is wrong in the engine but on a path no batch reaches:
    #: which path, and why the protocol cannot send it; else empty.
    unreached: str = ""
    #: The clauses whose cases it is run on: both judges' (``batch.json``'s and
    #: ``batch_alone.json``'s), or the model's alone where that is enough; a
    #: caught mutant runs them in this order, one at a time, until one fails.
    clauses: tuple[str, ...] = ("RB-REPLAY-12", "RB-REPLAY-13")

    @property
    def verdict(self) -> str:
        """Its row's verdict on docs/mutation.md: caught, equivalent or not reached."""
        if self.equivalent:
            return "equivalent"
        return "not reached" if self.unreached else "caught"

    @property
    def engine(self) -> str:
        """The adapter the mutant is run through (``python -m adapters.engines.NAME``)."""
        return self.path.partition("-")[0]

    @property
    def release(self) -> str:
        """The start of the release's folders (``vllm-0.33.0``), that MutatedCache links."""
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
        clauses=_PROMPTS_FIRST,
    ),
    Mutant(
        "a one-token prompt beside verifies left a decode",
        _BUILDER,
        "if num_decodes > 0 and num_spec_decodes > 0:",
        "if False:",
        clauses=_PROMPTS_FIRST,
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
            "the line runs only in a forward with verifies (one without has no spec mask and "
            "takes the other branch, gdn_attn.py lines 338-353 and 356-394, so a one-token "
            "prompt alone is still a decode), and there the next lines move every such decode "
            "to the prefills (lines 422-430), which is where 0 puts them at once"
        ),
    ),
    Mutant(
        "a prompt's a gathered by position",
        _LAYER,
        "a_non_spec = a.index_select(0, non_spec_token_indx)",
        "a_non_spec = a[: non_spec_token_indx.numel()]",
        clauses=_PROMPTS_FIRST,
    ),
    Mutant(
        "a prompt's b gathered by position",
        _LAYER,
        "b_non_spec = b.index_select(0, non_spec_token_indx)",
        "b_non_spec = b[: non_spec_token_indx.numel()]",
        clauses=_PROMPTS_FIRST,
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
        clauses=_PROMPTS_FIRST,
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
        "the running block one column late",
        _COPIES,
        "curr_state_idx = num_blocks - 1 - num_speculative_blocks",
        "curr_state_idx = num_blocks - num_speculative_blocks",
        _ACROSS_BLOCKS,
        clauses=_MODELS_JUDGE,
    ),
    Mutant(
        "a moved state taken from the first spec column, not the accepted one",
        _COPIES,
        "accept_token_bias = int(input_batch.num_accepted_tokens_cpu[i]) - 1",
        "accept_token_bias = 0",
        _ACROSS_BLOCKS,
        clauses=_MODELS_JUDGE,
    ),
    Mutant(
        "the count not reset after a state moves block",
        _COPIES,
        "input_batch.num_accepted_tokens_cpu[i] = 1",
        "pass",
        _ACROSS_BLOCKS,
        clauses=_MODELS_JUDGE,
    ),
    Mutant(
        "a state never moved into a new block",
        _COPIES,
        "if prev_state_idx != -1 and prev_state_idx != curr_state_idx:",
        "if False:",
        _ACROSS_BLOCKS,
        clauses=_MODELS_JUDGE,
    ),
    Mutant(
        "a new request's block taken one column late",
        _COPIES,
        "prev_state_idx = (req_state.num_computed_tokens - 1) // block_size",
        "prev_state_idx = req_state.num_computed_tokens // block_size",
        _ACROSS_BLOCKS,
        clauses=_MODELS_JUDGE,
    ),
    Mutant(
        "a finished request's block kept for the next holder",
        _COPIES,
        "cleanup_mamba_state_idx(scheduler_output, mamba_state_idx)",
        "pass",
        _ACROSS_BLOCKS,
        equivalent=(
            "each join is a new request id, as vLLM's are, so no entry is looked up after "
            "its request finished; the cleanup matters for a preempted request resumed "
            "under its old id, which no batch of the protocol is"
        ),
    ),
    Mutant(
        "the pre-copy also run within one block",
        _COPIES,
        "if src_col < 0 or src_col == dst_col:",
        "if src_col < 0:",
        _ACROSS_BLOCKS,
        equivalent=(
            "preprocess_mamba sets a row's source column only where the state changes "
            "column and -1 elsewhere (mamba_utils.py lines 1487, 1517 and 1521), "
            "so the source is never the destination"
        ),
    ),
    Mutant(
        "the post-copy skipped when the boundary is the running state's",
        _COPIES,
        "needs_copy = aligned_new_computed >= num_tokens_running_state",
        "needs_copy = aligned_new_computed > num_tokens_running_state",
        _ACROSS_BLOCKS,
        clauses=_MODELS_JUDGE,
    ),
    Mutant(
        "the count kept after a copy within the running block",
        _COPIES,
        "tl.store(num_accepted_tokens_out_ptr + req_idx, 1)",
        "tl.store(num_accepted_tokens_out_ptr + req_idx, num_accepted)",
        _ACROSS_BLOCKS,
        clauses=_MODELS_JUDGE,
    ),
    Mutant(
        "the post-copy's token bias one late",
        _COPIES,
        "accept_token_bias = aligned_new_computed - num_tokens_running_state",
        "accept_token_bias = aligned_new_computed - num_tokens_running_state + 1",
        _ACROSS_BLOCKS,
        clauses=_MODELS_JUDGE,
    ),
    Mutant(
        "the boundary's state saved one column late",
        _COPIES,
        "dest_block_idx = aligned_new_computed // block_size - 1",
        "dest_block_idx = aligned_new_computed // block_size",
        _ACROSS_BLOCKS,
        clauses=_MODELS_JUDGE,
    ),
    Mutant(
        "the tokens after a verify counted with the bonus token",
        _COPIES,
        "new_num_computed = num_tokens_running_state + num_accepted - 1",
        "new_num_computed = num_tokens_running_state + num_accepted",
        _ACROSS_BLOCKS,
        clauses=_MODELS_JUDGE,
    ),
    Mutant(
        "the drafts not taken off the running state's tokens",
        _COPIES,
        "num_tokens_running_state = num_computed + num_scheduled - num_draft",
        "num_tokens_running_state = num_computed + num_scheduled",
        _ACROSS_BLOCKS,
        clauses=_MODELS_JUDGE,
    ),
    Mutant(
        "h moved from the first spec column, not the accepted one",
        _COPIES,
        "actual_src_block_id = tl.load(block_table_base + src_col + token_bias).to(tl.int64)",
        "actual_src_block_id = tl.load(block_table_base + src_col).to(tl.int64)",
        _ACROSS_BLOCKS,
        clauses=_MODELS_JUDGE,
    ),
    Mutant(
        "the conv window moved without its accepted offset",
        _COPIES,
        "src_addr = src_block_addr + token_bias.to(tl.int64) * token_bytes",
        "src_addr = src_block_addr",
        _ACROSS_BLOCKS,
        clauses=_MODELS_JUDGE,
    ),
    Mutant(
        "the post-copy handed no drafts",
        _COPIES,
        "draft_np[i] = len(scheduled_spec_tokens.get(req_id, []))",
        "draft_np[i] = 0",
        _ACROSS_BLOCKS,
        clauses=_MODELS_JUDGE,
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


def _bytecode(source: Path, /) -> tuple[Path, ...]:
    """Where a Python child may have cached ``source``'s bytecode: beside it, and under a prefix.

    The suite's children cache bytecode under ``$PYTHONPYCACHEPREFIX`` where
    it is set (tests/conftest.py), in a tree that mirrors the sources' absolute
    paths; else in ``__pycache__`` beside the source.
    """
    name = f"{source.stem}.{sys.implementation.cache_tag}.pyc"
    places = [source.parent / "__pycache__" / name]
    prefix = os.environ.get("PYTHONPYCACHEPREFIX")
    if prefix:
        places.append(Path(prefix) / source.parent.absolute().relative_to("/") / name)
    return tuple(places)


class MutatedCache:
    """A cache folder whose unpacked releases are the cached ones, hard-linked, but for some files.

    One is kept for a test process, in one folder, and takes one mutant (or
    one path's equivalent mutants together) after another: the files the
    last changed are linked back to the release's, and the next ones' are
    written anew. The folder stays where it is, so the
    bytecode its adapters' children cache for the releases' files (by their
    paths) is read again by the next mutant's, and no mutant compiles vLLM's
    modules anew: about 8 seconds of each run. The bytecode of the files that
    differ from the last run's is removed, so none is read for another text.
    """

    def __init__(self, unpacked: Path, folder: Path, /) -> None:
        """``unpacked`` is the engine cache's ``unpacked/`` folder; ``folder`` the cache made."""
        self._unpacked = unpacked
        self._folder = folder
        self._changed: list[Path] = []

    def apply(self, *mutants: Mutant) -> Path:
        """The cache folder, with ``mutants``' changes, no other (``$SSM_ROLLBACK_ENGINE_CACHE``).

        Every folder of the mutants' releases (their kernels, and SGLang's
        bookkeeping files beside them) is linked the first time it is asked
        for; the wheel's own cache is left as it is. Mutants of one file are
        made in turn, each on the text the ones before it left.

        Raises:
            MutantError: a mutant's text is not in its file exactly once.
        """
        wanted = {name for m in mutants for name in (m.release, f"{m.release}-bookkeeping")}
        for folder in sorted(self._unpacked.iterdir()):
            copy = self._folder / "unpacked" / folder.name
            if folder.is_dir() and folder.name in wanted and not copy.exists():
                shutil.copytree(folder, copy, copy_function=os.link)
        texts: dict[str, str] = {}
        for mutant in mutants:
            if mutant.path not in texts:
                texts[mutant.path] = (self._unpacked / mutant.path).read_text(encoding="utf-8")
            found = texts[mutant.path].count(mutant.old)
            if found != 1:
                raise MutantError(f"{mutant.path}: {mutant.old!r} occurs {found} times, not once")
            texts[mutant.path] = texts[mutant.path].replace(mutant.old, mutant.new)
        self._restore()
        for path, text in texts.items():
            target = self._folder / "unpacked" / path
            target.unlink()
            target.write_text(text, encoding="utf-8")
            self._changed.append(target)
            self._forget(target)
        return self._folder

    def _restore(self) -> None:
        for changed in self._changed:
            relative = changed.relative_to(self._folder / "unpacked")
            changed.unlink()
            os.link(self._unpacked / relative, changed)
            self._forget(changed)
        self._changed = []

    @staticmethod
    def _forget(source: Path, /) -> None:
        for place in _bytecode(source):
            place.unlink(missing_ok=True)
