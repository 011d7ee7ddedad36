# SPDX-License-Identifier: MIT OR Apache-2.0
"""The e2e driver's patches, made in every process of a served vLLM: ``SSM_E2E_PATCHES``.

vLLM's OpenAI server runs its engine core and its worker in processes of
their own, started by spawning, so a change made in the server's process
alone would not reach the worker that runs the GDN kernels. tests/e2e/install.sh
puts this module in the e2e venv with a ``.pth`` line that imports it at every
interpreter's start. Where ``SSM_E2E_PATCHES`` names patches (comma
separated, of the driver's ``PATCHES``), it waits, at no cost, until the
process imports ``vllm``; once vLLM's package has run, it loads
tests/e2e/driver.py from ``SSM_E2E_DRIVER`` and makes them, before any of
vLLM's engine code runs. Elsewhere it does nothing and imports nothing.

It waits because most processes of a served vLLM never import it: the
compiler workers and library loaders torch's inductor starts on the first
request (one ``python -c`` each), and multiprocessing's resource tracker.
Made at each interpreter's start, the patches imported vLLM in every one of
them, which held each served vLLM's first request for about fifty seconds
on two cores (a hundred where no bytecode is kept), against about five.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

__all__: list[str] = []

_NAMES = os.environ.get("SSM_E2E_PATCHES", "")
_DRIVER = os.environ.get("SSM_E2E_DRIVER", "")


def _make_patches() -> None:
    # torchvision's import without its CUDA extension first (torchvision_ops.py), as vLLM needs it.
    importlib.import_module("ssm_e2e_torchvision_ops")
    spec = importlib.util.spec_from_file_location("ssm_e2e_driver", _DRIVER)
    if spec is None or spec.loader is None:
        message = f"SSM_E2E_DRIVER={_DRIVER}: not a Python file"
        raise ImportError(message)
    driver = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(driver)
    driver._patch(_NAMES.split(","))  # noqa: SLF001 - the driver's own patches, by name


class _AfterVllm(importlib.abc.MetaPathFinder):
    """Finds ``vllm`` as the path finder does, and makes the patches once its package has run."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        if fullname != "vllm":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None:
            return spec
        run_package = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run_package(module)
            _make_patches()

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if _NAMES and _DRIVER:
    sys.meta_path.insert(0, _AfterVllm())
