# SPDX-License-Identifier: MIT OR Apache-2.0
"""What both planner scripts share: placeholder packages and the loop over the cases.

``vllm_planner.py`` and ``sglang_planner.py`` run as scripts in the planners
venv, where this folder is ``sys.path[0]``, so they import this module as
``driver``; mypy reads it as ``tests.planners.driver``. It imports nothing
outside the standard library, so it loads in either venv.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import json
import sys
import tempfile
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["install_placeholders", "plan_cases"]

#: The torchvision version the placeholder package reports: transformers reads it
#: from the package metadata before it imports the Qwen3.5 processors.
_TORCHVISION_VERSION = "0.28.0"


class _PlaceholderMeta(type):
    def __getattr__(cls, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        return cls


class _Placeholder(metaclass=_PlaceholderMeta):
    """Any attribute of a placeholder module: a class that is never called here."""


class _PlaceholderModule(types.ModuleType):
    def __getattr__(self, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Placeholder


class _PlaceholderFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the placeholder packages and their submodules."""

    def __init__(self, packages: frozenset[str]) -> None:
        self._packages = packages

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        del path, target
        if fullname.split(".", maxsplit=1)[0] in self._packages:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _PlaceholderModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        del module


def install_placeholders(*packages: str) -> None:
    """Import each of ``packages`` and its submodules as modules of placeholders.

    They are found before any installed package of the name. ``torchvision``,
    when named, also gets package metadata for its version check.
    """
    sys.meta_path.insert(0, _PlaceholderFinder(frozenset(packages)))
    if "torchvision" in packages:
        metadata = Path(tempfile.mkdtemp()) / f"torchvision-{_TORCHVISION_VERSION}.dist-info"
        metadata.mkdir()
        (metadata / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: torchvision\nVersion: {_TORCHVISION_VERSION}\n",
            encoding="utf-8",
        )
        sys.path.append(str(metadata.parent))


def plan_cases(
    arguments: list[str],
    stand_ins: Callable[[], None],
    plan: Callable[[dict[str, Any]], dict[str, Any]],
) -> int:
    """Plan every case in the JSON file ``arguments[0]``; one JSON line each on stdout.

    ``stand_ins`` runs once, before the first case.
    """
    cases = json.loads(Path(arguments[0]).read_text(encoding="utf-8"))
    stand_ins()
    for case in cases:
        # The engines log to stdout; only the figures go there from here.
        with contextlib.redirect_stdout(sys.stderr):
            figures = plan(case)
        sys.stdout.write(json.dumps(figures) + "\n")
        sys.stdout.flush()
    return 0
