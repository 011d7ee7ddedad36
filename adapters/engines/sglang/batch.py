# SPDX-License-Identifier: MIT OR Apache-2.0
"""SGLang 0.5.23's own bookkeeping over a batch: its Mamba pool, its verify and its commit.

The protocol's ``replay_batch`` (docs/protocol.md, RB-REPLAY-12) run as
SGLang runs a speculative verify of a batch of requests, with SGLang's own
code for every step that decides which slot, which row, which step and which
count (each cited by file and line in sglang 0.5.23):

- Slots. A joining sequence is a ``Req``: ``HybridReqToTokenPool.alloc``
  (``srt/mem_cache/memory_pool.py`` line 1572) takes its request row
  (``ReqToTokenPool.alloc_rows``, line 437, from the tail of the free list),
  resets that row's ReplaySSM cursors, takes a Mamba slot from
  ``MambaSlotAllocator`` (``srt/mem_cache/allocator/mamba.py`` line 65, slot
  0 reserved) and writes the row's slot into ``req_index_to_mamba_index_mapping``.
  A finished one is freed by ``HybridReqToTokenPool.free_mamba_cache`` (line
  1826) and ``ReqToTokenPool.free`` (line 462); a later sequence gets the
  freed slot when the free list reaches it. The state tensors are
  ``MambaPool``'s (line 505), built by its own ``__init__``: ``temporal``,
  ``conv``, the per-draft ``intermediate_ssm`` and ``intermediate_conv_window``
  (dense, as SGLang lays them out on a CPU), and under ReplaySSM the rings and
  the cursors ``replayssm_spec_write_pos``, ``replayssm_cache_base`` and
  ``replayssm_is_flush``, keyed by request row, not by Mamba slot.
- Verify. ``prepare_mamba_track_for_verify`` (``srt/speculative/spec_utils.py``
  line 913) first, as every speculative worker calls it; then, as the GDN
  backend runs ``target_verify`` (``srt/layers/attention/linear/gdn_backend.py``
  lines 1040-1060 and 1104-1162): every request's window is laid out as
  ``draft_token_num`` tokens (SGLang verifies each request with the same
  count, line 1042), its slot is ``get_mamba_indices(req_pool_indices)``,
  and its scratch row is ``select_verify_intermediate_state_indices``
  (``linear/utils.py`` line 111). ``causal_conv1d_update``
  (``kernels/ops/mamba/causal_conv1d_triton.py``) writes each token's conv
  window to ``intermediate_conv_window``; the SSM verify is, by path,
  ``fused_sigmoid_gating_delta_rule_update``
  (``kernels/ops/attention/linear/fused_sigmoid_gating_recurrent.py`` line
  538, ``disable_state_update`` with ``intermediate_states_buffer``: SGLang's
  default, a state snapshot per draft token) or
  ``GDNAttnBackend._replayssm_target_verify`` (``gdn_backend.py`` line 1441,
  ``--enable-linear-replayssm-spec``).
- Commit. ``commit_mamba_states_after_verify`` (``spec_utils.py`` line 1005),
  with SGLang's ``accept_lens`` (accepted drafts plus the bonus token) and
  ``accept_index`` (each accepted token's flat index, -1 after): its
  ``_verify_commit_step_indices`` (line 943) turns them into the last
  accepted step of each request; the default path then runs
  ``HybridLinearAttnBackend.update_mamba_state_after_mtp_verify``
  (``srt/layers/attention/hybrid_linear_attn_backend.py`` line 1514) and its
  ``scatter_mamba_states_after_mtp_verify``
  (``kernels/ops/mamba/mamba_state_scatter_triton.py`` line 781); ReplaySSM
  runs ``commit_gdn_replayssm_spec`` and ``commit_gdn_replayssm_circular``
  (``kernels/ops/attention/linear/gdn_replayssm_spec_decode.py`` lines 1234
  and 1269): the cursors move by the accepted count and a flagged ring is
  folded into ``temporal``.

EMULATED or stood in, each for its reason (the scatters and the extend's
kernels in ``engine_code.py``, the names and objects in ``stand_ins.py``):

- The scatters. ``fused_mamba_state_scatter_with_mask`` and
  ``fused_conv_window_scatter_with_mask`` refuse tensors that are not on a
  CUDA or XPU device (``mamba_state_scatter_triton.py`` lines 343 and 507). In
  their place runs SGLang's own non-CUDA scatter,
  ``HybridLinearAttnBackend._scatter_speculative_state_with_mask``
  (``hybrid_linear_attn_backend.py`` lines 1619-1657): the same rows, steps
  and slots, as a torch gather. So replay_batch runs on ``--device cpu`` only.
- The pool's construction. ``HybridReqToTokenPool.__init__`` is not run (it
  builds the PLE side pools, the int8 checkpoint pool and layer-transfer
  state, none of which a GDN layer uses, from imports a CPU cannot make);
  the adapter builds what it builds for a GDN model: ``ReqToTokenPool.__init__``,
  ``MambaPool(...)``, ``MambaSlotAllocator(...)``, the row-to-slot table
  (``torch.zeros(size + 1)``) and the PLE pools disabled. ``MambaPool`` takes
  its ``cache_params`` as a plain object with the fields it reads (conv and
  temporal shapes and dtypes; ``is_kda`` false).
- Names the extracted code reads from modules a CPU cannot import:
  ``envs`` (every flag off, except ``SGLANG_DISABLE_FUSED_MAMBA_SLOT_OPS``:
  the fused slot kernels are CUDA-only), ``get_exec`` (no Mamba extra
  buffer: no prefix-cache tracking, so ``prepare_mamba_track_for_verify``
  returns at once and no track slot is written), ``mambaish_config`` (the
  layer is a GDN layer), ``get_eager_max_batch_size`` (no padding rows),
  the memory saver and custom pool (off).
- The joins. A joining sequence's checkpoint is written into its cleared
  slot (``MambaPool.clear_slots``), as a prefix-cache hit's ``copy_from``
  leaves it; it counts as a cached prefix, so an extend of the sequence has
  a prefix (``extend_prefix_lens``: one for the checkpoint, plus the rows
  run since), and its conv starts from the slot's state.
- The extend's setting. A step's prompt rows (a prefill, or a prompt chunk
  alone, the form ``prompt-chunks``) run before its verifies, as one extend
  of them all, through SGLang's own code: the metadata
  (``MambaAttnBackendBase._forward_metadata``, ``hybrid_linear_attn_backend.py``
  line 166: ``query_start_loc`` from the extend's starts and lengths, the
  slots by ``get_mamba_indices``), then ``GDNAttnBackend.forward_extend``
  (``gdn_backend.py`` lines 948-1200: ``causal_conv1d_fn`` with
  ``has_initial_state``, writing each slot's conv state; ``fused_gdn_gating``;
  ``GDNKernelDispatcher.extend`` and ``TritonGDNKernel.extend``, lines 441
  and ``gdn_triton.py`` 169-214: SGLang's FLA chunk rule, which writes each
  slot's state in place). Stood in: ``ForwardBatch`` (the fields the extend
  reads, in extend mode, no prefix-cache tracking), ``ForwardMetadata`` (its
  fields, no paged conv table or state checkpoints), the backend's and the
  dispatcher's ``__init__`` (the pool; the Triton kernel, no multi-item
  scoring), and the device tests: ``is_cpu`` false picks the Triton kernels
  (on a CPU SGLang calls sgl-kernel's compiled ``chunk_gated_delta_rule_cpu``,
  ``gdn_triton.py`` lines 27-30, which the wheel does not hold) and
  ``is_cuda`` false keeps ``torch.split`` for the q, k, v split. The chunk
  rule's kernels address their tiles with block pointers, which Triton 3.9.0
  removed: SGLang's adapter runs on Triton 3.8.0, the release SGLang's own
  ``torch==2.14.1`` pin brings (``extend.py``; ``adapters/engines/environment.py``).
  ``draft_token_num`` is the request's longest window: a prompt is not a
  verify, and takes any length.

SGLang's classes and functions are not imported as modules (each pulls in
the whole server): each is read from the wheel's file, parsed, and the
definitions named compiled with the file's name and line numbers and run
with the names above (``wheel_code.py``); nothing of SGLang's is copied into
this repository.

The pipeline is ``sglang-bf16`` (BF16 activations and conv state, FP32
``temporal``). Its model follows SGLang's verify kernels, not the extend's
chunk rule (BF16 normed k and BF16 w and u tiles): on the corpus's plans
with prompts the state is up to 3.9e-3 of the largest value from the
model's on the default path, 4.2e-3 from its ReplaySSM design on ReplaySSM,
beyond the 2e-3 bound (``tests/kernels/test_sglang_batch.py``), so the model judges SGLang's
batches without prefill rows and its prompts are judged against SGLang
itself (RB-REPLAY-13). A window shorter than ``draft_token_num`` (the request's
longest) is padded with zero rows, which no accepted count reaches. The key
heads are padded to 32 channels as for ``replay`` (``shapes.py``).
"""

