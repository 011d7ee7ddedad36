# SPDX-License-Identifier: MIT OR Apache-2.0
"""SGLang's code read from its wheel's files: unpacked once, and definitions compiled from them.

SGLang's classes and functions are not imported as modules (each pulls in
the whole server): :func:`extract` reads a file of the wheel, parses it, and
compiles the definitions named with the file's name and line numbers, run
with the names given (``stand_ins.py``); nothing of SGLang's is copied into
this repository. :func:`sources` is the folder of the files the batch reads
(``batch.py``, ``engine_code.py``).
"""

from __future__ import annotations
import __future__

import ast
import sys
import types
import zipfile
from typing import TYPE_CHECKING, Any, Final

from .. import wheels
from .load import WHEEL

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

__all__ = ["extract", "sources", "unpacked"]

#: The wheel's files the batch reads, beyond the kernel modules load.py loads.
_FILES: Final = (
    "sglang/srt/mem_cache/allocator/mamba.py",
    "sglang/srt/mem_cache/memory_pool.py",
    "sglang/srt/speculative/spec_utils.py",
    "sglang/srt/layers/attention/hybrid_linear_attn_backend.py",
    "sglang/srt/layers/attention/linear/gdn_backend.py",
    "sglang/srt/layers/attention/linear/utils.py",
    "sglang/srt/utils/common.py",
    "sglang/kernels/ops/mamba/mamba_state_scatter_triton.py",
    "sglang/kernels/ops/attention/linear/fused_sigmoid_gating_recurrent.py",
)


def sources() -> Path:
    """The folder holding the wheel's bookkeeping files, unpacked once beside its kernels."""
    return unpacked("bookkeeping", _FILES)


def unpacked(part: str, names: tuple[str, ...], /) -> Path:
    """The folder holding the wheel's files ``names`` (a name ending in ``/``: all under it).

    Unpacked once, beside the kernels, in a folder named by ``part``.

    Raises:
        wheels.EngineFetchError: the wheel is not in the cache after fetching it.
    """
    engine = WHEEL
    wheels.fetch(engine)  # the wheel, downloaded and its licence checked
    root = wheels.cache_root()
    folder = root / "unpacked" / f"{engine.distribution}-{engine.version}-{part}"
    done = folder / ".complete"
    if not done.exists():
        found = sorted((root / "wheels").glob(f"{engine.distribution}-{engine.version}-*.whl"))
        if not found:
            raise wheels.EngineFetchError(f"no {engine.requirement} wheel in {root / 'wheels'}")
        with zipfile.ZipFile(found[0]) as archive:
            members = [
                member
                for member in archive.namelist()
                if member in names
                or any(name.endswith("/") and member.startswith(name) for name in names)
            ]
            archive.extractall(folder, members=members)
        done.write_text(found[0].name + "\n", encoding="utf-8")
    return folder


def extract(
    name: str, path: Path, wanted: Mapping[str, tuple[str, ...] | None], names: dict[str, Any], /
) -> Any:
    """The definitions ``wanted`` from ``path``, compiled with its name and lines, run in ``names``.

    A class named with a tuple keeps only those methods (and no bases);
    with None, the whole class.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    body: list[ast.stmt] = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.ClassDef) or node.name not in wanted:
            continue
        methods = wanted[node.name]
        if isinstance(node, ast.ClassDef) and methods is not None:
            node.bases, node.keywords, node.decorator_list = [], [], []
            node.body = [
                item
                for item in node.body
                if isinstance(item, ast.FunctionDef) and item.name in methods
            ]
        body.append(node)
    missing = set(wanted) - {
        node.name for node in body if isinstance(node, ast.FunctionDef | ast.ClassDef)
    }
    if missing:
        raise ImportError(f"{path} does not define {', '.join(sorted(missing))}")
    flags = __future__.annotations.compiler_flag
    code = compile(
        ast.Module(body=body, type_ignores=[]), str(path), "exec", flags=flags, dont_inherit=True
    )
    module = types.ModuleType(name)
    module.__file__ = str(path)
    module.__dict__.update(names)
    sys.modules[name] = module
    exec(code, module.__dict__)  # noqa: S102 - the wheel's own definitions, parsed above
    return module
