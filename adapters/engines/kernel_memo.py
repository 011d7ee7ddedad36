# SPDX-License-Identifier: MIT OR Apache-2.0
"""A kernel launch under Triton's interpreter, remembered by everything it reads.

The kernels tier and its engine mutants run the same engine kernels on the
same inputs many times over: each mutant of the engines' bookkeeping runs
every shipped batch again, and most of its launches are the ones the
unchanged engine made. Under ``TRITON_INTERPRET=1`` each launch costs the
interpreter's time (most of a run's, after its imports). With
``SSM_ROLLBACK_KERNEL_MEMO`` naming a folder, a launch is looked up there
first, and only run where it was never run before; its run is stored. The
tiers set it (``tests/kernels/conftest.py``); an adapter run without it runs
every launch.

What a launch is keyed by (:func:`install`), so that two launches with one key
compute the same bytes:

- the kernel: its module, its name, its module file's bytes, and, through
  every global name its code reads, the module files of the functions it
  calls and the values of the plain constants it reads;
- every argument: a tensor by its dtype, shape, strides, offset and the bytes
  of its whole storage (a kernel reads through pointers, so anywhere in it),
  and which storage it shares with another argument; a number, string,
  ``None``, ``torch.dtype`` or tuple by its value;
- the grid, and any tensor a grid puts in the arguments (vLLM's prefill conv
  does: ``interpreter_patches.py``, change 5), as the compiled launcher calls
  it, on the arguments as given;
- the interpreter: Triton's, numpy's and torch's releases, and the bytes of
  this file and of ``interpreter_patches.py``, which name the folder's
  subfolder.

A launch with an argument of any other kind is run and not stored, and so is
every launch of a kernel that makes a pointer of an integer
(``tl.pointer_type``, as vLLM's align-mode copies between blocks do in
``vllm/v1/worker/mamba_utils.py``): it reads and writes memory that no
argument holds. What is
stored is, for each storage the launch changed, the span of bytes from its
first change to its last; a hit writes those spans, and so leaves every
storage as the run would have.

Memory that torch hands out uninitialized (``torch.empty``) holds whatever
was there before, and a kernel's output buffer is such memory: keyed by it, no
launch would be met twice. With the memo on, torch fills uninitialized memory
with a known value (NaN, or an integer type's largest), as its deterministic
mode does (``torch.utils.deterministic.fill_uninitialized_memory``). A correct
engine never reads such memory; one that does reads NaN and shows it.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import struct
import sys
from pathlib import Path
from typing import Any, Final

__all__ = ["MEMO_VARIABLE", "install"]

#: The environment variable naming the memo's folder.
MEMO_VARIABLE: Final = "SSM_ROLLBACK_KERNEL_MEMO"

#: One stored span: the storage's index among the launch's, its first byte, its length.
_SPAN: Final = struct.Struct("<QQQ")
#: Modules whose functions a kernel calls that are the interpreter's, keyed by its release.
_INTERPRETER_MODULES: Final = ("triton", "numpy", "torch", "builtins")
_PLAIN: Final = (int, float, bool, str, type(None))
#: What a kernel names to make a pointer of an integer (``x.to(tl.pointer_type(...))``):
#: it then reads and writes memory no argument holds.
_ADDRESS: Final = "pointer_type"


class _UnkeyableError(LookupError):
    """An argument of a kind the memo cannot key; the launch runs unstored."""


def _digest(path: str, /) -> str:
    return hashlib.blake2b(Path(path).read_bytes(), digest_size=16).hexdigest()


def _interpreter_folder(folder: Path, /) -> Path:
    """``folder``'s subfolder for this interpreter: its releases and patches' bytes."""
    import numpy as np  # noqa: PLC0415 - the kernels venv's
    import torch  # noqa: PLC0415
    import triton  # noqa: PLC0415

    here = Path(__file__).parent
    identity = "\n".join(
        (
            triton.__version__,
            np.__version__,
            torch.__version__,
            _digest(str(here / "interpreter_patches.py")),
            _digest(__file__),
        )
    )
    return folder / hashlib.blake2b(identity.encode(), digest_size=8).hexdigest()


def _code_names(code: Any, /) -> set[str]:
    names = set(code.co_names)
    for constant in code.co_consts:
        if inspect.iscode(constant):
            names |= _code_names(constant)
    return names


class _KernelKeys:
    """Each kernel's key: its source files' bytes and the constants it reads, made once."""

    def __init__(self) -> None:
        self._files: dict[str, str] = {}
        self._kernels: dict[Any, str | None] = {}

    def _file(self, module_name: str, /) -> str:
        if module_name not in self._files:
            path = getattr(sys.modules.get(module_name), "__file__", None)
            self._files[module_name] = _digest(path) if path else module_name
        return self._files[module_name]

    def _parts(self, fn: Any, seen: set[Any], /) -> list[str]:
        names = _code_names(fn.__code__)
        if _ADDRESS in names:
            raise _UnkeyableError(f"{fn.__qualname__} makes a pointer of an integer")
        parts = [fn.__module__, fn.__qualname__, self._file(fn.__module__)]
        for name in sorted(names):
            value = fn.__globals__.get(name)
            if isinstance(value, _PLAIN):
                parts.append(f"{name}={value!r}")
                continue
            # A jitted helper keeps its Python function as .fn.
            called = getattr(value, "fn", value)
            module = getattr(called, "__module__", None)
            if (
                module
                and hasattr(called, "__code__")
                and not module.startswith(_INTERPRETER_MODULES)
                and called not in seen
            ):
                seen.add(called)
                parts.extend(self._parts(called, seen))
        return parts

    def __call__(self, fn: Any, /) -> str:
        """``fn``'s part of a launch's key.

        Raises:
            _UnkeyableError: ``fn``, or a function it calls, makes a pointer of an integer.
        """
        if fn not in self._kernels:
            try:
                self._kernels[fn] = repr(self._parts(fn, {fn}))
            except _UnkeyableError:
                self._kernels[fn] = None
        key = self._kernels[fn]
        if key is None:
            raise _UnkeyableError(fn.__qualname__)
        return key


class _Launch:
    """One launch's arguments keyed, with the distinct storages they point into."""

    def __init__(self, torch: Any, np: Any, /) -> None:
        self._torch, self._np = torch, np
        self.storages: list[Any] = []
        self._pointers: list[int] = []

    def key(self, value: Any, /) -> object:
        """``value``'s part of the key; its storage, if a tensor, joins :attr:`storages`.

        Raises:
            _UnkeyableError: a value of another kind.
        """
        if isinstance(value, self._torch.Tensor):
            storage = value.untyped_storage()
            pointer = storage.data_ptr()
            if pointer not in self._pointers:
                self._pointers.append(pointer)
                self.storages.append(storage)
            return (
                str(value.dtype),
                tuple(value.shape),
                value.stride(),
                value.storage_offset(),
                self._pointers.index(pointer),
            )
        if isinstance(value, tuple | list):
            return tuple(self.key(item) for item in value)
        if isinstance(value, (*_PLAIN, self._np.generic, self._torch.dtype)):
            return repr(value)
        raise _UnkeyableError(type(value).__name__)

    def views(self) -> list[Any]:
        """Each storage's bytes, as a writable numpy array over the storage itself."""
        return [
            self._torch.empty(0, dtype=self._torch.uint8)
            .set_(storage, 0, (storage.nbytes(),))
            .numpy()
            for storage in self.storages
        ]


