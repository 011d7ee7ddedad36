# SPDX-License-Identifier: MIT OR Apache-2.0
"""Lets the package index's torchvision import beside torch's CPU build, in the e2e venv alone.

vLLM 0.32.0's ``model_executor/models/qwen3_5.py`` imports ``qwen3_vl`` at
module level (line 88), which imports transformers' Qwen2-VL image processor,
which imports ``torchvision.transforms.v2``. The only torchvision for torch
2.13.0 on the package index is a CUDA build (``0.28.0+cu130``): its ``_C``
extension needs ``libtorch_cuda.so`` and does not load on the CPU build.
torchvision copes with that for every operator but two: its
``_meta_registrations.py`` registers fake kernels for ``torchvision::nms`` and
``torchvision::qnms`` unconditionally, and the import fails with "operator
torchvision::nms does not exist".

tests/e2e/install.sh copies this module into the venv's site-packages with a
``.pth`` line that imports it. It waits, at no cost, until torchvision's
``_meta_registrations`` is imported, and then declares those two operators'
schemas (no kernel), so that import succeeds. A text model served from token
ids calls no torchvision operator; a call would fail, as the extension is not
there.
"""

from __future__ import annotations

import importlib.abc
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

__all__ = ["SCHEMAS"]

#: The two operators torchvision registers fake kernels for without its extension.
SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)
_KEPT: list[Any] = []


class _Declare(importlib.abc.MetaPathFinder):
    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,  # noqa: ARG002 - the finder protocol's
        target: ModuleType | None = None,  # noqa: ARG002 - the finder protocol's
    ) -> ModuleSpec | None:
        if fullname != "torchvision._meta_registrations":
            return None
        sys.meta_path.remove(self)
        torch: Any = importlib.import_module("torch")
        library = torch.library.Library("torchvision", "FRAGMENT")
        for schema in SCHEMAS:
            name = schema.split("(")[0]
            if not hasattr(torch.ops.torchvision, name):
                library.define(schema)
        _KEPT.append(library)
        return None


sys.meta_path.insert(0, _Declare())