from __future__ import annotations

import enum
import types
from typing import TYPE_CHECKING, Any, Final

from .. import serve
from .engine_code import engine_code
from .shapes import Shapes
from .stand_ins import ExtendMode, Kv

if TYPE_CHECKING:
    from collections.abc import Callable

    from ssm_rollback_spec.harness.replay_wire import ReplayBatchRequest, ReplayRow, ReplayState

__all__ = ["RING_LENGTH", "BatchPath", "replay_batch"]

#: SGLang's default ring length L (``linear_replayssm_cache_len``).
RING_LENGTH: Final = 16


class BatchPath(enum.Enum):
    """Which of SGLang's speculative paths the batch runs."""

    #: SGLang's default: a state per draft token in ``intermediate_ssm``, the
    #: accepted one scattered into ``temporal``.
    SNAPSHOT = "snapshot"
    #: ``--enable-linear-replayssm-spec``: a ring of records per request row.
    REPLAYSSM = "replayssm"


class _Batch:
    """One request's run: SGLang's pool, its requests, and each step's verify and commit."""

    def __init__(self, request: ReplayBatchRequest, path: BatchPath, /) -> None:
        import numpy as np  # noqa: PLC0415

        self.engine = engine = engine_code()
        torch = self.torch = engine.torch
        self.path = path
        dims = request["dims"]
        self.shapes = shapes = Shapes(*serve.layer_dims(dims))
        # SGLang's draft_token_num: the longest window (a prompt runs as an extend, any length).
        self.drafts = (
            max((len(entry["rows"]) for step in request["steps"] for entry in step), default=1) or 1
        )
        if path is BatchPath.REPLAYSSM and 2 * self.drafts > RING_LENGTH:
            raise serve.EngineLimitError(
                f"SGLang's ring of {RING_LENGTH} records takes windows of at most "
                f"{RING_LENGTH // 2} tokens, got {self.drafts}"
            )
        size = request["slots"]
        bf16, f32 = torch.bfloat16, torch.float32
        cache_params = types.SimpleNamespace(
            shape=types.SimpleNamespace(
                conv=[(shapes.conv_dim, shapes.width - 1)],
                # [HV, V, K]: the layout SGLang's GDN kernels read temporal in.
                temporal=(shapes.nv, shapes.dv, shapes.dk),
                conv_kernel=shapes.width,
                disable_conv_window_dedup=False,
                num_k_heads_per_tp=shapes.nk,
            ),
            dtype=types.SimpleNamespace(conv=bf16, temporal=f32),
            is_kda=False,
        )
        pools = engine.memory_pool
        pool = object.__new__(pools.HybridReqToTokenPool)
        pools.ReqToTokenPool.__init__(
            pool, size=size, max_context_len=1, device="cpu", enable_memory_saver=False
        )
        pool.enable_mamba_extra_buffer = False
        pool.enable_memory_saver = False
        # As HybridReqToTokenPool.__init__ sets them for one layer and no layer transfer.
        pool.mamba_map, pool.layer_transfer_counter = {0: 0}, None
        pool.mamba_pool = pools.MambaPool(
            size=size,
            spec_state_size=size,
            cache_params=cache_params,
            mamba_layer_ids=[0],
            device="cpu",
            speculative_num_draft_tokens=self.drafts,
            speculative_eagle_topk=1,
            linear_replayssm_cache_len=RING_LENGTH,
            enable_linear_replayssm_spec=path is BatchPath.REPLAYSSM,
        )
        pool.mamba_allocator = engine.allocator.MambaSlotAllocator(size=size, device="cpu")
        pool.req_index_to_mamba_index_mapping = torch.zeros(size + 1, dtype=torch.int32)
        disabled = types.SimpleNamespace(
            conv_state=None, intermediate_conv_state=None, context=None, intermediate_context=None
        )
        pool.short_conv_pool = pool.ngram_pool = disabled
        self.pool = pool
        self.cache = pool.mamba_pool.mamba_cache
        self.indices = engine.linear_utils.build_verify_intermediate_state_indices(size, "cpu")
        self.sequences: dict[str, types.SimpleNamespace] = {}

        def tensor(values: Any, dtype: Any = bf16) -> Any:
            return torch.as_tensor(np.asarray(values, dtype=np.float64), dtype=f32).to(dtype)

        self.tensor = tensor
        self.weight = tensor(shapes.pad(np.asarray(request["conv_weight"]).T).T).contiguous()
        self.a_log = tensor(request.get("a_log", []))
        self.dt_bias = tensor(request.get("dt_bias", []))
        self.layer = types.SimpleNamespace(
            num_k_heads=shapes.nk,
            head_k_dim=shapes.dk,
            num_v_heads=shapes.nv,
            head_v_dim=shapes.dv,
            A_log=self.a_log,
            dt_bias=self.dt_bias,
            layer_id=0,
            conv_weights=self.weight,
            bias=None,
            activation="silu",
            num_q_heads=shapes.nk,
            head_q_dim=shapes.dk,
            q_dim=shapes.key_dim,
            k_dim=shapes.key_dim,
            v_dim=shapes.nv * shapes.dv,
        )
        # SGLang's GDN backend for the extend, with what its __init__ sets for this layer
        # (gdn_backend.py ~515-545): the pool, no multi-item scoring, the split by torch.
        extending = object.__new__(engine.extend_backend)
        extending.req_to_token_pool = pool
        extending.device = "cpu"
        extending.mis_metadata = None
        extending.requires_contiguous_prefill_state = True
        extending._use_strided_target_verify_qkv = False
        self.extending = extending
        #: Each sequence's tokens so far: its checkpoint counts as a cached prefix of one.
        self.seen: dict[str, int] = {}
        self.backend = engine.backend.HybridLinearAttnBackend()
        self.backend.linear_attn_backend = types.SimpleNamespace(
            req_to_token_pool=pool,
            accept_lens_pool=None,
            forward_metadata=types.SimpleNamespace(mamba_cache_indices=None),
        )
        self.worker = types.SimpleNamespace(
            model_runner=types.SimpleNamespace(
                model_config=types.SimpleNamespace(gdn=True),
                req_to_token_pool=pool,
                attn_backend=self.backend,
                model=None,
            )
        )

    def join(self, name: str, checkpoint: ReplayState, /) -> None:
        """Admit a sequence: SGLang's ``alloc`` for its request, its checkpoint in its slot."""
        import numpy as np  # noqa: PLC0415

        req = types.SimpleNamespace(kv=Kv())
        if self.pool.alloc([req]) is None:
            raise serve.EngineLimitError(f"SGLang's pool has no free row for sequence {name!r}")
        slot = int(req.kv.mamba_pool_idx)
        self.pool.mamba_pool.clear_slots(self.torch.tensor([slot]))
        shapes = self.shapes
        conv = shapes.pad(np.asarray(checkpoint["conv"]).T).T
        self.cache.conv[0][0, slot] = self.tensor(conv)
        h = np.zeros((shapes.nv, shapes.dk, shapes.dv))
        h[:, : shapes.dk_given, :] = np.asarray(checkpoint["h"])
        self.cache.temporal[0, slot] = self.tensor(h, self.torch.float32).transpose(1, 2)
        self.sequences[name] = req
        self.seen[name] = 1

    def extend(self, names: list[str], prompts: list[list[ReplayRow]], /) -> None:
        """The sequences' prompt rows, one extend: SGLang's metadata, then ``forward_extend``."""
        torch, shapes = self.torch, self.shapes
        import numpy as np  # noqa: PLC0415

        reqs = [self.sequences[name] for name in names]
        lens = [len(prompt) for prompt in prompts]
        starts = [sum(lens[:at]) for at in range(len(lens))]
        prefixes = [self.seen[name] for name in names]
        forward_batch = types.SimpleNamespace(
            batch_size=len(reqs),
            forward_mode=ExtendMode(),
            logical_forward_mode=ExtendMode(),
            req_pool_indices=torch.tensor([req.kv.req_pool_idx for req in reqs], dtype=torch.int64),
            mamba_track_indices=None,
            mamba_track_mask=None,
            mamba_prefill_track_mask_cpu=None,
            mamba_track_seqlens_cpu=None,
            extend_start_loc=torch.tensor(starts, dtype=torch.int32),
            extend_seq_lens=torch.tensor(lens, dtype=torch.int32),
            extend_seq_lens_cpu=lens,
            extend_prefix_lens=torch.tensor(prefixes, dtype=torch.int32),
            extend_prefix_lens_cpu=prefixes,
            tbo_parent_token_range=None,
        )
        self.extending.forward_metadata = self.extending._forward_metadata(forward_batch)  # noqa: SLF001
        rows = [row for prompt in prompts for row in prompt]
        qkv = shapes.pad(np.array([row["values"] for row in rows]))
        self.extending.forward_extend(
            self.layer,
            forward_batch,
            self.tensor(qkv).contiguous(),
            self.tensor(np.array([row["a"] for row in rows])),
            self.tensor(np.array([row["b"] for row in rows])),
        )
        for name, count in zip(names, lens, strict=True):
            self.seen[name] += count

    def finish(self, name: str, /) -> None:
        """Free a finished sequence's slot and row, as SGLang releases a request."""
        req = self.sequences.pop(name)
        self.pool.free_mamba_cache(req)
        self.pool.free(req)

    def verify(
        self,
        names: list[str],
        windows: list[list[ReplayRow]],
        accepted: list[int],
        handed: Callable[[int, int], int],
        /,
    ) -> None:
        """One verify of the batch and its commit, SGLang's steps in SGLang's order.

        ``handed(count, window)`` is the accepted count SGLang is given.
        """
        torch, engine, shapes = self.torch, self.engine, self.shapes
        import numpy as np  # noqa: PLC0415

        k = self.drafts
        size = len(names)
        reqs = [self.sequences[name] for name in names]
        rows = torch.tensor([req.kv.req_pool_idx for req in reqs], dtype=torch.int64)
        batch = types.SimpleNamespace(
            reqs=reqs,
            req_pool_indices=rows,
            forward_mode=types.SimpleNamespace(is_idle=lambda: False),
            mamba_track_indices=None,
            seq_lens=None,
        )
        engine.spec_utils.prepare_mamba_track_for_verify(batch)
        slots = self.pool.get_mamba_indices(rows)
        self.backend.linear_attn_backend.forward_metadata.mamba_cache_indices = slots
        starts = torch.arange(0, (size + 1) * k, k, dtype=torch.int32)
        scratch = engine.linear_utils.select_verify_intermediate_state_indices(
            self.indices, rows, slots >= 0, self.pool.size
        )

        def column(window: list[ReplayRow], name: str, width: int) -> Any:
            values = np.zeros((k, width))
            for at, row in enumerate(window):
                values[at] = row[name]  # type: ignore[literal-required]
            return values

        qkv = np.concatenate([shapes.pad(column(w, "values", len(shapes.kept))) for w in windows])
        a = self.tensor(np.concatenate([column(w, "a", shapes.nv) for w in windows]))
        b = self.tensor(np.concatenate([column(w, "b", shapes.nv) for w in windows]))
        mixed = self.tensor(qkv).view(size, k, -1).transpose(1, 2)
        post = engine.conv.causal_conv1d_update(
            mixed,
            self.cache.conv[0][0],
            self.weight,
            None,
            "silu",
            conv_state_indices=slots,
            intermediate_conv_window=self.cache.intermediate_conv_window[0][0],
            intermediate_state_indices=scratch[:size],
        )
        post = post.transpose(1, 2).reshape(size * k, -1)
        key = shapes.key_dim
        q = post[:, :key].reshape(1, size * k, shapes.nk, shapes.dk).contiguous()
        kk = post[:, key : 2 * key].reshape(1, size * k, shapes.nk, shapes.dk).contiguous()
        v = post[:, 2 * key :].reshape(1, size * k, shapes.nv, shapes.dv).contiguous()
        if self.path is BatchPath.SNAPSHOT:
            engine.recurrent.fused_sigmoid_gating_delta_rule_update(
                A_log=self.a_log,
                a=a,
                dt_bias=self.dt_bias,
                softplus_beta=1.0,
                softplus_threshold=20.0,
                q=q,
                k=kk,
                v=v,
                b=b,
                initial_state_source=self.cache.temporal[0],
                initial_state_indices=slots,
                cu_seqlens=starts,
                use_qk_l2norm_in_kernel=True,
                is_kda=False,
                disable_state_update=True,
                intermediate_states_buffer=self.cache.intermediate_ssm[0],
                intermediate_state_indices=scratch,
                cache_steps=k,
                retrieve_parent_token=None,
            )
        else:
            engine.gdn_backend.GDNAttnBackend._replayssm_target_verify(  # noqa: SLF001
                None,
                layer=self.layer,
                query=q,
                key=kk,
                value=v,
                a=a,
                b=b,
                mamba_pool=self.pool.mamba_pool,
                layer_cache=self.pool.mamba_pool.mamba2_layer_cache(0),
                cache_indices=slots,
                replay_indices=rows,
                query_start_loc=starts,
                draft_token_num=k,
            )
        lens = [handed(count, len(window)) for count, window in zip(accepted, windows, strict=True)]
        for name, count in zip(names, accepted, strict=True):
            self.seen[name] += count
        accept_lens = torch.tensor(lens, dtype=torch.int32)
        accept_index = torch.full((size, k), -1, dtype=torch.int32)
        for at, count in enumerate(lens):
            accept_index[at, :count] = torch.arange(at * k, at * k + count, dtype=torch.int32)
        engine.spec_utils.commit_mamba_states_after_verify(
            self.worker, batch, accept_lens, accept_index, k
        )

    def states(self, names: list[str], /) -> list[ReplayState]:
        """The sequences' states now, in the request's layout: each slot's conv and h."""
        torch, shapes = self.torch, self.shapes
        reqs = [self.sequences[name] for name in names]
        slots = torch.tensor([int(req.kv.mamba_pool_idx) for req in reqs], dtype=torch.int32)
        checkpoint = self.cache.temporal
        if self.path is BatchPath.REPLAYSSM:
            # The ring is the state: fold a copy of the checkpoint with the engine's own
            # fold, on copies of the cursors with the fold flag set.
            pool = self.pool.mamba_pool
            checkpoint = checkpoint.clone()
            self.engine.replayssm.commit_gdn_replayssm_circular(
                checkpoint_state=checkpoint,
                d_cache=self.cache.replayssm_d,
                k_cache=self.cache.replayssm_k,
                g_cache=self.cache.replayssm_g,
                d_residual_cache=self.cache.replayssm_rawv,
                k_residual_cache=self.cache.replayssm_rawk,
                state_batch_indices=slots,
                replay_indices=torch.tensor(
                    [req.kv.req_pool_idx for req in reqs], dtype=torch.int32
                ),
                write_pos=pool.replayssm_spec_write_pos.clone(),
                cache_base=pool.replayssm_cache_base.clone(),
                is_flush=torch.ones_like(pool.replayssm_is_flush),
                accept_lens=torch.zeros(len(reqs), dtype=torch.int32),
                null_block_id=-1,
            )
        kept = torch.tensor(shapes.kept)
        out: list[ReplayState] = []
        for slot in slots.tolist():
            h = checkpoint[0, slot].transpose(1, 2)[:, : shapes.dk_given, :]
            conv = self.cache.conv[0][0, slot].index_select(0, kept)
            out.append({"conv": conv.double().tolist(), "h": h.double().tolist()})
        return out


