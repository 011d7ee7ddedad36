# SPDX-License-Identifier: MIT OR Apache-2.0
"""vLLM's own GDN bookkeeping over a ``replay_batch``: its metadata builder and its layer's core.

Per step of the batch, as vLLM's runner hands a verify to its GDN layers:

1. The runner's inputs (``v1/worker/gpu_model_runner.py``, vLLM 0.33.0,
   ``_prepare_inputs`` lines 2188-2235 and ``_build_attention_metadata`` lines
   2425-2450): the requests in the batch's order, their ``query_start_loc``,
   ``seq_lens`` and block table rows (:class:`CommonAttentionMetadata`),
   ``num_accepted_tokens`` (each request's count from its previous verify, 1
   for a new request; lines 2067-2101) and ``num_decode_draft_tokens_cpu``.
   Whether the builder is handed those two at all, and each row's draft
   count, are the release's runner's own code (``runner_code.py``): its
   ``use_spec_decode`` and the classification after it (0.33.0 lines
   2188-2235: every step of a speculative runner is speculative, a one-token
   decode after the prompt a row of zero drafts; 0.31.0 lines 2224-2259: a
   step in which no row drafts is not, and the builder is then called
   without them, as 0.31.0's runner calls it, lines 2496-2540), over a
   scheduler's output that schedules a verify's ``length - 1`` drafts and
   none for a prompt chunk.
   Prompt rows (a prompt chunk alone, or the prefill of an entry that
   verifies after it) run in the same forward as the step's other verifies,
   in the order vLLM's own ``reorder_batch_to_split_decodes_and_prefills``
   gives them (:meth:`_Batch.reordered`).
2. vLLM's :class:`GDNAttentionMetadataBuilder`.``build``
   (``v1/attention/backends/gdn_attn.py`` lines 313-705), run as it is, which
   picks the state indices (``mamba_get_block_table_tensor``,
   ``v1/attention/backends/utils.py`` lines 1283-1345), splits spec rows from
   the rest, and gathers the token indices.
3. The layer's ``_forward_core``
   (``model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py`` lines
   1556-1912), run as it is with that metadata in the forward context: vLLM's
   own conv and gated-delta-rule calls, its gathers of ``a`` and ``b`` and its
   state reads and writes.

With ``--runner v2`` the accepted counts handed to the builder are Model
Runner V2's own: the release's ``MambaHybridModelState`` (``v1/worker/gpu/
model_states/mamba_hybrid.py``; vLLM 0.33.0 lines 113-126 and 351-381)
keeps one count per batch row, which ``add_request`` resets when a request
takes the row and ``postprocess_state`` sets from the tokens each step
sampled; the builder is handed the rows' counts, as its ``prepare_attn``
gathers them. The adapter takes the protocol's slot as the batch row. Its
object is built without ``__init__`` (which needs the model and encoder
cache), with the fields those two methods read: no rope state, the counts,
the cache mode, and no align copy context (no request crosses a block here).
The rest of the runner's inputs are built as above, V1's (its classification
included: V2's own, ``MambaHybridModelState.prepare_attn``, is not run).

A request's state after its step is what its next verify would read: the
conv window at the offset its accepted count gives, and the block of its
last accepted token (block-table column ``accepted - 1`` of its spec columns).

What stands in, and why:

- The layer object: ``_forward_core`` reads its weights and sizes from
  ``self``; a plain object holds them (``A_log``, ``dt_bias``, the conv
  weight, the head sizes, ``kv_cache``) and vLLM's own ``rearrange_mixed_qkv``.
  Its prefill rule is ``ChunkGatedDeltaRule.forward_native`` (FLA's Triton
  chunk rule, the one vLLM takes when its prefill backend is "triton").
- The configuration: ``VllmConfig`` needs a model; a plain object carries the
  fields the builder reads (cache mode, speculative token count, scheduler
  batch size, compilation and parallel defaults), with
  ``additional_config={"gdn_prefill_backend": "triton"}``.
- The platform: vLLM's CUDA platform with its hardware probes answered (no
  PDL, not a CPU), so the Triton kernels run, under Triton's interpreter.
- Mode "align": the runner's copies between blocks run as the runner runs
  them (``align_copies.py``): before each forward
  ``mamba_utils.preprocess_mamba`` (``v1/worker/mamba_utils.py``, vLLM 0.33.0
  lines 1446-1549; the runner's call, ``gpu_model_runner.py`` 4049-4090,
  with its count re-sync and ``stage_postprocess_inputs_to_gpu``), which moves
  a request's state into the block its new tokens end in, through the fused
  Triton pre-copy; after it, ``postprocess_mamba_align_gpu`` (1552-1605,
  called from ``_update_states_after_model_execute``, 1548-1590), whose fused
  kernel saves the state at a block boundary the accepted tokens crossed and
  may reset the count to 1. Its inputs stand in for the runner's: the request
  states, the input batch's rows and counts, the scheduler's token counts, a
  persistent block table whose rows follow the batch's order, and
  ``CpuGpuBuffer`` objects without pinned memory. The block size is the
  ``--block-size`` option: at the default, ``BLOCK_SIZE``, no request here
  crosses a block and the copies copy nothing; at a small one, every batch
  crosses blocks. Each slot's row holds a block of its own at every column;
  vLLM's scheduler would hold its null block at columns it has freed, which
  neither the builder nor the copies read. Releases before 0.33.0 have no
  fused copies here: the adapter runs them at ``BLOCK_SIZE`` only.
- Mode "align"'s prefix cache: a join whose checkpoint and first prompt rows
  are a cached prefix starts from the cached block, as a hit in vLLM's KV
  cache manager does; the manager's hashing and lookup stand in
  (``prefix_cache.py``, which says where it offers a hit), each row's
  bytes its token id.

The CUDA-only decode op (``fused_gdn_decode``, ``VLLM_GDN_DECODE_KERNEL=cuda``)
is not taken: ``_forward_core`` is the Triton path (docs/engines.md).
"""

