# SPDX-License-Identifier: MIT OR Apache-2.0
"""SGLang's engine adapter: ``python -m adapters.engines.sglang`` (docs/engines.md).

- ``load.py``: the wheel (``WHEEL``: SGLang's release and the kernel files
  the adapter imports) and the loader of its kernels;
- ``adapter.py``: ``replay`` through GDN ReplaySSM's kernels, ``replay_batch``
  through ``batch.py``, and ``ADAPTER``, the engine's row in ``registry.py``;
- ``batch.py``: SGLang's own pool, verify and commit over a batch;
- ``__main__.py``: the command.
"""

from __future__ import annotations

from .adapter import ADAPTER

__all__ = ["ADAPTER"]
