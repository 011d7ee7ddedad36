# SPDX-License-Identifier: MIT OR Apache-2.0
"""Small changes to the engines' own code, made at test time in a copy of the unpacked wheel.

Each :class:`Mutant` is one line of vLLM 0.33.0 changed where its GDN
bookkeeping decides a row, a slot, a count or a gather: the metadata
builder (``v1/attention/backends/gdn_attn.py``), the layer's core
(``model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py``) and Model
Runner V2's accepted counts (``v1/worker/gpu/model_states/mamba_hybrid.py``).
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

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["MUTANTS", "Mutant", "MutantError", "mutated_cache"]

_BUILDER: Final = "vllm/v1/attention/backends/gdn_attn.py"
_LAYER: Final = "vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py"
_V2: Final = "vllm/v1/worker/gpu/model_states/mamba_hybrid.py"
#: Vectors run over every vLLM batch: both judges, the model's and the engine's own.
_V1: Final = ("--cache-mode", "none")
_RUNNER_V2: Final = ("--cache-mode", "none", "--runner", "v2")
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
    #: The file, relative to the unpacked wheel's folder.
    path: str
    old: str
    new: str
    #: The adapter's batch flags it is run with.
    flags: tuple[str, ...] = _V1
    #: Why no batch of the protocol tells it apart, for an equivalent mutant; else empty.
    equivalent: str = ""


#: The mutants of vLLM 0.33.0, each a decision of its GDN bookkeeping (docs/mutation.md).
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
)


def mutated_cache(mutant: Mutant, unpacked: Path, into: Path, /) -> Path:
    """A cache folder at ``into`` whose copy of ``unpacked`` has ``mutant``'s change.

    Every file is a hard link to the cached wheel's, but the one changed,
    which is written anew; the wheel's own cache is left as it is.

    Raises:
        MutantError: the mutant's text is not in its file exactly once.
    """
    copy = into / "unpacked" / unpacked.name
    shutil.copytree(unpacked, copy, copy_function=os.link)
    target = copy / mutant.path
    text = target.read_text(encoding="utf-8")
    found = text.count(mutant.old)
    if found != 1:
        raise MutantError(f"{mutant.path}: {mutant.old!r} occurs {found} times, not once")
    target.unlink()
    target.write_text(text.replace(mutant.old, mutant.new), encoding="utf-8")
    return into