def _stored_spans(before: list[Any], after: list[Any], np: Any, /) -> bytes:
    spans = []
    for index, (old, new) in enumerate(zip(before, after, strict=True)):
        changed = np.flatnonzero(old != new)
        if changed.size:
            start, stop = int(changed[0]), int(changed[-1]) + 1
            spans.append(_SPAN.pack(index, start, stop - start) + new[start:stop].tobytes())
    return b"".join(spans)


def _write_spans(stored: bytes, views: list[Any], np: Any, /) -> None:
    at = 0
    while at < len(stored):
        index, start, length = _SPAN.unpack_from(stored, at)
        at += _SPAN.size
        views[index][start : start + length] = np.frombuffer(stored, np.uint8, length, at)
        at += length


def install(interp: Any, folder: Path, /) -> None:
    """Make every launch of Triton's interpreter ``interp`` go through the memo in ``folder``."""
    import numpy as np  # noqa: PLC0415 - the kernels venv's
    import torch  # noqa: PLC0415

    torch.use_deterministic_algorithms(mode=True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    folder = _interpreter_folder(folder)
    kernel_key = _KernelKeys()
    run = interp.GridExecutor.__call__

    def remembered(self: Any, *args: Any, **kwargs: Any) -> None:
        # The interpreter drops keyword arguments the kernel does not take.
        spec = inspect.getfullargspec(self.fn)
        kwargs = {k: v for k, v in kwargs.items() if k in spec.args or k in spec.kwonlyargs}
        launch = _Launch(torch, np)
        try:
            kernel = kernel_key(self.fn)
            bound = inspect.getcallargs(self.fn, *args, **kwargs)
            keyed = {name: launch.key(value) for name, value in bound.items()}
            grid = getattr(self.grid, "computed", self.grid)
            if callable(grid):
                given = dict(bound)
                size = tuple(int(extent) for extent in grid(given))
                for name, value in given.items():
                    if value is not bound.get(name):
                        keyed[f"grid {name}"] = launch.key(value)
            else:
                size = tuple(int(extent) for extent in grid)
        except _UnkeyableError:
            run(self, *args, **kwargs)
            return
        views = launch.views()
        hashed = hashlib.blake2b(digest_size=20)
        hashed.update(repr((kernel, sorted(keyed.items()), size)).encode())
        for view in views:
            hashed.update(view.data)
        key = hashed.hexdigest()
        path = folder / key[:2] / key
        try:
            stored = path.read_bytes()
        except FileNotFoundError:
            before = [view.copy() for view in views]
            run(self, *args, **kwargs)
            stored = _stored_spans(before, views, np)
            path.parent.mkdir(parents=True, exist_ok=True)
            # Written aside and renamed: another process may read it meanwhile.
            partial = path.with_name(f"{key}.{os.getpid()}")
            partial.write_bytes(stored)
            partial.replace(path)
            return
        _write_spans(stored, views, np)

    interp.GridExecutor.__call__ = remembered
