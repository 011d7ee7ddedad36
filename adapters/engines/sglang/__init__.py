# SPDX-License-Identifier: MIT OR Apache-2.0
"""SGLang's engine adapter: ``python -m adapters.engines.sglang`` (docs/engines.md).

- ``load.py``: the wheel (``WHEEL``: SGLang's release and the kernel files
  the adapter imports) and the loader of its kernels;
- ``adapter.py``: ``replay`` through GDN ReplaySSM's kernels, ``replay_batch``
  through ``batch.py``, and ``ADAPTER``, the engine's row in ``registry.py``;
- ``batch.py``: SGLang's own pool, verify and commit over a batch;
- ``engine_code.py``: SGLang's definitions the batch runs, loaded once;
- ``wheel_code.py``: the wheel's files unpacked, and definitions compiled from them;
- ``stand_ins.py``: the names and objects standing in for SGLang's server;
- ``shapes.py``: the layer dims, the key heads padded as SGLang's kernels take them;
- ``extend.py``: SGLang's extend chunk rule, on SGLang's Triton and the venv's;
- ``__main__.py``: the command.
"""

from __future__ import annotations

from .adapter import ADAPTER

__all__ = ["ADAPTER"]
