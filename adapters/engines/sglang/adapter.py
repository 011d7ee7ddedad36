# SPDX-License-Identifier: MIT OR Apache-2.0
"""SGLang 0.5.23's GDN ReplaySSM over the protocol's ``replay``: verify, commit, fold.

As SGLang runs it under ``--enable-linear-replayssm-spec`` for a GDN model
(``srt/layers/attention/linear/gdn_backend.py``, ``_replayssm_target_verify``,
about lines 1441-1527; ``srt/speculative/spec_utils.py``,
``commit_mamba_states_after_verify``, about lines 1080-1157). Per round:

1. Verify. ``causal_conv1d_update`` (``kernels/ops/mamba/causal_conv1d_triton.py``)
   on the window, writing each token's conv window to
   ``intermediate_conv_window``; then ``gdn_replayssm_spec_decode`` with
   ``launch_mode="verify"``: the window's outputs from the checkpoint and the
   ring, and the window's records (d = u from the chunked UT transform, the
   normed k as BF16 high parts and low parts, g in FP32) written at the
   circular positions ``(cache_base + write_pos + i) & (L - 1)``.
2. Commit. ``commit_gdn_replayssm_spec`` moves the cursor by the accepted
   count and sets the fold flag when ``write_pos + 2 * K > L`` (K the
   configured draft tokens, L the ring length); ``commit_gdn_replayssm_circular``
   then folds a flagged ring into the checkpoint in closed form and moves
   ``cache_base``.
3. The conv state's rollback: SGLang copies the accepted token's window from
   ``intermediate_conv_window`` with ``fused_conv_window_scatter_with_mask``,
   whose wrapper refuses tensors that are not on a CUDA or XPU device
   (``kernels/ops/mamba/mamba_state_scatter_triton.py``, about lines 507-511).
   EMULATED here, on every device: the same copy, as a torch slice.

The state reported after a round. The ring is SGLang's state: a checkpoint
plus the committed records. To read h, the adapter folds a copy of the
checkpoint with the engine's own fold kernel (``commit_gdn_replayssm_circular``
on copies of the cursors with the fold flag set); the engine's ring and
checkpoint are untouched, so its schedule of folds is its own.

Which Triton. The adapter runs on Triton 3.8.0, the release SGLang 0.5.23's
own pins bring (its ``torch==2.14.1`` requires ``triton~=3.8.0``), put first
on the path by ``__main__.py`` (``adapters/engines/environment.py``); vLLM and
FLA run on the venv's Triton 3.9.0, which removed the block pointers
SGLang's extend (its FLA chunk rule, ``extend.py``) addresses its tiles with.
``replay`` runs only the ReplaySSM kernels; ``replay_batch`` runs prompts
through the extend (``batch.py``).

The pipeline is ``sglang-bf16``: BF16 activations, conv state and ring
records, FP32 checkpoint (SGLang's default ssm dtype). L is 16, SGLang's
default ``linear_replayssm_cache_len``; K, the configured draft tokens, is the
request's longest window. The kernel needs ``key_head_dim`` of at least 32
(``_launch_gdn_spec``: ``BKT = next_pow2(K) / 2 >= 16``): a smaller one is
padded with zero channels, which add nothing to any sum, and the padding is
dropped from the state reported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from ssm_rollback_spec.harness.replay_wire import BatchForm

from .. import kernels, serve
from . import batch as sglang_batch
from .load import WHEEL, load
from .shapes import Shapes

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ssm_rollback_spec.harness.replay_wire import ReplayBatchRequest, ReplayState

__all__ = ["ADAPTER", "BATCH_OPTIONS", "RING_LENGTH", "replay", "replay_batch"]

#: SGLang's default ring length L (``linear_replayssm_cache_len``).
RING_LENGTH: Final = sglang_batch.RING_LENGTH


def replay(  # noqa: PLR0915 - one round of the engine, step by step
    request: serve.Arrays, device: kernels.Device, build: serve.Build, /
) -> list[ReplayState]:
    """The state after each round, from SGLang's kernels."""
    import numpy as np  # noqa: PLC0415
    import torch  # noqa: PLC0415

    conv_module, replayssm = load()
    on = torch.device(device.value)
    bf16, f32 = torch.bfloat16, torch.float32
    shapes = Shapes(*request.dims)
    nv, dv, dk, dk_given = shapes.nv, shapes.dv, shapes.dk, shapes.dk_given
    key_dim, conv_dim, width = shapes.key_dim, shapes.conv_dim, shapes.width
    nk = shapes.nk
    drafts = max(len(qkv) for qkv, _, _, _ in request.rounds)
    ring = RING_LENGTH
    if 2 * drafts > ring:
        raise serve.EngineLimitError(
            f"SGLang's ring of {ring} records takes windows of at most {ring // 2} tokens, "
            f"got {drafts}"
        )

    def tensor(values: Any, dtype: torch.dtype = bf16) -> torch.Tensor:
        return torch.as_tensor(np.asarray(values), dtype=f32).to(dtype).to(on)

    slot, row = 1, 1  # SGLang's null slot is -1; slot 0 is left unused
    conv_state = torch.zeros(2, conv_dim, width - 1, dtype=bf16, device=on)
    conv_state[slot] = tensor(shapes.pad(request.conv.T).T)
    windows = torch.zeros(2, drafts, conv_dim, width - 1, dtype=bf16, device=on)
    h0 = np.zeros((nv, dk, dv))
    h0[:, :dk_given, :] = request.h
    checkpoint = torch.zeros(1, 2, nv, dv, dk, dtype=f32, device=on)
    checkpoint[0, slot] = tensor(h0, f32).transpose(1, 2)
    d_ring = torch.zeros(1, 2, nv, ring, dv, dtype=bf16, device=on)
    k_ring = torch.zeros(1, 2, nk, ring, dk, dtype=bf16, device=on)
    g_ring = torch.zeros(1, 2, nv, ring, dtype=f32, device=on)
    d_low = torch.zeros_like(d_ring)
    k_low = torch.zeros_like(k_ring)
    write_pos = torch.zeros(2, dtype=torch.int32, device=on)
    cache_base = torch.zeros(2, dtype=torch.int32, device=on)
    is_flush = torch.zeros(2, dtype=torch.int8, device=on)
    weight = tensor(shapes.pad(request.conv_weight.T).T).contiguous()
    a_log, dt_bias = tensor(request.a_log), tensor(request.dt_bias)
    slots = torch.tensor([slot], dtype=torch.int32, device=on)
    rows = torch.tensor([row], dtype=torch.int32, device=on)
    kept = torch.tensor(shapes.kept, device=on)

    def fold(target: torch.Tensor, cursors: tuple[torch.Tensor, ...]) -> None:
        replayssm.commit_gdn_replayssm_circular(
            checkpoint_state=target,
            d_cache=d_ring,
            k_cache=k_ring,
            g_cache=g_ring,
            d_residual_cache=d_low,
            k_residual_cache=k_low,
            state_batch_indices=slots,
            replay_indices=rows,
            write_pos=cursors[0],
            cache_base=cursors[1],
            is_flush=cursors[2],
            accept_lens=torch.zeros(1, dtype=torch.int32, device=on),
            null_block_id=-1,
        )

    states: list[ReplayState] = []
    for qkv, a, b, accepted in request.rounds:
        window = len(qkv)
        x = tensor(shapes.pad(qkv)).T.contiguous()[None]
        post = conv_module.causal_conv1d_update(
            x,
            conv_state,
            weight,
            None,
            "silu",
            conv_state_indices=slots,
            intermediate_conv_window=windows,
            intermediate_state_indices=slots,
        )[0].T.contiguous()
        q = post[:, :key_dim].reshape(window, nk, dk).contiguous()
        k = post[:, key_dim : 2 * key_dim].reshape(window, nk, dk).contiguous()
        v = post[:, 2 * key_dim :].reshape(window, nv, dv).contiguous()
        replayssm.gdn_replayssm_spec_decode(
            q=q,
            k=k,
            v=v,
            a=tensor(a),
            b=tensor(b),
            A_log=a_log,
            dt_bias=dt_bias,
            checkpoint_state=checkpoint[0],
            d_cache=d_ring[0],
            k_cache=k_ring[0],
            g_cache=g_ring[0],
            rawv_cache=d_low[0],
            rawk_cache=k_low[0],
            beta_cache=None,
            out=q.new_empty(window, nv, dv),
            query_start_loc=torch.tensor([0, window], dtype=torch.int32, device=on),
            ssm_state_indices=slots,
            replay_indices=rows,
            write_pos=write_pos,
            cache_base=cache_base,
            is_flush=is_flush,
            max_cache_len=ring,
            max_spec_len=drafts,
            scale=dk**-0.5,
            use_qk_l2norm_in_kernel=True,
            null_block_id=-1,
            launch_mode="verify",
        )
        taken = build.accepted(accepted, window)
        replayssm.commit_gdn_replayssm_spec(
            write_pos=write_pos,
            cache_base=cache_base,
            is_flush=is_flush,
            num_accepted=torch.tensor([taken], dtype=torch.int32, device=on),
            replay_indices=rows,
            max_cache_len=ring,
            max_spec_len=drafts,
            fold_every_commit=checkpoint.dtype != f32,
            null_block_id=-1,
        )
        fold(checkpoint, (write_pos, cache_base, is_flush))
        # Emulated: fused_conv_window_scatter_with_mask needs CUDA tensors.
        conv_state[slot] = windows[slot, taken - 1]
        folded = checkpoint.clone()
        fold(folded, (write_pos.clone(), cache_base.clone(), torch.ones_like(is_flush)))
        h = folded[0, slot].transpose(1, 2)[:, :dk_given, :]
        conv = conv_state[slot].index_select(0, kept)
        states.append({"conv": conv.double().tolist(), "h": h.double().tolist()})
    return states