from __future__ import annotations

import functools
import types
from typing import TYPE_CHECKING, Any

from .align_copies import AlignCopies
from .batch_inputs import BLOCK_SIZE, BatchInputs, BlockSizeError, CacheMode, Runner
from .pool import Pool, Request, longest_request
from .prefix_cache import PrefixCache, row_tokens, stand_in_token
from .runner_code import Row, runner_code
from .stand_ins import LAYER_PREFIX, Layer, vllm_config

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ssm_rollback_spec.harness.replay_wire import ReplayState

__all__ = ["run_batch"]


class _Batch:
    """vLLM's builder and layer core over one request's pool (see the module docstring)."""

    def __init__(self, engine: Any, inputs: BatchInputs, /) -> None:
        import torch  # noqa: PLC0415

        self.engine, self.inputs, self.torch = engine, inputs, torch
        nk, dk, nv, dv, width = inputs.dims
        key_dim, value_dim = nk * dk, nv * dv
        conv_dim = 2 * key_dim + value_dim
        longest = max(
            (len(entry["qkv"]) for step in inputs.steps for entry in step if "qkv" in entry),
            default=1,
        )
        num_spec = max(longest - 1, 1)
        block_size = inputs.block_size if inputs.mode is CacheMode.ALIGN else 1
        columns = -(-longest_request(inputs.steps) // block_size) + num_spec
        self.pool = Pool(inputs.mode, inputs.slots, num_spec, columns)
        bf16, on = torch.bfloat16, inputs.on
        spec = engine.MambaSpec(
            shapes=((conv_dim, width - 1 + num_spec), (nv, dv, dk)),
            dtypes=(bf16, bf16),
            block_size=block_size,
            mamba_cache_mode=inputs.mode.value,
            num_speculative_blocks=num_spec,
        )
        config = vllm_config(engine, inputs.mode, num_spec, inputs.slots)
        self.builder = engine.GDNAttentionMetadataBuilder(spec, [LAYER_PREFIX], config, on)
        # vLLM's conv state layout: dim first ("DS") or state first ("SD").
        self.dim_first = engine.is_conv_state_dim_first()
        shape = (conv_dim, width - 1 + num_spec)
        blocks = self.pool.blocks
        self.conv_cache = torch.zeros(
            blocks, *(shape if self.dim_first else shape[::-1]), dtype=bf16, device=on
        )
        self.ssm_cache = torch.zeros(blocks, nv, dv, dk, dtype=bf16, device=on)
        conv_weight, a_log, dt_bias = inputs.weights
        layer = Layer(
            prefix=LAYER_PREFIX,
            enable_packed_recurrent_decode=False,
            kv_cache=(self.conv_cache, self.ssm_cache),
            conv1d=types.SimpleNamespace(weight=conv_weight.reshape(conv_dim, 1, width), bias=None),
            activation="silu",
            A_log=a_log,
            dt_bias=dt_bias,
            num_k_heads=nk,
            tp_size=1,
            head_k_dim=dk,
            head_v_dim=dv,
            key_dim=key_dim,
            value_dim=value_dim,
            chunk_gated_delta_rule=functools.partial(
                engine.ChunkGatedDeltaRule.forward_native, None
            ),
        )
        layer.rearrange_mixed_qkv = functools.partial(engine.GDNLayer.rearrange_mixed_qkv, layer)
        self.core = functools.partial(engine.GDNLayer._forward_core, layer)  # noqa: SLF001
        self.width, self.heads = width, (nv, dv)
        self.running: dict[str, Request] = {}
        self.joins = 0
        self.rows = _rows_state(inputs) if inputs.runner is Runner.V2 else None
        self.copies = (
            AlignCopies(engine, inputs, self.pool, spec, layer)
            if inputs.mode is CacheMode.ALIGN and inputs.runner is Runner.V1 and engine.mamba_utils
            else None
        )
        if inputs.block_size != BLOCK_SIZE and self.copies is None:
            raise BlockSizeError(inputs.block_size)
        # vLLM's prefix caching is what mode "align" is for; the copies save its blocks.
        self.prefix = PrefixCache(inputs.block_size) if self.copies is not None else None
        self.stepped = 0
        release = ".".join(str(part) for part in inputs.release)
        self.runner = runner_code(engine.runner_file, release, engine.GDNAttentionMetadataBuilder)

    def conv(self, block: int, /) -> Any:
        """Block ``block``'s conv state as (conv_dim, width - 1 + num_spec), whatever the layout."""
        return self.conv_cache[block] if self.dim_first else self.conv_cache[block].transpose(0, 1)

    def forward(self, rows: list[tuple[Request, dict[str, Any], bool]], /) -> None:
        """One forward of vLLM over ``rows``: (request, its inputs, a verify or a prompt)."""
        torch, on = self.torch, self.inputs.on
        rows = self.reordered(rows)
        lens = [len(inputs["qkv"]) for _, inputs, _ in rows]
        starts = [0]
        for length in lens:
            starts.append(starts[-1] + length)
        seq_lens = [row[0].computed + length for row, length in zip(rows, lens, strict=True)]
        # Mode "none": the row is the request's 1 + num_spec blocks. Mode "align":
        # the row is its blocks of BLOCK_SIZE tokens, the first reaching past any
        # request here, and the builder takes 1 + num_spec of them from seq_lens.
        table = [request.row for request, _, _ in rows]
        # The runner's own classification: a verify schedules length - 1 drafts, a
        # prompt chunk its chunk and none.
        scheduled = [
            Row(length, length - 1 if row[2] else 0, row[0].computed, _prompt(row))
            for row, length in zip(rows, lens, strict=True)
        ]
        step = self.runner.classify(scheduled, self.builder)
        query_start = torch.tensor(starts, dtype=torch.int32)
        common = self.engine.CommonAttentionMetadata(
            query_start_loc=query_start.to(on),
            query_start_loc_cpu=query_start,
            seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=on),
            num_reqs=len(rows),
            num_actual_tokens=starts[-1],
            max_query_len=max(lens),
            max_seq_len=max(seq_lens),
            block_table_tensor=torch.tensor(table, dtype=torch.int32, device=on),
            slot_mapping=torch.zeros(starts[-1], dtype=torch.int64, device=on),
            is_prefilling=torch.tensor([not verifies for _, _, verifies in rows]),
            seq_lens_cpu_upper_bound=torch.tensor(seq_lens, dtype=torch.int32),
        )
        accepted = [request.accepted for request, _, _ in rows]
        if self.copies is not None:
            accepted = self.copies.before(rows)
        if self.rows is not None:
            # V2's prepare_attn: the counts of the batch rows, as its model state keeps them.
            slots = torch.tensor([request.slot for request, _, _ in rows], dtype=torch.int64)
            accepted = self.rows.num_accepted_tokens_gpu[slots].tolist()
        speculative: dict[str, Any] = {}
        if step.speculative:
            speculative = {
                "num_accepted_tokens": torch.tensor(accepted, dtype=torch.int32, device=on),
                "num_decode_draft_tokens_cpu": torch.tensor(step.drafts, dtype=torch.int32),
            }
        metadata = self.builder.build(0, common, **speculative)
        qkv, a, b = (torch.cat([inputs[key] for _, inputs, _ in rows]) for key in ("qkv", "a", "b"))
        out = torch.empty(starts[-1], *self.heads, dtype=torch.bfloat16, device=on)
        self.engine.set_context(types.SimpleNamespace(attn_metadata={LAYER_PREFIX: metadata}))
        try:
            self.core(qkv, b, a, out)
        finally:
            self.engine.set_context(None)
        if self.copies is not None:
            # The tokens each row sampled: a verify's accepted count; a prompt row's one.
            sampled = [inputs["accepted"] if verifies else 1 for _, inputs, verifies in rows]
            self.copies.after(rows, sampled)

    def reordered(
        self, rows: list[tuple[Request, dict[str, Any], bool]], /
    ) -> list[tuple[Request, dict[str, Any], bool]]:
        """``rows`` in the order vLLM's input batch holds them when the builder runs.

        vLLM's own ``reorder_batch_to_split_decodes_and_prefills``
        (``v1/attention/backends/utils.py``, 0.33.0 lines 939-1016), with the
        builder's threshold, on an input batch of the fields it reads: the
        decodes (a verify: done with its prompt, at most the threshold's
        tokens) first, then prompt chunks of at most the threshold's tokens,
        then longer ones. A prompt chunk is still prefilling in its step.
        """
        order = list(range(len(rows)))
        computed = [request.computed for request, _, _ in rows]
        prompt = [_prompt(row) for row in rows]

        def swap_states(first: int, second: int, /) -> None:
            for values in (order, computed, prompt):
                values[first], values[second] = values[second], values[first]

        batch = types.SimpleNamespace(
            req_ids=order,
            num_computed_tokens_cpu=_Live(computed),
            num_prompt_tokens=_Live(prompt),
            swap_states=swap_states,
        )
        scheduled = types.SimpleNamespace(
            num_scheduled_tokens={index: len(rows[index][1]["qkv"]) for index in order}
        )
        self.engine.reorder_batch(batch, scheduled, self.builder.reorder_batch_threshold)
        return [rows[index] for index in order]

    def _sampled(self, counts: list[tuple[Request, int]], /) -> None:
        """V2's ``postprocess_state``: each row's count, the tokens its request sampled."""
        if self.rows is None:
            return
        torch = self.torch
        rows = torch.tensor([request.slot for request, _ in counts], dtype=torch.int32)
        sampled = torch.tensor([count for _, count in counts], dtype=torch.int32)
        self.rows.postprocess_state(rows.to(self.inputs.on), sampled.to(self.inputs.on))

    def seat(self, step: Sequence[dict[str, Any]], /) -> None:
        """Seat the step's new requests: each one's checkpoint in its first block, or a prefix hit.

        A join whose checkpoint and first prompt rows are a cached prefix
        (:class:`PrefixCache`) starts with those tokens computed, the cached
        block in its row, and only the rest of its prompt to run.
        """
        width = self.width
        joining = [entry for entry in step if entry["sequence"] not in self.running]
        if self.prefix is not None:
            # Every slot taken this step drops its blocks before any join looks for a
            # hit: a join's checkpoint overwrites its row, which no hit may then read.
            for entry in joining:
                self.prefix.drop(self.pool.row(entry["slot"]))
        for entry in joining:
            # Each join is a new request, its id unique as vLLM's request ids are, even
            # where the protocol's sequence name is used again after a finish.
            self.joins += 1
            name = f"{entry['sequence']}#{self.joins}"
            row = self.pool.row(entry["slot"])
            request = self.running[entry["sequence"]] = Request(name, entry["slot"], row)
            request.tokens = [stand_in_token(entry["conv"], entry["h"])]
            if self.prefix is not None:
                prompt = row_tokens(entry["prefill"]) if "prefill" in entry else []
                found = self.prefix.hit(request.tokens + prompt, self.stepped)
                if found is not None:
                    tokens, block = found
                    column = tokens // self.prefix.block_size - 1
                    request.row = [0] * column + [block] + row[column + 1 :]
                    request.computed = tokens
                    request.tokens += prompt[: tokens - 1]
                    entry["prefill"] = {k: v[tokens - 1 :] for k, v in entry["prefill"].items()}
                    continue
            if self.rows is not None:
                added = types.SimpleNamespace(
                    num_computed_tokens=request.computed, prefill_token_ids=None, mm_features=[]
                )
                self.rows.add_request(request.slot, added)
            first = request.row[0]
            self.conv(first)[:, : width - 1] = entry["conv"]
            self.ssm_cache[first] = entry["h"].transpose(-1, -2)

    def run(self, prompts: list[dict[str, Any]], verifies: list[dict[str, Any]], /) -> None:
        """One forward of the prompt rows of ``prompts`` beside the windows of ``verifies``.

        vLLM's scheduler mixes them in one step: a prompt (or a chunk of one)
        beside the running requests' verifies, which the builder splits into
        its spec and non-spec rows.
        """
        rows = [(self.running[e["sequence"]], e["prefill"], False) for e in prompts]
        rows += [(self.running[e["sequence"]], e, True) for e in verifies]
        if not rows:
            return
        self.forward(rows)
        for entry in prompts:
            request = self.running[entry["sequence"]]
            request.computed += len(entry["prefill"]["qkv"])
            request.tokens += row_tokens(entry["prefill"])
            if self.prefix is not None:
                # A chunk that ends at a boundary leaves the state there in place.
                self.prefix.save(request.tokens, request.row, self.stepped)
            if self.copies is None:
                # After a prompt's chunk the request's state is in its first block,
                # as after a verify that kept one token. With the align copies, the
                # runner's own count after its post-copy is the request's.
                request.accepted = 1
        # A prompt's last chunk samples one token, an earlier one none (V2's
        # postprocess_state reads either as a count of 1); a verify, its accepted
        # count. A chunk alone is not known to be the last; one its entry verifies
        # after is.
        self._sampled(
            [(self.running[e["sequence"]], int("qkv" in e)) for e in prompts]
            + [(self.running[e["sequence"]], e["accepted"]) for e in verifies]
        )
        for entry in verifies:
            request = self.running[entry["sequence"]]
            window = row_tokens(entry)
            if self.prefix is not None and entry["accepted"] <= self.prefix.block_size:
                # The post-copy saved the state after the window's first row, where
                # the kept tokens reach no later boundary (it saves the last one).
                self.prefix.save([*request.tokens, window[0]], request.row, self.stepped)
            request.tokens += window[: entry["accepted"]]
            request.computed += entry["accepted"]
            if self.copies is None:
                request.accepted = entry["accepted"]

    def state(self, request: Request, /) -> ReplayState:
        """The state the request's next verify reads (module docstring)."""
        row = request.row
        # The running block column: the first in mode "none" and without copies.
        column = 0 if self.copies is None else self.copies.column(request)
        start = request.accepted - 1
        conv = self.conv(row[column])[:, start : start + self.width - 1]
        h = self.ssm_cache[row[column + request.accepted - 1]].transpose(-1, -2)
        return {"conv": conv.double().tolist(), "h": h.double().tolist()}

    def step(self, step: Sequence[dict[str, Any]], /) -> list[ReplayState]:
        """Run one step of the batch; each entry's state, as its next verify would read it.

        Every prompt row of the step (a prompt chunk alone, or the prefill of
        an entry that verifies after it) runs in one forward beside the
        windows of the entries that verify without one; the windows that
        follow a prefill in the same entry run in a second forward, after
        their prompt, as the request's next step would run them.
        """
        self.seat(step)
        prompts = [entry for entry in step if "prefill" in entry]
        first = [entry for entry in step if "qkv" in entry and "prefill" not in entry]
        self.run(prompts, first)
        self.run([], [entry for entry in step if "qkv" in entry and "prefill" in entry])
        states = [self.state(self.running[entry["sequence"]]) for entry in step]
        for entry in step:
            if entry["finish"]:
                request = self.running.pop(entry["sequence"])
                if self.copies is not None:
                    # The next step's scheduler output names it finished.
                    self.copies.finished.add(request.name)
        self.stepped += 1
        return states


