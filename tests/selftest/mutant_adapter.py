# SPDX-License-Identifier: MIT OR Apache-2.0
"""Serve one mutant over the protocol: ``python -m tests.selftest.mutant_adapter NAME``."""

from __future__ import annotations

import sys

from spec.adapter import main
from tests.selftest.mutants import MUTANTS

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in MUTANTS:
        sys.stderr.write(f"usage: mutant_adapter NAME, NAME one of {sorted(MUTANTS)}\n")
        sys.exit(2)
    sys.exit(main(MUTANTS[sys.argv[1]]))