def replay_batch(
    request: ReplayBatchRequest,
    device: kernels.Device,
    build: serve.Build,
    options: Mapping[str, str],
    /,
) -> list[ReplayState]:
    """Each entry's state after its step, from SGLang's own pool, verify and commit.

    ``options`` are the batch options given (:data:`BATCH_OPTIONS`): the path, snapshots or
    ReplaySSM.

    Raises:
        serve.EngineLimitError: on a device other than the CPU (the scatters
            SGLang runs on CUDA are stood in for by its CPU one), or a window
            SGLang's ring cannot take.

    RB-REPLAY-12.
    """
    if device is not kernels.Device.CPU:
        raise serve.EngineLimitError("SGLang's replay_batch runs on --device cpu only")
    path = sglang_batch.BatchPath(options["cache-mode"])
    return sglang_batch.replay_batch(request, path, build.accepted)


#: The flag SGLang's batch form takes: its path, snapshots (the default) or ReplaySSM.
BATCH_OPTIONS: Final = (
    serve.BatchOption(
        "cache-mode",
        tuple(path.value for path in sglang_batch.BatchPath),
        "SGLang's path, its snapshots or ReplaySSM,",
    ),
)

#: SGLang's row in the registry.
ADAPTER: Final = serve.EngineAdapter(
    WHEEL,
    "sglang-bf16",
    "sglang-gdn-replayssm",
    replay,
    replay_batch=replay_batch,
    batch_options=BATCH_OPTIONS,
    batch_forms=(BatchForm.PROMPT_CHUNKS,),
)
