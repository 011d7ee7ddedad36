# SPDX-License-Identifier: MIT OR Apache-2.0
"""Executable specification of the SSM verify-rollback mode.

The contract lives in :mod:`ssm_rollback_spec.rollback` (the implementation) and
:mod:`ssm_rollback_spec.model` (the reference model). ``SPEC.md`` numbers its clauses.
"""

from __future__ import annotations

__all__ = ["SPEC_VERSION", "__version__"]

__version__ = "0.3.0"

#: The version of SPEC.md that this package, its vectors and its protocol implement.
SPEC_VERSION = "1.2.0"
