# SPDX-License-Identifier: MIT OR Apache-2.0
"""The llama.cpp unit: what llama.cpp 0c1e57098 holds per sequence, and its server's copies.

The facts are :mod:`.facts`'s. Per sequence and GDN
layer, FP32: base h + (K-1)c; speculative ``n_rs_seq`` x (h + (K-1)c), the
snapshots, with ``n_rs_seq`` = the drafts per step where the architecture has
them (Qwen3.5); for Qwen3-Next, which has none, one whole-state checkpoint
(``spec_ckpt``) of every layer's h + (K-1)c and its headers, in host memory.
Its rows add the server's context checkpoints and the same state beside the
seed's ring and SGLang's ReplaySSM ring.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ....releases import LLAMA_CPP, LLAMA_CPP_COMMIT
from ...rings import SizingOverflowError, seed_ring_bytes
from ...state import SnapshotFigures, SnapshotSizing
from ...unit import EngineUnit, layer_bytes
from ...wording import count, human, ratio
from ..replayssm import facts as replayssm
from . import facts as llamacpp

if TYPE_CHECKING:
    from ...dtypes import StateDtypes
    from ...state import Drafting, Model, Setup
    from ...wording import Row

__all__ = ["LLAMA_CPP_VIEW", "LlamaCppFigures", "LlamaCppSizing", "LlamaCppView"]


class LlamaCppFigures(SnapshotFigures):
    """The llama.cpp view's figures as JSON: the common ones and its own."""

    architecture: str | None
    n_rs_seq: int
    checkpoint_bytes: int
    speculative_checkpoint: bool
    ctx_checkpoints: int
    ctx_checkpoint_bytes_per_request: int
    seed_ring_bytes_per_slot: int | None
    replayssm_ring_bytes_per_request: int


@dataclass(frozen=True)
class LlamaCppSizing(SnapshotSizing):
    """What llama.cpp holds, with its snapshot count, its checkpoints and the rings beside it.

    ``checkpoint_bytes`` is one sequence's saved recurrent state; the
    speculative state is one of them when ``speculative_checkpoint`` (no
    snapshots), and the server keeps up to ``ctx_checkpoints`` more per slot.
    The rings are per slot (the seed's, at k = drafts + 1; None past the
    runtime's usize) and per request (ReplaySSM's), for the same model.
    """

    architecture: str | None = None
    n_rs_seq: int = 0
    checkpoint_bytes: int = 0
    speculative_checkpoint: bool = False
    ctx_checkpoints: int = llamacpp.CTX_CHECKPOINTS
    seed_ring_bytes_per_slot: int | None = None
    replayssm_ring_bytes_per_request: int = 0

    @property
    def ctx_checkpoint_bytes_per_request(self) -> int:
        """What a slot's context checkpoints hold at most, in host memory."""
        return self.ctx_checkpoints * self.checkpoint_bytes

    def as_dict(self) -> LlamaCppFigures:
        """The figures as a JSON-ready mapping, llama.cpp's own after the common ones."""
        return LlamaCppFigures(
            **super().as_dict(),
            architecture=self.architecture,
            n_rs_seq=self.n_rs_seq,
            checkpoint_bytes=self.checkpoint_bytes,
            speculative_checkpoint=self.speculative_checkpoint,
            ctx_checkpoints=self.ctx_checkpoints,
            ctx_checkpoint_bytes_per_request=self.ctx_checkpoint_bytes_per_request,
            seed_ring_bytes_per_slot=self.seed_ring_bytes_per_slot,
            replayssm_ring_bytes_per_request=self.replayssm_ring_bytes_per_request,
        )


