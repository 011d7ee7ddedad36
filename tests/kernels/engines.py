# SPDX-License-Identifier: MIT OR Apache-2.0
"""The engine adapters as the kernels tier runs them: the registry's rows, and each one's command.

The tier's per-engine checks run over every row of ``adapters/engines/registry.py``,
so a new engine registered there is checked with no test edited. Each adapter
runs as ``python -m adapters.engines.NAME`` from the repository root, in the
kernels venv.
"""

from __future__ import annotations

import shlex
from typing import Final

from adapters.engines.registry import ENGINES

__all__ = ["ENGINES", "argv", "command"]

#: The module every engine adapter is run as, by the registry's name.
_MODULE: Final = "adapters.engines.{}"


def argv(python: str, engine: str, /, *flags: str) -> list[str]:
    """The arguments that run ``engine``'s adapter with ``python``, from the repository root."""
    return [python, "-m", _MODULE.format(engine), *flags]


def command(python: str, engine: str, /, *flags: str) -> str:
    """:func:`argv` as one ``--impl-cmd`` string."""
    return shlex.join(argv(python, engine, *flags))
