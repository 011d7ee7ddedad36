# SPDX-License-Identifier: MIT OR Apache-2.0
"""The e2e tier: vLLM's CPU build served as users serve it (tests/e2e/install.sh)."""

__all__: list[str] = []
