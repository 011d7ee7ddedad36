# SPDX-License-Identifier: MIT OR Apache-2.0
"""Every change this project makes to Triton's CPU interpreter, each with its reason.

The engines' kernels run unchanged from their released wheels. On a machine
without a CUDA device they run under ``TRITON_INTERPRET=1`` (Triton's
interpreter, ``triton/runtime/interpreter.py``), which differs from a compiled
kernel in the six ways below. :func:`apply` makes the six changes, once, before any kernel
runs, and a seventh that changes only how long the interpreter takes; nothing
else in the adapters touches Triton. With ``--device cuda`` none
of this is applied: the kernels compile and run natively (docs/engines.md).

Two releases of Triton run here (``environment.py``): 3.9.0 for vLLM and FLA,
3.8.0 for SGLang, the release its own pins bring. All seven changes apply to
both, alike: the interpreter code each one changes (the masked load and
store, the autotuner's ``prune_configs``, the source rewriter, ``cast_impl``,
``binary_op`` and ``create_dot``, ``GridExecutor``, ``_patch_lang``,
``InterpretedFunction.__call__``) is the
same in the two releases but for arguments the changes pass on as they are
(3.9.0's masked load takes one ``cache_policy`` where 3.8.0's takes a cache
modifier and an eviction policy). Line numbers below are 3.9.0's.

1. Masks. A mask built as ``scalar_i1 & block_i1`` comes out as an int64
   array, and the interpreter's masked load then fails with "mask has
   unsupported dtype" (vLLM 0.33.0, ``causal_conv1d.py`` line 789, the
   ``(conv_states_input_coord < num_cache_lines) & ...`` mask). A compiled
   kernel treats any such mask as i1. The change: cast the mask of every
   masked load and store to bool.
2. The autotuner. With more than one config, Triton's autotuner benchmarks
   them, which asks for a GPU driver: "0 active drivers ([]). There should
   only be one." (FLA 0.6.0, the chunk rule's kernels). The change: keep the
   first config that survives the kernel's own pruning, so no benchmark runs.
   Which config a kernel runs changes tile sizes, not its arithmetic per
   element, except for the order of a reduction.
3. Loop variables. In a compiled kernel the variable of ``for i in
   range(n)`` is a tensor; under the interpreter it is a Python int, so
   ``i.to(tl.int64)`` fails (FLA 0.6.0, ``ops/common/chunk_delta_h.py`` line
   176). The change: the interpreter's source rewriter binds the variable to
   a tensor at the top of the loop body, as it already does for assignments.
4. BF16 arithmetic. The interpreter holds BF16 values as 16-bit integers:
   it multiplies and adds their bit patterns as integers, and it casts
   float32 to BF16 by truncation. A GPU computes a correctly rounded BF16
   result and rounds float32 to BF16 to nearest, ties to even (PTX
   ``cvt.rn.bf16.f32``). The change: a BF16 operation is computed in float32
   from the exact BF16 values and rounded to BF16 to nearest even, which is
   the correctly rounded BF16 result for +, -, *, / (float32 has 24 bits, at
   least 2 * 8 + 2, so rounding twice loses nothing); a float32 to BF16 cast
   rounds to nearest even; a dot of BF16 operands multiplies their exact
   values and accumulates in float32, as a tensor core does.
5. A grid that rebinds an argument. Triton's compiled launcher calls a
   callable grid with the bound arguments and then launches the kernel with
   those same arguments (``triton/runtime/jit.py`` lines 778-787), so a grid
   that assigns one (vLLM 0.33.0, ``causal_conv1d.py`` lines 560-565:
   ``META["batch_ptr"] = nums_dict[...]["batch_ptr"]``, in ``causal_conv1d_fn``,
   the prefill conv) hands the kernel the new tensor. The interpreter calls
   the grid after it has turned the arguments into pointers, so the kernel
   gets the new one as a raw torch tensor and fails ("'torch.dtype' object
   has no attribute 'is_ptr'"). The change: a tensor the grid put in the
   arguments is turned into a pointer as the others were.
6. A language function under another name. The interpreter swaps the
   functions of ``triton.language`` for its own while a kernel runs, by their
   names in ``tl`` and ``tl.math``; a kernel that calls one through a name of
   its module's (vLLM 0.33.0, ``third_party/flash_linear_attention/ops/op.py``
   line 22: ``exp = tl.exp``, called in ``chunk_scaled_dot_kkt.py`` line 106)
   calls the original, which fails outside a compiled kernel ("Did you forget
   to add @triton.jit ?"). A compiled kernel resolves both names to the same
   function. The change: while a kernel runs, such a name in its module is
   the interpreter's function too.
7. A device function's call, swapped once a kernel. The interpreter swaps
   the language's functions when a kernel starts and swaps them back when
   it ends, and it swaps them again, never back, at every call of a
   ``@triton.jit`` function from a kernel (``InterpretedFunction.__call__``):
   a search of every member of ``tl``, ``tl.core``, ``tl.math`` and
   ``tl.tensor`` each time, which found nothing left to swap once the
   kernel's own swap or an earlier call's had covered the modules this
   function sees. SGLang's kernels called ``tl.sum``, ``tl.zeros`` and their
   own helpers 6,465 times over one ``check`` property's 22 requests, and
   the search took a quarter of its adapter's time (BENCHMARKS.md). The
   change: while a kernel runs, a device function whose modules (``tl``,
   ``tl.core``) were swapped since the kernel started is called without the
   search; what the search would have done to them is already done, and
   nothing swaps back until the kernel ends. It changes no value a kernel
   computes.
8. Not here: vLLM swaps its Triton conv for a torch CPU path when
   ``current_platform.is_cpu()`` is true (``causal_conv1d.py`` lines
   1131-1138). That is a stub's answer, not an interpreter change: the
   adapters' stand-in for ``vllm.platforms`` says it is not a CPU
   (``kernels.py``).
9. Not here either: block pointers. Triton 3.9.0 removed ``tl.make_block_ptr``
   and ``tl.advance`` from the language, for compiled kernels as well
   ("Block pointers have been removed in favor of the tensor descriptor
   API", ``triton/language/core.py`` lines 2519-2538), and ``tl.load`` and
   ``tl.store`` no longer take ``boundary_check``. The interpreter refusing
   them is what a compiled kernel does, so there is no difference to
   change. SGLang 0.5.23's FLA chunk rule, the kernel of its extend, uses
   them (as vLLM's did before 0.32.0), and runs on Triton 3.8.0, which
   still has them and which SGLang's own pins bring: its adapter runs there
   (``sglang/extend.py`` runs the rule under both releases).

What stays out of reach on a CPU (docs/engines.md, "What the CPU run cannot
show"): TF32 dots (``input_precision="tf32"`` runs as an IEEE float32 dot),
inline PTX (FLA's softplus on NVIDIA uses ``ex2.approx``/``lg2.approx``),
the GPU's own exp and log (the interpreter uses numpy's), and CUDA-only
operations.
"""

