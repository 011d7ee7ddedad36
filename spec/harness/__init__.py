# SPDX-License-Identifier: MIT OR Apache-2.0
"""The harness: the adapter protocol, the drivers that reach an implementation, and the oracle.

It knows the contract and how to reach an implementation of it: in-process
(any Python module with the contract's names) or over the protocol (any
adapter command). Standard library only, except :mod:`ssm_rollback_spec.harness.pytest_plugin`,
which drives the property suite and needs the ``check`` extra.
"""

from __future__ import annotations

__all__: list[str] = []
