# SPDX-License-Identifier: MIT OR Apache-2.0
"""vLLM's own GDN bookkeeping over a ``replay_batch``: its metadata builder and its layer's core.

Per step of the batch, as vLLM's runner hands a verify to its GDN layers:

1. The runner's inputs (``v1/worker/gpu_model_runner.py``, vLLM 0.33.0,
   ``_prepare_inputs`` lines 2198-2235 and ``_build_attention_metadata`` lines
   2425-2450): the requests in the batch's order, their ``query_start_loc``,
   ``seq_lens`` and block table rows (:class:`CommonAttentionMetadata`),
   ``num_decode_draft_tokens_cpu`` (a row's draft count, or -1 for a prompt
   chunk; a one-token decode after the prompt counts as a speculative row with
   zero drafts, lines 2215-2227) and ``num_accepted_tokens`` (each request's
   count from its previous verify, 1 for a new request; lines 2067-2101).
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
The rest of the runner's inputs are built as above, V1's; they are V2's too
for windows with drafts (a decode with no drafts is V1's count, -1 or 0).

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
- Mode "align": the runner's block copies when a request crosses a block
  (``mamba_utils.preprocess_mamba`` and the fused GPU
  ``postprocess_mamba_align_gpu``) are not run; a request's block is larger
  than any request here (``block_size`` below), so no request crosses one and
  those copies would copy nothing.

The CUDA-only decode op (``fused_gdn_decode``, ``VLLM_GDN_DECODE_KERNEL=cuda``)
is not taken: ``_forward_core`` is the Triton path (docs/engines.md).
"""

from __future__ import annotations

import enum
import functools
import types
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ssm_rollback_spec.harness.replay_wire import ReplayState

__all__ = [
    "BLOCK_SIZE",
    "ZERO_DRAFT_DECODE_IS_SPEC_SINCE",
    "BatchInputs",
    "CacheMode",
    "Layer",
    "Pool",
    "Request",
    "Runner",
    "draft_count",
    "run_batch",
]

#: Tokens per block in mode "align": more than any request of the corpus holds,
#: so no request crosses a block and the runner's copies between blocks are not needed.
BLOCK_SIZE: Final = 4096
#: The layer's name in the forward context's metadata.
_PREFIX: Final = "model.layers.0.linear_attn"


class CacheMode(enum.Enum):
    """vLLM's ``mamba_cache_mode``: "align" (with prefix caching, the default) or "none"."""

    ALIGN = "align"
    NONE = "none"


class Runner(enum.Enum):
    """vLLM's model runner whose accepted counts the batch takes: V1's, or V2's own."""

    V1 = "v1"
    V2 = "v2"


class Layer(types.SimpleNamespace):
    """The GDN layer's attributes ``_forward_core`` reads (module docstring)."""


class Request:
    """One request of the batch: its pool slot, its computed tokens, its previous accepted count."""

    def __init__(self, slot: int, /) -> None:
        self.slot = slot
        self.computed = 1
        self.accepted = 1


@dataclass(frozen=True)
class BatchInputs:
    """A ``replay_batch`` request as the engine takes it (BF16 tensors on ``on``)."""

    #: (num_key_heads, key_head_dim, num_value_heads, value_head_dim, conv_kernel).
    dims: tuple[int, int, int, int, int]
    #: (conv weight, A_log, dt_bias).
    weights: tuple[Any, Any, Any]
    #: Per step, per entry: ``sequence``, ``slot``, ``finish``; but for a prompt
    #: chunk alone, ``qkv``, ``a``, ``b`` (its rows) and ``accepted`` (the count
    #: handed to vLLM); on a first entry ``conv`` and ``h`` (its checkpoint); before
    #: the request's first verify, optionally ``prefill`` (``qkv``, ``a``, ``b``).
    steps: Sequence[Sequence[dict[str, Any]]]
    slots: int
    mode: CacheMode
    #: The torch device.
    on: Any
    #: The vLLM release's version as numbers, for its runner's step (:func:`draft_count`).
    release: tuple[int, ...]
    #: Whose accepted counts the builder is handed (the module docstring).
    runner: Runner = Runner.V1


def _config(vllm: Any, mode: CacheMode, num_spec: int, slots: int, /) -> Any:
    # Eager, as --enforce-eager runs it: no CUDA graph is captured here.
    compilation = vllm.config.CompilationConfig(cudagraph_mode=vllm.config.CUDAGraphMode.NONE)
    speculative = types.SimpleNamespace(
        num_speculative_tokens=num_spec,
        parallel_drafting=False,
        use_eagle_block_drop=lambda: False,
    )
    return types.SimpleNamespace(
        compilation_config=compilation,
        speculative_config=speculative,
        cache_config=types.SimpleNamespace(
            mamba_cache_mode=mode.value, hash_block_size=None, cache_hit_alignment_tokens=None
        ),
        scheduler_config=types.SimpleNamespace(max_num_seqs=max(slots, 1)),
        parallel_config=types.SimpleNamespace(decode_context_parallel_size=1),
        additional_config={"gdn_prefill_backend": "triton"},
        use_v2_model_runner=False,
        num_hash_lookahead_tokens=0,
        # Read for the head sizes when the prefill backend is chosen; triton is asked for.
        model_config=types.SimpleNamespace(hf_text_config=types.SimpleNamespace()),
    )