from __future__ import annotations

import ast
from typing import Any, Final

import numpy as np

__all__ = ["PATCHES", "apply"]

#: What :func:`apply` changes, one line each, in the order of the docstring.
PATCHES: Final = (
    "masks of masked loads and stores cast to bool",
    "the autotuner keeps its first config",
    "range() loop variables bound as tensors",
    "BF16 arithmetic, casts and dots correctly rounded",
    "tensors a grid puts in the arguments turned into pointers",
    "language functions under a module's own names swapped too",
    "a device function's call swaps the language once a kernel, not at every call",
)

_applied: list[bool] = []


def _to_bf16_bits(values: Any) -> Any:
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def _from_bf16_bits(values: Any) -> Any:
    return (np.asarray(values, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _patch_masks(interp: Any) -> None:
    load, store = (
        interp.InterpreterBuilder.create_masked_load,
        interp.InterpreterBuilder.create_masked_store,
    )

    def as_bool(mask: Any) -> Any:
        return interp.TensorHandle(mask.data.astype(np.bool_), mask.dtype)

    def masked_load(self: Any, ptrs: Any, mask: Any, other: Any, *rest: Any) -> Any:
        return load(self, ptrs, as_bool(mask), other, *rest)

    def masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *rest: Any) -> Any:
        return store(self, ptrs, value, as_bool(mask), *rest)

    interp.InterpreterBuilder.create_masked_load = masked_load
    interp.InterpreterBuilder.create_masked_store = masked_store


def _patch_autotuner() -> None:
    from triton.runtime.autotuner import Autotuner  # noqa: PLC0415 - triton is the kernels venv's

    prune = Autotuner.prune_configs

    def first_config(self: Any, kwargs: Any) -> Any:
        return prune(self, kwargs)[:1]

    Autotuner.prune_configs = first_config


def _patch_loop_variables(interp: Any) -> None:
    def visit_for(self: Any, node: ast.For) -> ast.For:
        node = self.generic_visit(node)
        loop = node.iter
        if (
            isinstance(node.target, ast.Name)
            and isinstance(loop, ast.Call)
            and isinstance(loop.func, ast.Name)
            and loop.func.id == "range"
        ):
            name = node.target.id
            rebind = ast.Assign(
                targets=[ast.Name(id=name, ctx=ast.Store())],
                value=ast.Name(id=name, ctx=ast.Load()),
            )
            node.body.insert(0, self.visit_Assign(rebind))
        return node

    interp.ASTTransformer.visit_For = visit_for


def _patch_bf16(interp: Any, tl: Any) -> None:
    builder = interp.InterpreterBuilder
    cast, binary, dot = builder.cast_impl, builder.binary_op, builder.create_dot

    def cast_impl(self: Any, src: Any, dst_type: Any) -> Any:
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            return interp.TensorHandle(_to_bf16_bits(src.data), dst_type.scalar)
        return cast(self, src, dst_type)

    def binary_op(self: Any, lhs: Any, rhs: Any, op: Any) -> Any:
        if lhs.dtype.scalar == tl.bfloat16 and rhs.dtype.scalar == tl.bfloat16:
            result = op(_from_bf16_bits(lhs.data), _from_bf16_bits(rhs.data))
            if result.dtype == np.float32:
                return interp.TensorHandle(_to_bf16_bits(result), tl.bfloat16)
            return interp.TensorHandle(result, lhs.dtype.scalar)
        return binary(self, lhs, rhs, op)

    def create_dot(self: Any, a: Any, b: Any, d: Any, *rest: Any) -> Any:
        def exact(operand: Any) -> Any:
            if operand.dtype.scalar != tl.bfloat16:
                return operand
            return interp.TensorHandle(_from_bf16_bits(operand.data), tl.float32)

        return dot(self, exact(a), exact(b), d, *rest)

    builder.cast_impl = cast_impl
    builder.binary_op = binary_op
    builder.create_dot = create_dot


def _patch_grid(interp: Any) -> None:
    import torch  # noqa: PLC0415 - the kernels venv's

    init = interp.GridExecutor.__init__

    def with_grid(self: Any, fn: Any, arg_names: Any, grid: Any, *rest: Any) -> None:
        if callable(grid):
            computed = grid

            def grid(args: dict[str, Any]) -> Any:
                size = computed(args)
                for name, value in args.items():
                    if isinstance(value, torch.Tensor):
                        args[name] = interp._implicit_cvt(value)  # noqa: SLF001
                return size

            # The grid as the kernel gave it, for kernel_memo.py's key.
            grid.computed = computed
        init(self, fn, arg_names, grid, *rest)

    interp.GridExecutor.__init__ = with_grid


def _patch_swaps(interp: Any) -> None:
    """Changes 6 and 7, both to ``_patch_lang``: aliases swapped, device calls swapped once."""
    import sys  # noqa: PLC0415

    tl = interp.tl
    patch_lang = interp._patch_lang  # noqa: SLF001
    device_call = interp.InterpretedFunction.__call__
    #: The language modules swapped since the running kernel started (one at most runs).
    running: list[set[int]] = []
    #: The device functions being called, innermost last.
    called: list[Any] = []

    def languages(fn: Any, /) -> frozenset[int]:
        return frozenset(
            id(value) for value in fn.__globals__.values() if value is tl or value is tl.core
        )

    def with_aliases(fn: Any) -> Any:
        # A builtin keeps its own name (``exp``) whatever name a module gives it;
        # the patched function is the one of that name in tl.math or tl.
        aliases = {
            name: package
            for name, value in fn.__globals__.items()
            if tl.core.is_builtin(value)
            for package in (tl.math, tl)
            if getattr(package, getattr(value, "__name__", ""), None) is not None
        }
        if called and called[-1] is fn and running and languages(fn) <= running[-1]:
            # 7: a module swapped once stays swapped until the kernel ends, so the
            # device function's own swap would find nothing left to change.
            scope = interp._LangPatchScope()  # noqa: SLF001
        else:
            scope = patch_lang(fn)
            if called and running:
                running[-1] |= languages(fn)
            elif not called:
                running.append(set(languages(fn)))
                restore = scope.restore

                def restore_and_stop() -> None:
                    running.pop()
                    restore()

                scope.restore = restore_and_stop
        module = sys.modules[fn.__module__]
        for name, package in aliases.items():
            scope.set_attr(module, name, getattr(package, fn.__globals__[name].__name__))
        return scope

    def calling(self: Any, *args: Any, **kwargs: Any) -> Any:
        called.append(self.fn)
        try:
            return device_call(self, *args, **kwargs)
        finally:
            called.pop()

    interp._patch_lang = with_aliases  # noqa: SLF001
    interp.InterpretedFunction.__call__ = calling


def apply() -> None:
    """Make the interpreter changes, once (see the module's docstring for each reason)."""
    if _applied:
        return
    import triton.language as tl  # noqa: PLC0415 - triton is the kernels venv's
    from triton.runtime import interpreter as interp  # noqa: PLC0415

    _patch_masks(interp)
    _patch_autotuner()
    _patch_loop_variables(interp)
    _patch_bf16(interp, tl)
    _patch_grid(interp)
    _patch_swaps(interp)
    _applied.append(True)
