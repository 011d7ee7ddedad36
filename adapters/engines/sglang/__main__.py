# SPDX-License-Identifier: MIT OR Apache-2.0
"""``python -m adapters.engines.sglang``: serve SGLang's kernels over the adapter protocol."""

from __future__ import annotations

import sys

from ..serve import main
from .adapter import ADAPTER

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main(ADAPTER))
