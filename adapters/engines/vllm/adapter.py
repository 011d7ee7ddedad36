# SPDX-License-Identifier: MIT OR Apache-2.0
"""vLLM 0.33.0's speculative GDN path over the protocol's ``replay`` and ``replay_batch``.

``replay_batch`` runs vLLM's own bookkeeping: its GDN metadata builder and
its layer's ``_forward_core`` (``batch.py``, which says what stands in),
in its cache mode ``--cache-mode align`` (the default, with prefix caching) or
``none``, with the accepted counts of its model runner ``--runner v1`` (the
default) or ``v2``. ``replay`` (below) runs the two kernels for one sequence.

vLLM keeps no replay ring: a verify writes the state after every window token
to its own slot, and rolls back when the NEXT verify reads the slot of the
last accepted token (``num_accepted_tokens``). Per round, as
``qwen_gdn_linear_attn.py`` (vLLM 0.33.0, ``_forward_core``'s spec branch,
about lines 1643-1764) calls them:

1. ``causal_conv1d_update`` (``mamba/ops/causal_conv1d.py``) on the window's
   pre-conv columns with ``conv_state_indices``, ``num_accepted_tokens`` (the
   previous round's accepted count) and ``query_start_loc``: the conv state
   is a sliding window whose start the accepted count moves.
2. ``fused_sigmoid_gating_delta_rule_update``
   (``third_party/flash_linear_attention/ops/fused_sigmoid_gating.py``) with
   ``A_log``, ``a``, ``b``, ``dt_bias``, ``ssm_state_indices`` (one slot per
   window token), ``num_accepted_tokens`` and ``use_qk_l2norm_in_kernel``:
   it starts from the slot of the previous round's last accepted token and
   writes each token's state to its slot.

This is the Triton path vLLM takes when ``VLLM_GDN_DECODE_KERNEL`` is not
``cuda`` (the default CUDA decode op, ``fused_gdn_decode``, is a compiled
CUDA kernel that cannot run here; docs/engines.md).

The state reported after a round is what the next verify would read: the
conv window at offset ``accepted - 1`` and the slot of the last accepted
token. The pipeline is ``vllm-bf16``: BF16 activations, conv state and
weights, and h in a BF16 cache (vLLM's ``mamba_ssm_cache_dtype`` "auto",
``mamba_utils.py`` lines 98-110).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from ssm_rollback_spec.harness.replay_wire import BatchForm

from .. import kernels, serve, wheels
from .batch import run_batch
from .batch_inputs import (
    ALIGN_COPIES_SINCE,
    BLOCK_SIZE,
    BLOCK_SIZES,
    BatchInputs,
    BlockSizeError,
    CacheMode,
    Runner,
)
from .load import WHEEL, load, load_package

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ssm_rollback_spec.harness.replay_wire import ReplayBatchRequest, ReplayState

__all__ = ["ADAPTER", "BATCH_OPTIONS", "BLOCK_POINTERS", "replay", "replay_batch"]


def replay(
    request: serve.Arrays, device: kernels.Device, build: serve.Build, /
) -> list[ReplayState]:
    """The state after each round, from vLLM's kernels."""
    import torch  # noqa: PLC0415

    conv_module, gating = load()
    on = torch.device(device.value)
    bf16 = torch.bfloat16
    nk, dk, nv, dv, width = request.dims
    key_dim = nk * dk
    conv_dim = 2 * key_dim + nv * dv
    longest = max(len(qkv) for qkv, _, _, _ in request.rounds)

    def tensor(values: Any, dtype: torch.dtype = bf16) -> torch.Tensor:
        return torch.as_tensor(values, dtype=torch.float32).to(dtype).to(on)

    # Slot 0 is vLLM's null block; the sequence's conv state and its states live in slot 1 on.
    conv_cache = torch.zeros(2, conv_dim, width - 1 + longest - 1, dtype=bf16, device=on)
    conv_cache[1, :, : width - 1] = tensor(request.conv)
    ssm_cache = torch.zeros(1 + longest, nv, dv, dk, dtype=bf16, device=on)
    ssm_cache[1] = tensor(request.h).transpose(1, 2)
    weight = tensor(request.conv_weight).contiguous()
    a_log, dt_bias = tensor(request.a_log), tensor(request.dt_bias)
    slots = torch.arange(1, longest + 1, dtype=torch.int32, device=on)[None, :]
    sequence = torch.tensor([1], dtype=torch.int32, device=on)
    previous = 1
    states: list[ReplayState] = []
    for qkv, a, b, accepted in request.rounds:
        window = len(qkv)
        starts = torch.tensor([0, window], dtype=torch.int32, device=on)
        count = torch.tensor([previous], dtype=torch.int32, device=on)
        post = conv_module.causal_conv1d_update(
            tensor(qkv),
            conv_cache,
            weight,
            None,
            "silu",
            conv_state_indices=sequence,
            num_accepted_tokens=count,
            query_start_loc=starts,
            max_query_len=window,
        )
        q = post[:, :key_dim].reshape(1, window, nk, dk).contiguous()
        k = post[:, key_dim : 2 * key_dim].reshape(1, window, nk, dk).contiguous()
        v = post[:, 2 * key_dim :].reshape(1, window, nv, dv).contiguous()
        gating.fused_sigmoid_gating_delta_rule_update(
            A_log=a_log,
            a=tensor(a),
            b=tensor(b),
            dt_bias=dt_bias,
            q=q,
            k=k,
            v=v,
            initial_state=ssm_cache,
            inplace_final_state=True,
            cu_seqlens=starts,
            ssm_state_indices=slots,
            num_accepted_tokens=count,
            use_qk_l2norm_in_kernel=True,
        )
        previous = build.accepted(accepted, window)
        conv = conv_cache[1, :, previous - 1 : previous - 1 + width - 1]
        h = ssm_cache[previous].transpose(1, 2)
        states.append({"conv": conv.double().tolist(), "h": h.double().tolist()})
    return states


