# SPDX-License-Identifier: MIT OR Apache-2.0
"""Adapters that put real implementations behind the adapter protocol (docs/protocol.md).

Only ``adapters.engines`` is a Python package (``python -m adapters.engines.NAME``
from the repository root, docs/engines.md); ``rust/``, ``c-racy/`` and
``llama-cpp/`` are programs built or run by path. None of this is in the wheel.
"""

from __future__ import annotations

__all__: list[str] = []