def _prompt(row: tuple[Request, dict[str, Any], bool], /) -> int:
    """The row's ``num_prompt_tokens``: what it computed, and a prompt chunk's rows.

    A verify's prompt is done; a prompt chunk is still prefilling in its step.
    """
    request, inputs, verifies = row
    return request.computed + (0 if verifies else len(inputs["qkv"]))


class _Live:
    """A list read as a NumPy array each time it is sliced (the reorder slices it once)."""

    def __init__(self, values: list[int], /) -> None:
        self.values = values

    def __getitem__(self, key: slice, /) -> Any:
        import numpy as np  # noqa: PLC0415

        return np.array(self.values)[key]


def _rows_state(inputs: BatchInputs, /) -> Any:
    """The release's ``MambaHybridModelState``, as its two count methods read it."""
    import importlib  # noqa: PLC0415

    import torch  # noqa: PLC0415

    module = importlib.import_module("vllm.v1.worker.gpu.model_states.mamba_hybrid")
    state = object.__new__(module.MambaHybridModelState)
    rows = max(inputs.slots, 1)
    state.rope_state = None
    state.recoverssm = None
    state.num_accepted_tokens_gpu = torch.ones(rows, dtype=torch.int32, device=inputs.on)
    state._align_mode = inputs.mode is CacheMode.ALIGN
    state._mamba_state_idx_gpu = torch.zeros(rows, dtype=torch.int32, device=inputs.on)
    state._mamba_ctx = None
    state.cache_config = types.SimpleNamespace(block_size=BLOCK_SIZE, mamba_block_size=BLOCK_SIZE)
    return state


def run_batch(engine: Any, inputs: BatchInputs, /) -> list[ReplayState]:
    """Each entry's state after its step, from vLLM's builder and layer core.

    ``engine`` is the names :func:`load.load_package` gives.
    """
    batch = _Batch(engine, inputs)
    return [state for step in inputs.steps for state in batch.step(step)]