def replay_batch(
    request: ReplayBatchRequest, path: BatchPath, accepted: Callable[[int, int], int], /
) -> list[ReplayState]:
    """Each entry's state after its step, from SGLang's pool, verify and commit.

    ``accepted(count, window)`` is the count handed to SGLang for an entry
    (the request's, or the off-by-one control's).

    Raises:
        serve.EngineLimitError: a window SGLang's ring cannot take.

    RB-REPLAY-12.
    """
    run = _Batch(request, path)
    states: list[ReplayState] = []
    for step in request["steps"]:
        for entry in step:
            if "checkpoint" in entry:
                run.join(entry["sequence"], entry["checkpoint"])
        # A prompt, or a chunk of one, before the step's verifies: one extend of them all.
        prompts = [entry for entry in step if entry.get("prefill")]
        if prompts:
            run.extend(
                [entry["sequence"] for entry in prompts],
                [entry["prefill"] for entry in prompts],
            )
        # A prompt chunk alone has no window.
        verifying = [entry for entry in step if entry["rows"]]
        if verifying:
            run.verify(
                [entry["sequence"] for entry in verifying],
                [entry["rows"] for entry in verifying],
                [entry["accepted"] for entry in verifying],
                accepted,
            )
        states += run.states([entry["sequence"] for entry in step])
        for entry in step:
            if entry["finish"]:
                run.finish(entry["sequence"])
    return states