#: Why a batch that needs the prefill kernels of an older vLLM cannot run here.
BLOCK_POINTERS: Final = (
    "vLLM {}'s chunked prefill kernels use Triton block pointers, which Triton 3.9.0 "
    'removed (docs/engines.md, "Real bugs")'
)


def replay_batch(
    request: ReplayBatchRequest,
    device: kernels.Device,
    build: serve.Build,
    options: Mapping[str, str],
    /,
) -> list[ReplayState]:
    """Each entry's state after its step, from vLLM's metadata builder and GDN layer core.

    ``options`` are the batch options given (:data:`BATCH_OPTIONS`): the cache mode and the
    model runner whose accepted counts the builder is handed.
    """
    import torch  # noqa: PLC0415

    engine = load_package()
    on = torch.device(device.value)
    dims = request["dims"]
    shape = serve.layer_dims(dims)

    def tensor(values: Any) -> torch.Tensor:
        return torch.as_tensor(values, dtype=torch.float32).to(torch.bfloat16).to(on)

    def rows(items: list[Any], /) -> dict[str, torch.Tensor]:
        return {
            "qkv": tensor([row["values"] for row in items]),
            "a": tensor([row["a"] for row in items]),
            "b": tensor([row["b"] for row in items]),
        }

    steps = []
    for step in request["steps"]:
        entries = []
        for entry in step:
            window = len(entry["rows"])
            inputs: dict[str, Any] = {
                "sequence": entry["sequence"],
                "slot": entry["slot"],
                "finish": entry["finish"],
            }
            if window:
                # A prompt chunk alone has no window, and so no count to hand over.
                inputs["accepted"] = build.accepted(entry["accepted"], window)
                inputs |= rows(entry["rows"])
            if "checkpoint" in entry:
                inputs["conv"] = tensor(entry["checkpoint"]["conv"])
                inputs["h"] = tensor(entry["checkpoint"]["h"])
            if "prefill" in entry:
                inputs["prefill"] = rows(entry["prefill"])
            entries.append(inputs)
        steps.append(entries)
    weights = (
        tensor(request["conv_weight"]),
        tensor(request.get("a_log", [])),
        tensor(request.get("dt_bias", [])),
    )
    batch = BatchInputs(
        dims=shape,
        weights=weights,
        steps=steps,
        slots=request["slots"],
        mode=CacheMode(options["cache-mode"]),
        runner=Runner(options["runner"]),
        block_size=int(options["block-size"]),
        on=on,
        release=_release(),
    )
    return _run_batch(engine, batch)


def _run_batch(engine: Any, batch: BatchInputs, /) -> list[ReplayState]:
    """``batch.py``'s :func:`run_batch`, its limits answered as the engine's (``bad-request``)."""
    from triton.runtime.errors import InterpreterError  # noqa: PLC0415

    try:
        return run_batch(engine, batch)
    except BlockSizeError as error:
        raise serve.EngineLimitError(str(error)) from None
    except InterpreterError as error:
        # Before 0.32.0 vLLM's FLA chunk rule (its prefill, which a decode with
        # no drafts beside drafted windows is sent to) uses tl.make_block_ptr.
        if "Block pointers" not in str(error):
            raise
        raise serve.EngineLimitError(
            BLOCK_POINTERS.format(wheels.selected(WHEEL).version)
        ) from None


#: The flags vLLM's batch form takes: its cache mode, and the runner whose counts it takes.
BATCH_OPTIONS: Final = (
    serve.BatchOption("cache-mode", tuple(mode.value for mode in CacheMode), "vLLM's cache mode"),
    serve.BatchOption(
        "runner",
        tuple(runner.value for runner in Runner),
        "the model runner whose accepted counts the builder is handed",
    ),
    serve.BatchOption(
        "block-size",
        tuple(str(size) for size in BLOCK_SIZES),
        "the tokens of a block in mode align (vLLM's --block-size; below the default,"
        " every batch crosses blocks and the runner's copies between them run)",
    ),
)


def _release() -> tuple[int, ...]:
    """The selected vLLM release's version as numbers, as its runner's steps compare it."""
    return tuple(int(part) for part in wheels.selected(WHEEL).version.split(".")[:3])


def _forms_with(options: Mapping[str, str], /) -> tuple[BatchForm, ...]:
    """``prefix-hits`` where the runner's copies save blocks a join can hit.

    That is V1's runner in mode "align", in blocks small enough for a batch to
    fill one, in a release that has the fused copies (``batch_inputs.py``'s
    ``ALIGN_COPIES_SINCE``).
    """
    release = _release()
    copies = (
        options["cache-mode"] == CacheMode.ALIGN.value
        and options["runner"] == Runner.V1.value
        and int(options["block-size"]) != BLOCK_SIZE
        and release >= ALIGN_COPIES_SINCE
    )
    return (BatchForm.PREFIX_HITS,) if copies else ()


#: vLLM's row in the registry.
ADAPTER: Final = serve.EngineAdapter(
    WHEEL,
    "vllm-bf16",
    "snapshot",
    replay,
    replay_batch=replay_batch,
    batch_options=BATCH_OPTIONS,
    batch_forms=(BatchForm.PROMPT_CHUNKS,),
    forms_with=_forms_with,
)
