# SPDX-License-Identifier: MIT OR Apache-2.0
"""vLLM's engine adapter: ``python -m adapters.engines.vllm`` (docs/engines.md).

- ``load.py``: the wheel (``WHEEL``: vLLM's release and the files the adapter
  imports) and the loaders of its kernels and of its whole package;
- ``adapter.py``: ``replay`` with the two kernels, ``replay_batch`` through
  ``batch.py``, and ``ADAPTER``, the engine's row in ``registry.py``;
- ``batch.py``: vLLM's own GDN bookkeeping over a batch;
- ``batch_inputs.py``: the batch as the engine takes it, and its options;
- ``runner_code.py``: the V1 runner's own classification of a step's rows,
  compiled from the release's ``gpu_model_runner.py``;
- ``pool.py``: the batch's requests and its slots' blocks;
- ``prefix_cache.py``: vLLM's prefix cache in mode "align";
- ``align_copies.py``: the runner's copies between blocks in mode "align";
- ``stand_ins.py``: the layer and configuration standing in for vLLM's model;
- ``__main__.py``: the command.
"""

from __future__ import annotations

from .adapter import ADAPTER

__all__ = ["ADAPTER"]
