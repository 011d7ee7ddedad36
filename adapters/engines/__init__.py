# SPDX-License-Identifier: MIT OR Apache-2.0
"""The engines' own kernels behind the adapter protocol's ``replay`` (docs/engines.md).

Run from the repository root, in the kernels venv (``environment.py``)::

    python -m adapters.engines.vllm     # or sglang, fla; --help for the flags

One module (or one small package) per engine, on a shared base:

- ``serve.py``: the protocol loop, ``describe``, the command line and the
  row type, :class:`~.serve.EngineAdapter`;
- ``wheels.py``: each engine's released wheel, fetched, cached, unpacked in
  part and its licence read (``python -m adapters.engines.wheels``);
- ``kernels.py``: the device, and importing a wheel's modules by file path
  with stand-ins (``interpreter_patches.py`` on the CPU);
- ``environment.py``: the kernels tier's venv
  (``python -m adapters.engines.environment``);
- ``kernel_memo.py``: each interpreted launch remembered by what it reads,
  where ``SSM_ROLLBACK_KERNEL_MEMO`` names a folder (the tiers set it);
- ``forkserver.py``: adapters started as forks of a process that has
  imported torch (the tiers run them so);
- ``registry.py``: the table of engines, one row (an ``ADAPTER``) each.

The engines: ``vllm/`` and ``sglang/`` (each ``load.py``, ``adapter.py``,
``batch.py`` and the modules its batch runs on, listed in its ``__init__.py``)
and ``fla.py``. Each declares its ``WHEEL`` (its release, from
``spec/releases.py``, and the files it imports), its ``load`` and its
``ADAPTER``; a new engine is one more such module and its row in the registry
(CONTRIBUTING.md, "Adding an engine").
"""

from __future__ import annotations

__all__: list[str] = []
