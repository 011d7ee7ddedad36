# SPDX-License-Identifier: MIT OR Apache-2.0
"""The e2e driver's patches, made in every process of a served vLLM: ``SSM_E2E_PATCHES``.

vLLM's OpenAI server runs its engine core and its worker in processes of
their own, started by spawning, so a change made in the server's process
alone would not reach the worker that runs the GDN kernels. tests/e2e/install.sh
puts this module in the e2e venv with a ``.pth`` line that imports it at every
interpreter's start: where ``SSM_E2E_PATCHES`` names patches (comma
separated, of the driver's ``PATCHES``), it loads tests/e2e/driver.py from
``SSM_E2E_DRIVER`` and makes them, before vLLM's own code runs. Elsewhere it
does nothing and imports nothing.
"""

from __future__ import annotations

import importlib.util
import os

__all__: list[str] = []

_NAMES = os.environ.get("SSM_E2E_PATCHES", "")
_DRIVER = os.environ.get("SSM_E2E_DRIVER", "")
if _NAMES and _DRIVER:
    # torchvision's import without its CUDA extension first (torchvision_ops.py), as vLLM needs it.
    importlib.import_module("ssm_e2e_torchvision_ops")
    _spec = importlib.util.spec_from_file_location("ssm_e2e_driver", _DRIVER)
    if _spec is None or _spec.loader is None:
        message = f"SSM_E2E_DRIVER={_DRIVER}: not a Python file"
        raise ImportError(message)
    _driver = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_driver)
    _driver._patch(_NAMES.split(","))  # noqa: SLF001 - the driver's own patches, by name