class LlamaCppView(EngineUnit):
    """llama.cpp: n_rs_seq FP32 snapshots of h + (K-1)c, or a whole-state checkpoint."""

    name = "llama.cpp"
    engine = llamacpp.ENGINE
    # llama.cpp by its own commit: llama-cpp-python's version is not llama.cpp's.
    plot_label = f"llama.cpp {LLAMA_CPP_COMMIT} n_rs_seq snapshots (FP32)"
    base_formula = "(h + (K-1) conv columns), FP32"
    speculative_formula = "n_rs_seq x (h + (K-1) conv columns), FP32, n_rs_seq = num_drafts"
    release = LLAMA_CPP
    sources = llamacpp.SOURCES
    pads_pools = False

    def describe(self, setup: Setup, /) -> str:
        """llama-server's speculative setup, whatever the model."""
        del setup
        return (
            "llama-server with MTP drafts: n_rs_seq = --spec-draft-n-max snapshots where"
            " the architecture has them, else a whole-state checkpoint per verify;"
            f" --ctx-checkpoints {llamacpp.CTX_CHECKPOINTS}"
        )

    def dtypes(self, model: Model, setup: Setup, /) -> StateDtypes:
        """FP32 for both states (:func:`..llamacpp.view_dtypes`)."""
        return llamacpp.view_dtypes(model, setup)

    def size(self, model: Model, setup: Setup, drafting: Drafting, /) -> LlamaCppSizing:
        """The snapshots at ``n_rs_seq`` = the drafts, or one checkpoint without them."""
        d = model.dimensions
        dtypes = self.dtypes(model, setup)
        plane = d.num_gdn_layers * llamacpp.layer_state_bytes(d)
        saved = llamacpp.checkpoint_bytes(d)
        snapshots = llamacpp.has_snapshots(model)
        n_rs_seq = drafting.num_drafts if snapshots else 0
        checkpointed = not snapshots and drafting.num_drafts > 0
        architecture = llamacpp.gguf_architecture(model)
        if snapshots:
            how = f"n_rs_seq = {n_rs_seq} snapshots per sequence"
        else:
            how = f"{architecture} has no snapshots (n_rs_seq clamped to 0): spec_ckpt per verify"
        record = replayssm.replayssm_record_bytes(d, replayssm.view_dtypes(model, setup).conv)
        try:
            seed_ring: int | None = seed_ring_bytes(d, drafting.num_drafts + 1, 1)
        except SizingOverflowError:
            # The review's own ring (at num_intermediates) may still fit.
            seed_ring = None
        h, column = layer_bytes(d, dtypes)
        layers = model.sglang_gdn_layers or d.num_gdn_layers
        return LlamaCppSizing(
            view=self.name,
            engine=self.engine,
            setup=f"{how}; {self.describe(setup)}",
            dtypes=dtypes,
            recurrent_bytes_per_layer=h,
            conv_column_bytes_per_layer=column,
            requests=drafting.requests,
            base_bytes_per_request=plane,
            speculative_bytes_per_request=saved if checkpointed else n_rs_seq * plane,
            architecture=architecture,
            n_rs_seq=n_rs_seq,
            checkpoint_bytes=saved,
            speculative_checkpoint=checkpointed,
            seed_ring_bytes_per_slot=seed_ring,
            # SGLang allocates its ring only to speculate.
            replayssm_ring_bytes_per_request=(
                replayssm.cache_len(setup) * record * layers if drafting.num_drafts else 0
            ),
        )

    def rows(self, sizing: SnapshotSizing, /) -> list[Row]:
        """Its snapshots, its whole-state checkpoint and context checkpoints, and the rings."""
        if not isinstance(sizing, LlamaCppSizing):
            return []
        s = sizing
        if s.architecture in llamacpp.NO_ROLLBACK_ARCHITECTURES:
            snapshots = (
                f"0: llama.cpp clamps it, {s.architecture} is not in llm_arch_supports_rs_rollback"
            )
        elif s.n_rs_seq == 0:
            snapshots = "0 (no drafts)"
        else:
            snapshots = (
                f"{s.n_rs_seq} per sequence: llama_memory_seq_rm rolls back 1 to"
                f" {s.n_rs_seq} tokens"
            )
        checkpoint = f"{human(s.checkpoint_bytes)} per sequence, h + (K-1) conv columns of"
        checkpoint += " every GDN layer and their headers (PARTIAL_ONLY)"
        if s.speculative_checkpoint:
            checkpoint += "; saved before each verify, restored on a partial acceptance"
        held = s.ctx_checkpoint_bytes_per_request
        spec = s.speculative_bytes_per_request
        ring = s.seed_ring_bytes_per_slot
        seed = "past the 64-bit usize range" if ring is None else human(ring)
        return [
            ("n_rs_seq", snapshots),
            ("whole-state checkpoint", checkpoint),
            (
                "context checkpoints",
                (
                    f"up to {s.ctx_checkpoints} per slot (--ctx-checkpoints):"
                    f" {human(held)} per slot, {human(held * s.requests)} for"
                    f" {count(s.requests, 'request')}, host memory"
                ),
            ),
            (
                "beside the rings",
                (
                    f"seed ring {seed} per slot (k = num_drafts + 1),"
                    f" ReplaySSM ring {human(s.replayssm_ring_bytes_per_request)} per request:"
                    f" the speculative state is {ratio(_over(spec, s.seed_ring_bytes_per_slot))}"
                    f" and {ratio(_over(spec, s.replayssm_ring_bytes_per_request))} them"
                ),
            ),
        ]

    def speculative_says(self, sizing: SnapshotSizing, /) -> str:
        """Snapshots on the GPU, or for an architecture without them the copy in host memory."""
        if isinstance(sizing, LlamaCppSizing) and sizing.speculative_checkpoint:
            return (
                "(h + (K-1) conv columns) and headers, FP32: one saved copy in host memory, from"
                " before each verify until its acceptance is known (spec_ckpt)"
            )
        return self.speculative_formula

    def total_rows(self, sizing: SnapshotSizing, /) -> list[Row]:
        """Device and host memory apart, where the speculative state is a host-side copy."""
        if isinstance(sizing, LlamaCppSizing) and sizing.speculative_checkpoint:
            return [
                ("on the GPU", f"{human(sizing.base_bytes)}  (the base state)"),
                ("in host memory", f"{human(sizing.speculative_bytes)}  (the saved copy)"),
            ]
        return super().total_rows(sizing)

    def in_host_memory(self, sizing: SnapshotSizing, /) -> bool:
        """Whether the speculative state is the saved copy in host memory (no snapshots)."""
        return isinstance(sizing, LlamaCppSizing) and sizing.speculative_checkpoint

    def plot_says(self, *, host: bool) -> str:
        """The snapshots on the GPU, or the saved copy in host memory."""
        if host:
            return f"llama.cpp {LLAMA_CPP_COMMIT} saved copy before each verify (spec_ckpt)"
        return self.plot_label


def _over(value: int, ring: int | None, /) -> float | None:
    return value / ring if ring else None


#: The unit.
LLAMA_CPP_VIEW: Final = LlamaCppView()
