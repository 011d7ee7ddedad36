# SPDX-License-Identifier: MIT OR Apache-2.0
"""FLA 0.6.0's gated delta rule over the protocol's ``replay``: the seed's replay, FLA's kernels.

FLA is a kernel library, not a server: it has no speculative bookkeeping of
its own. The adapter runs the seed's replay design (a checkpoint per verify
and a ring of the window's first K - 1 pre-conv rows; docs/replay-designs.md) with
FLA's kernels for every step:

- the conv: ``causal_conv1d_update`` (``fla/modules/causal_conv1d/ops.py``),
  one token at a time; FLA's cache keeps ``conv_kernel`` columns, the oldest
  never read, so the state's ``conv_kernel - 1`` columns sit after one unused;
- the verify: ``fused_recurrent_gated_delta_rule``
  (``fla/ops/gated_delta_rule/fused_recurrent.py``) over the whole window
  from the checkpoint, with the gate and beta computed in the kernel from
  ``a``, ``b``, ``A_log`` and ``dt_bias`` (``use_gate_in_kernel``,
  ``use_beta_sigmoid_in_kernel``) and the L2 norm in the kernel;
- the rollback: a whole accept keeps the verify's state; a partial accept
  restores the checkpoint and runs the first ``accepted`` ring rows again,
  through the fused recurrent rule or, with ``--rule chunk``, through
  ``chunk_gated_delta_rule`` (``fla/ops/gated_delta_rule/chunk.py``).

The pipeline is ``fla-bf16``: BF16 activations and conv state, FP32 state h
(FLA's final state is always FP32, ``fused_recurrent.py`` about lines
211-216).

Run from the repository root as ``python -m adapters.engines.fla [--rule
recurrent|chunk]`` with the flags every engine adapter takes (``serve.py``).
FLA's kernel modules import nothing of FLA's that must stand in: its own
``fla.utils`` and ``fla.ops`` helpers import as they are; only the package
``__init__`` files of ``fla``, ``fla.ops``, ``fla.ops.gated_delta_rule``,
``fla.modules`` and ``fla.modules.causal_conv1d`` are skipped (they import
every layer and model).
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
from typing import TYPE_CHECKING, Any, Final

from ssm_rollback_spec.releases import FLA

from . import kernels, serve, wheels

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ssm_rollback_spec.harness.replay_wire import ReplayState

__all__ = ["ADAPTER", "WHEEL", "load", "main", "replay"]

#: FLA's release and the files its adapter imports (the whole package's Python).
WHEEL: Final = wheels.EngineWheel.pinned("fla", FLA, ("fla/",))


def load() -> tuple[Any, Any, Any]:
    """The selected FLA release's conv update, fused recurrent rule and chunk rule modules."""
    fla = wheels.selected(WHEEL)
    root = wheels.fetch(fla) / "fla"
    kernels.package("fla", root)
    kernels.stub("fla", __version__=fla.version)
    for name in ("ops", "ops/gated_delta_rule", "modules", "modules/causal_conv1d"):
        kernels.package("fla." + name.replace("/", "."), root / name)
    conv = importlib.import_module("fla.modules.causal_conv1d.ops")
    recurrent = importlib.import_module("fla.ops.gated_delta_rule.fused_recurrent")
    chunk = importlib.import_module("fla.ops.gated_delta_rule.chunk")
    return conv, recurrent, chunk


