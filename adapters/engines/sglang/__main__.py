# SPDX-License-Identifier: MIT OR Apache-2.0
"""``python -m adapters.engines.sglang``: serve SGLang's kernels over the adapter protocol.

On SGLang's own Triton, 3.8.0, put first on the path before anything imports
Triton (``adapters/engines/environment.py``, "Which Triton each engine runs").
"""

from __future__ import annotations

import sys

from ..environment import KernelsVenvError, use_sglang_triton
from ..serve import main
from .adapter import ADAPTER

__all__: list[str] = []

if __name__ == "__main__":
    try:
        use_sglang_triton()
    except KernelsVenvError as error:
        sys.stderr.write(f"adapters.engines.sglang: {error}\n")
        sys.exit(1)
    sys.exit(main(ADAPTER))
