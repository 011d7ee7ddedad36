# SPDX-License-Identifier: MIT OR Apache-2.0
"""Every replay test (repository only; RB-REPLAY-*, draft): model, self-test, operations."""