def replay(
    request: serve.Arrays, device: kernels.Device, build: serve.Build, rule: str = "recurrent", /
) -> list[ReplayState]:
    """The state after each round, from FLA's kernels."""
    import numpy as np  # noqa: PLC0415
    import torch  # noqa: PLC0415

    conv_module, recurrent, chunk = load()
    on = torch.device(device.value)
    bf16, f32 = torch.bfloat16, torch.float32
    nk, dk, nv, dv, width = request.dims
    key_dim = nk * dk
    conv_dim = 2 * key_dim + nv * dv

    def tensor(values: Any, dtype: torch.dtype = bf16) -> torch.Tensor:
        return torch.as_tensor(np.asarray(values), dtype=f32).to(dtype).to(on)

    weight = tensor(request.conv_weight).contiguous()
    a_log, dt_bias = tensor(request.a_log), tensor(request.dt_bias)
    conv = torch.zeros(1, conv_dim, width, dtype=bf16, device=on)
    conv[0, :, 1:] = tensor(request.conv)
    h = tensor(request.h, f32)[None].contiguous()

    def rule_over(
        rows: torch.Tensor, a: torch.Tensor, b: torch.Tensor, start: torch.Tensor, kind: str
    ) -> torch.Tensor:
        count = len(rows)
        q = rows[:, :key_dim].reshape(1, count, nk, dk).contiguous()
        k = rows[:, key_dim : 2 * key_dim].reshape(1, count, nk, dk).contiguous()
        v = rows[:, 2 * key_dim :].reshape(1, count, nv, dv).contiguous()
        run = recurrent.fused_recurrent_gated_delta_rule
        if kind == "chunk":
            run = chunk.chunk_gated_delta_rule
        _, final = run(
            q=q,
            k=k,
            v=v,
            g=a[None].contiguous(),
            beta=b[None].contiguous(),
            initial_state=start,
            output_final_state=True,
            use_qk_l2norm_in_kernel=True,
            use_gate_in_kernel=True,
            A_log=a_log,
            dt_bias=dt_bias,
            use_beta_sigmoid_in_kernel=True,
        )
        return final

    states: list[ReplayState] = []
    for qkv, a_rows, b_rows, accepted in request.rounds:
        window = len(qkv)
        checkpoint_conv = conv.clone()
        columns = []
        for column in tensor(qkv):
            post, conv = conv_module.causal_conv1d_update(
                column[None, None, :], conv, weight=weight, activation="silu"
            )
            columns.append(post[0, 0])
        post_conv = torch.stack(columns)
        a, b = tensor(a_rows), tensor(b_rows)
        live = rule_over(post_conv, a, b, h, "recurrent")
        taken = build.accepted(accepted, window)
        if taken == window:
            h = live
        else:
            h = rule_over(post_conv[:taken], a[:taken], b[:taken], h, rule)
            conv = checkpoint_conv
            for column in tensor(qkv[:taken]):
                _, conv = conv_module.causal_conv1d_update(
                    column[None, None, :], conv, weight=weight, activation="silu"
                )
        states.append({"conv": conv[0, :, 1:].double().tolist(), "h": h[0].double().tolist()})
    return states


def _recurrent(
    request: serve.Arrays, device: kernels.Device, build: serve.Build, /
) -> list[ReplayState]:
    return replay(request, device, build)


#: FLA's row in the registry: its fused recurrent rule (``--rule recurrent``, the default).
ADAPTER: Final = serve.EngineAdapter(
    WHEEL, "fla-bf16", "minimal-pre-conv", _recurrent, "rule recurrent"
)


def main(argv: Sequence[str] | None = None) -> int:
    """Serve FLA's kernels; ``--rule chunk`` replays through the chunk rule."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    rule = "recurrent"
    if "--rule" in arguments:
        at = arguments.index("--rule")
        rule = arguments[at + 1] if at + 1 < len(arguments) else ""
        if rule not in {"recurrent", "chunk"}:
            sys.stderr.write("adapters.engines.fla: error: --rule must be recurrent or chunk\n")
            return 2
        del arguments[at : at + 2]

    def run(
        request: serve.Arrays, device: kernels.Device, build: serve.Build, /
    ) -> list[ReplayState]:
        return replay(request, device, build, rule)

    chosen = dataclasses.replace(ADAPTER, replay=run, variant=f"rule {rule}")
    return serve.main(chosen, arguments)


if __name__ == "__main__":
    sys.exit(main())