#: The first release whose runner counts a decode with no drafts as a speculative
#: row with zero drafts (``gpu_model_runner.py``, vLLM 0.32.0 lines 2211-2224, the
#: ``zero_draft_decode_mask``): before it, such a row is -1, a plain decode, which
#: ``gdn_attn.py`` gives block-table column 0 (vLLM #39273, #52942). The one
#: difference between releases this adapter keeps, and it is the runner's, not
#: the builder's: each release's builder and layer run as they are.
ZERO_DRAFT_DECODE_IS_SPEC_SINCE: Final = (0, 32, 0)


def draft_count(drafts: int, verifies: bool, release: tuple[int, ...], /) -> int:  # noqa: FBT001
    """``num_decode_draft_tokens_cpu`` for a row, as ``release``'s runner sets it.

    A prompt chunk is -1; a verify with drafts, its count; a decode with none,
    0 from vLLM 0.32.0 on and -1 before (:data:`ZERO_DRAFT_DECODE_IS_SPEC_SINCE`).
    """
    if not verifies:
        return -1
    if drafts == 0 and release < ZERO_DRAFT_DECODE_IS_SPEC_SINCE:
        return -1
    return drafts


class Pool:
    """The blocks of the batch's slots, and the block table rows vLLM's scheduler gives them.

    Block 0 is vLLM's null block. Mode "none": slot ``s`` owns ``1 + num_spec``
    blocks, its row of the table. Mode "align": its row is ``BLOCK_SIZE``-token
    blocks; the builder takes the row's last ``1 + num_spec`` from ``seq_lens``.
    """

    def __init__(self, mode: CacheMode, slots: int, num_spec: int, /) -> None:
        self.mode, self.width = mode, 1 + num_spec
        self.blocks = 1 + slots * self.width

    def row(self, slot: int, /) -> list[int]:
        """The block table row of slot ``slot``."""
        return [1 + slot * self.width + column for column in range(self.width)]


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
        self.pool = Pool(inputs.mode, inputs.slots, num_spec)
        bf16, on = torch.bfloat16, inputs.on
        spec = engine.MambaSpec(
            shapes=((conv_dim, width - 1 + num_spec), (nv, dv, dk)),
            dtypes=(bf16, bf16),
            block_size=BLOCK_SIZE if inputs.mode is CacheMode.ALIGN else 1,
            mamba_cache_mode=inputs.mode.value,
            num_speculative_blocks=num_spec,
        )
        config = _config(engine, inputs.mode, num_spec, inputs.slots)
        self.builder = engine.GDNAttentionMetadataBuilder(spec, [_PREFIX], config, on)
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
            prefix=_PREFIX,
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
        self.rows = _rows_state(inputs) if inputs.runner is Runner.V2 else None

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
        table = [self.pool.row(request.slot) for request, _, _ in rows]
        drafts = [
            draft_count(length - 1, verifies, self.inputs.release)
            for (_, _, verifies), length in zip(rows, lens, strict=True)
        ]
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
        if self.rows is not None:
            # V2's prepare_attn: the counts of the batch rows, as its model state keeps them.
            slots = torch.tensor([request.slot for request, _, _ in rows], dtype=torch.int64)
            accepted = self.rows.num_accepted_tokens_gpu[slots].tolist()
        metadata = self.builder.build(
            0,
            common,
            num_accepted_tokens=torch.tensor(accepted, dtype=torch.int32, device=on),
            num_decode_draft_tokens_cpu=torch.tensor(drafts, dtype=torch.int32),
        )
        qkv, a, b = (torch.cat([inputs[key] for _, inputs, _ in rows]) for key in ("qkv", "a", "b"))
        out = torch.empty(starts[-1], *self.heads, dtype=torch.bfloat16, device=on)
        self.engine.set_context(types.SimpleNamespace(attn_metadata={_PREFIX: metadata}))
        try:
            self.core(qkv, b, a, out)
        finally:
            self.engine.set_context(None)

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
        prompt = [
            request.computed + (0 if verifies else len(inputs["qkv"]))
            for request, inputs, verifies in rows
        ]

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
        """Seat the step's new requests: each one's checkpoint in its first block."""
        width = self.width
        for entry in step:
            if entry["sequence"] in self.running:
                continue
            request = self.running[entry["sequence"]] = Request(entry["slot"])
            if self.rows is not None:
                added = types.SimpleNamespace(
                    num_computed_tokens=request.computed, prefill_token_ids=None, mm_features=[]
                )
                self.rows.add_request(request.slot, added)
            first = self.pool.row(request.slot)[0]
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
            # After a prompt's chunk the request's state is in its first block, as
            # after a verify that kept one token.
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
            request.computed += entry["accepted"]
            request.accepted = entry["accepted"]

    def state(self, request: Request, /) -> ReplayState:
        """The state the request's next verify reads (module docstring)."""
        row = self.pool.row(request.slot)
        start = request.accepted - 1
        conv = self.conv(row[0])[:, start : start + self.width - 1]
        h = self.ssm_cache[row[request.accepted - 1]].transpose(-1, -2)
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
                del self.running[entry["sequence"]]
        return states


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
