# SPDX-License-Identifier: MIT OR Apache-2.0
"""What every engine's loader shares: the device, and importing a wheel's modules by file path.

Only kernel modules are imported, never an engine's package ``__init__`` (which
would pull in the whole server). Each engine's kernel modules import a few
names from elsewhere in their package; each engine's own loader (``load`` in
``vllm/load.py``, ``sglang/load.py``, ``fla.py``) gives those names as small
stand-in modules made here (:func:`stub`, :func:`package`), the fewest that
let the kernel modules import, and says which.

``--device cpu`` (the default) runs under ``TRITON_INTERPRET=1`` with
:mod:`interpreter_patches` applied, and each launch remembered where
``SSM_ROLLBACK_KERNEL_MEMO`` names a folder (:mod:`kernel_memo`);
``--device cuda`` runs the same kernels compiled, on the GPU, with no patch.
"""

from __future__ import annotations

import ast
import enum
import importlib
import importlib.util
import os
import sys
import types
from pathlib import Path
from typing import Any, Final

from . import kernel_memo

__all__ = [
    "Device",
    "constant",
    "device",
    "load_file",
    "package",
    "prepare",
    "stub",
]


class Device(enum.Enum):
    """Where the kernels run."""

    #: Triton's interpreter on the CPU, patched (interpreter_patches.py).
    CPU = "cpu"
    #: Compiled by Triton, on the first CUDA device.
    CUDA = "cuda"


_PREPARED: Final[list[Device]] = []


def prepare(device: Device, /) -> None:
    """Select the device before Triton is imported: the interpreter and its patches, or CUDA."""
    if _PREPARED:
        return
    if device is Device.CPU:
        os.environ["TRITON_INTERPRET"] = "1"
        from . import interpreter_patches  # noqa: PLC0415 - only after TRITON_INTERPRET is set

        interpreter_patches.apply()
        memo = os.environ.get(kernel_memo.MEMO_VARIABLE)
        if memo:
            from triton.runtime import interpreter  # noqa: PLC0415 - the kernels venv's

            kernel_memo.install(interpreter, Path(memo))
    else:
        os.environ.pop("TRITON_INTERPRET", None)
    _PREPARED.append(device)


def device() -> Device:
    """The device :func:`prepare` selected (the CPU before it is called)."""
    return _PREPARED[0] if _PREPARED else Device.CPU


def stub(name: str, /, **names: object) -> types.ModuleType:
    """Module ``name`` (made empty if it is not imported, with its parents) holding ``names``."""
    module = sys.modules.get(name)
    if module is None:
        module = types.ModuleType(name)
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(stub(parent), child, module)
    module.__dict__.update(names)
    return module


def package(name: str, path: Path, /) -> None:
    """Package ``name`` without running its ``__init__``: its submodules import from ``path``."""
    stub(name).__path__ = [str(path)]


def load_file(name: str, path: Path, /) -> Any:
    """A module of a wheel, imported whole by its file path, as ``name``.

    Raises:
        ImportError: the file cannot be imported.
    """
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def constant(path: Path, name: str, /) -> object:
    """The literal value a module file assigns to ``name``, read without importing it.

    Raises:
        ImportError: the file assigns no literal to ``name``.
    """
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == name for target in node.targets
        ):
            return ast.literal_eval(node.value)
    raise ImportError(f"{path} does not define {name}")
