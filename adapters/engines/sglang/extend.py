# SPDX-License-Identifier: MIT OR Apache-2.0
"""SGLang 0.5.23's extend chunk rule, run on SGLang's Triton (3.8.0) and on the venv's (3.9.0).

SGLang runs a prompt, or a chunk of one, as an extend:
``GDNAttnBackend.forward_extend`` (``srt/layers/attention/linear/gdn_backend.py``
lines 948-1200) runs the prefill conv and the gates, then hands the rows to
its kernel dispatcher (line 1180), whose Triton kernel,
``TritonGDNKernel.extend`` (``srt/layers/attention/linear/kernels/gdn_triton.py``
lines 169-214), calls the FLA chunk rule SGLang ships,
``chunk_gated_delta_rule`` (``kernels/ops/attention/fla/chunk.py`` line 136),
with ``use_qk_l2norm_in_kernel=True``. Every kernel of that rule addresses
its tiles with ``tl.make_block_ptr``: the l2norm (``fla/l2norm.py`` line 65),
the gate's cumulative sum (``fla/cumsum.py`` lines 53-61), the fused
kkt-solve (``fla/chunk_fwd.py`` line 104 on), the state pass
(``fla/chunk_delta_h.py`` line 148 on) and the output (``fla/chunk_o.py``
line 82 on).

Triton 3.9.0, the venv's own (vLLM's and FLA's), removed block pointers
from the language itself, not only from its interpreter:
``tl.make_block_ptr`` and ``tl.advance`` raise
``NotImplementedError("Block pointers have been removed in favor of the
tensor descriptor API")`` (``triton/language/core.py`` lines 2519-2523 and
2531-2538), and ``tl.load`` and ``tl.store`` no longer take
``boundary_check`` or ``padding_option`` (lines 2420 and 2480); a compiled
Triton 3.9.0 kernel refuses the same line with the same message. Triton
3.8.0 still has them. SGLang 0.5.23 pins ``torch==2.14.1``, which requires
``triton~=3.8.0``, so SGLang as it ships runs on 3.8.0, and so does its
adapter here (``adapters/engines/environment.py``, "Which Triton each
engine runs"): the batch runs its prompts through this extend (``batch.py``).

:func:`main` runs SGLang's chunk rule from the wheel's files, first line the
Triton it ran under: by default SGLang's Triton, where it is called as
``TritonGDNKernel.extend`` calls it and past its l2norm
(``chunk_gated_delta_rule_fwd``, ``chunk.py`` line 36), both under the
interpreter, each ``ran`` (exit 0); with ``--venv-triton`` the same two under
Triton 3.9.0, which stop at their first kernel with the error as Triton
gives it (exit 1); with ``--compiled``, SGLang's l2norm kernel compiled by
Triton 3.9.0 for a CUDA target (``sm_90``), which needs no GPU, since the
front end refuses it before any code is made (exit 1).

Stood in, each for its reason: ``sglang.srt.utils.common`` holds only
``torch_release`` (the one name ``fla/utils.py`` line 18 imports from the
server); the package ``__init__`` files above ``fla`` are not run (they
register SGLang's kernel inventory); and ``input_guard``'s device context
(``fla/utils.py`` ``custom_device_ctx``, ``torch.cpu.device``, which torch
2.13.0 does not have) is a null context: a CPU has one device, and on a CPU
SGLang calls sgl-kernel's ``chunk_gated_delta_rule_cpu`` instead
(``gdn_triton.py`` lines 27-30), so this line never runs there.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import TYPE_CHECKING, Any, Final

from .. import kernels, wheels
from ..environment import KernelsVenvError, use_sglang_triton
from .load import WHEEL

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["chunk_rule", "main"]

#: The rows of the prompt run: SGLang's CHUNK_SIZE is 64, so a short prompt is one chunk.
_ROWS: Final = 5
#: The dims the rows are drawn with: SGLang's kernels take key heads of 32 or more.
_HEADS, _KEY, _VALUE = 1, 32, 16
#: The CUDA target the l2norm kernel is compiled for with ``--compiled`` (an H100's).
_TARGET: Final = ("cuda", 90, 32)


def chunk_rule() -> Any:
    """SGLang's ``fla/chunk.py``, imported from the wheel's files with its own helpers."""
    import torch  # noqa: PLC0415 - the kernels venv's
    from packaging import version  # noqa: PLC0415

    root = wheels.fetch(wheels.selected(WHEEL)) / "sglang"
    kernels.package("sglang", root)
    for name in ("kernels", "kernels/ops", "kernels/ops/attention", "kernels/ops/attention/fla"):
        kernels.package("sglang." + name.replace("/", "."), root / name)
    kernels.stub("sglang.srt.utils.common", torch_release=version.parse(torch.__version__).release)
    utils = kernels.load_file(
        "sglang.kernels.ops.attention.fla.utils", root / "kernels/ops/attention/fla/utils.py"
    )
    # torch 2.13.0 has no torch.cpu.device; a CPU has one device (the module's docstring).
    utils.custom_device_ctx = lambda index: contextlib.nullcontext()  # noqa: ARG005
    return kernels.load_file(
        "sglang.kernels.ops.attention.fla.chunk", root / "kernels/ops/attention/fla/chunk.py"
    )


def _outcome(
    label: str, run: Callable[[], object], /, *, last_line: bool = False
) -> tuple[str, bool]:
    """``label``'s line: ``ran``, or the error's type and text (``last_line``: its last)."""
    try:
        run()
    except Exception as error:  # noqa: BLE001 - the error is the finding, reported whole
        text = str(error).splitlines()[-1] if last_line else str(error)
        return f"{label}: {type(error).__name__}: {text}", False
    return f"{label}: ran", True


def _interpreted() -> list[tuple[str, bool]]:
    import torch  # noqa: PLC0415

    chunk = chunk_rule()
    generator = torch.Generator().manual_seed(0)

    def drawn(*shape: int, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
        return torch.rand(*shape, generator=generator).to(dtype)

    q, k = drawn(1, _ROWS, _HEADS, _KEY), drawn(1, _ROWS, _HEADS, _KEY)
    v = drawn(1, _ROWS, _HEADS, _VALUE)
    g = -drawn(1, _ROWS, _HEADS, dtype=torch.float32)
    beta = drawn(1, _ROWS, _HEADS)
    state = torch.zeros(2, _HEADS, _VALUE, _KEY, dtype=torch.float32)
    slots = torch.tensor([1], dtype=torch.int32)
    starts = torch.tensor([0, _ROWS], dtype=torch.int32)

    def extend() -> object:
        # As TritonGDNKernel.extend calls it (gdn_triton.py lines 203-214).
        return chunk.chunk_gated_delta_rule(
            q=q,
            k=k,
            v=v,
            g=g,
            beta=beta,
            initial_state=state,
            cu_seqlens=starts,
            head_first=False,
            use_qk_l2norm_in_kernel=True,
            initial_state_indices=slots,
            inplace_update=True,
        )

    def past_l2norm() -> object:
        return chunk.chunk_gated_delta_rule_fwd(
            q=q,
            k=k,
            v=v,
            g=g,
            beta=beta,
            scale=_KEY**-0.5,
            initial_state=state,
            initial_state_indices=slots,
            cu_seqlens=starts,
            chunk_indices=chunk.prepare_chunk_indices(starts, chunk.CHUNK_SIZE),
        )

    return [
        _outcome("chunk_gated_delta_rule, as TritonGDNKernel.extend calls it", extend),
        _outcome("chunk_gated_delta_rule_fwd, past the l2norm", past_l2norm),
    ]


def _compiled() -> list[tuple[str, bool]]:
    import triton  # noqa: PLC0415
    from triton.backends.compiler import GPUTarget  # noqa: PLC0415
    from triton.compiler import ASTSource  # noqa: PLC0415

    chunk_rule()
    l2norm = sys.modules["sglang.kernels.ops.attention.fla.l2norm"]
    signature = {"x": "*bf16", "y": "*bf16", "eps": "fp32", "T": "i32"}
    constants = {"D": _KEY, "BT": 16, "BD": _KEY}
    source = ASTSource(
        fn=l2norm.l2norm_fwd_kernel,
        signature=signature | dict.fromkeys(constants, "constexpr"),
        constexprs=constants,
    )

    def compile_it() -> object:
        return triton.compile(source, target=GPUTarget(*_TARGET))

    # A compilation error's text is the kernel's source up to the line, then the message.
    label = "l2norm_fwd_kernel, compiled by Triton for sm_90"
    return [_outcome(label, compile_it, last_line=True)]


def main(argv: list[str] | None = None) -> int:
    """Run SGLang's extend chunk rule; a line naming the Triton, one per run, 1 if any fails."""
    parser = argparse.ArgumentParser(
        prog="python -m adapters.engines.sglang.extend",
        description="Run SGLang's extend chunk rule under a Triton (module docstring).",
    )
    parser.add_argument(
        "--venv-triton",
        action="store_true",
        help="run it under the venv's own Triton (3.9.0), not SGLang's (3.8.0)",
    )
    parser.add_argument(
        "--compiled",
        action="store_true",
        help="compile SGLang's l2norm kernel for a CUDA target (no GPU needed) instead,"
        " with the venv's own Triton",
    )
    arguments = parser.parse_args(argv)
    compiled = arguments.compiled
    if not (compiled or arguments.venv_triton):
        try:
            use_sglang_triton()
        except KernelsVenvError as error:
            sys.stderr.write(f"adapters.engines.sglang.extend: {error}\n")
            return 1
    kernels.prepare(kernels.Device.CUDA if compiled else kernels.Device.CPU)
    import triton  # noqa: PLC0415 - after the path is chosen

    outcomes = _compiled() if compiled else _interpreted()
    lines = [f"Triton {triton.__version__}", *(line for line, _ in outcomes)]
    sys.stdout.write("".join(line + "\n" for line in lines))
    return 0 if all(ran for _, ran in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
