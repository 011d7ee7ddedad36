# SPDX-License-Identifier: MIT OR Apache-2.0
"""vLLM's runner's copies between blocks in mode "align", run as the runner runs them.

``batch.py``'s docstring says what they are and what stands in for the
runner's inputs; :class:`AlignCopies` runs the release's own functions
before and after each forward of the batch.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

from .stand_ins import LAYER_PREFIX

if TYPE_CHECKING:
    from .batch_inputs import BatchInputs
    from .pool import Pool, Request
    from .stand_ins import Layer

__all__ = ["AlignCopies"]


class AlignCopies:
    """vLLM's runner's copies between blocks in mode "align", over the batch's pool.

    The release's own ``preprocess_mamba``, ``stage_postprocess_inputs_to_gpu``
    and ``postprocess_mamba_align_gpu`` (``v1/worker/mamba_utils.py``), with the
    runner's inputs standing in as ``batch.py``'s docstring says. Their Triton
    kernels address the caches and the block table by raw pointer, so the
    table is one tensor for the whole batch, its rows rewritten in each
    forward's order, as the runner's input batch keeps its rows.
    """

    def __init__(
        self, engine: Any, inputs: BatchInputs, pool: Pool, spec: Any, layer: Layer, /
    ) -> None:
        import torch  # noqa: PLC0415

        on = inputs.on
        self.torch, self.on = torch, on
        self.utils = engine.mamba_utils
        group = engine.KVCacheGroupSpec(layer_names=[LAYER_PREFIX], kv_cache_spec=spec)
        self.config = engine.KVCacheConfig(
            num_blocks=pool.blocks, kv_cache_tensors=[], kv_cache_groups=[group]
        )
        self.copy_funcs = {
            spec.mamba_type: engine.MambaStateCopyFuncCalculator.gated_delta_net_state_copy_func()
        }
        rows = max(inputs.slots, 1)

        def make_buffer(*size: int, dtype: Any, numpy: bool = True) -> Any:
            # The runner's _make_buffer, without pinned memory: there is no CUDA host here.
            return engine.CpuGpuBuffer(
                *size, dtype=dtype, device=on, pin_memory=False, with_numpy=numpy
            )

        self.buffers = self.utils.MambaBuffers.create(
            max_num_reqs=rows,
            kv_cache_config=self.config,
            copy_funcs=self.copy_funcs,
            make_buffer=make_buffer,
            device=on,
            with_postprocess_align=True,
        )
        self.table = torch.zeros(rows, pool.width, dtype=torch.int32, device=on)
        self.accepted = torch.ones(rows, dtype=torch.int32)
        self.input_batch = types.SimpleNamespace(
            req_ids=[],
            block_table=[types.SimpleNamespace(get_device_tensor=lambda n: self.table[:n])],
            num_accepted_tokens_cpu=self.accepted.numpy(),
            num_accepted_tokens_cpu_tensor=self.accepted,
        )
        self.forward_context = {LAYER_PREFIX: layer}
        #: The runner's ``mamba_state_idx``: each request's running block column.
        self.state_idx: dict[str, int] = {}
        self.finished: set[str] = set()

    def before(self, rows: list[tuple[Request, dict[str, Any], bool]], /) -> list[int]:
        """The runner's steps before the builder; the counts it then hands the builder."""
        n = len(rows)
        for index, (request, _, _) in enumerate(rows):
            self.table[index] = self.torch.tensor(request.row)
            self.accepted[index] = request.accepted
        self.input_batch.req_ids = [request.name for request, _, _ in rows]
        requests = {
            request.name: types.SimpleNamespace(
                num_computed_tokens=request.computed, block_ids=(request.row,)
            )
            for request, _, _ in rows
        }
        scheduled = types.SimpleNamespace(
            finished_req_ids=self.finished,
            preempted_req_ids=set(),
            scheduled_cached_reqs=types.SimpleNamespace(resumed_req_ids=set()),
            num_scheduled_tokens={r.name: len(inputs["qkv"]) for r, inputs, _ in rows},
            scheduled_spec_decode_tokens={
                r.name: [0] * (len(inputs["qkv"]) - 1) for r, inputs, verifies in rows if verifies
            },
        )
        self.utils.preprocess_mamba(
            scheduled,
            self.config,
            types.SimpleNamespace(enable_prefix_caching=True),
            self.state_idx,
            self.input_batch,
            requests,
            self.forward_context,
            self.copy_funcs,
            self.buffers.preprocess,
            align_ctx=self.buffers.postprocess_align,
        )
        self.finished = set()
        self.utils.stage_postprocess_inputs_to_gpu(
            self.buffers.postprocess_align,
            scheduled,
            self.input_batch.req_ids,
            n,
            requests,
            self.state_idx,
        )
        return [int(count) for count in self.accepted[:n]]

    def after(
        self, rows: list[tuple[Request, dict[str, Any], bool]], sampled: list[int], /
    ) -> None:
        """The runner's step after sampling: the fused post-copy, and each row's count after it."""
        torch, n = self.torch, len(rows)
        counts = torch.tensor(sampled, dtype=torch.int32, device=self.on)
        self.utils.postprocess_mamba_align_gpu(
            bufs=self.buffers,
            num_reqs=n,
            num_accepted_tokens_gpu=counts,
            num_accepted_tokens_cpu_tensor=self.accepted,
            input_batch=self.input_batch,
            kv_cache_config=self.config,
            forward_context=self.forward_context,
            mamba_state_copy_funcs=self.copy_funcs,
        )
        for index, (request, _, _) in enumerate(rows):
            request.accepted = int(self.accepted[index])

    def column(self, request: Request, /) -> int:
        """The block column the request's running state is in."""
        return self.state_idx.get(request.name, 0)
