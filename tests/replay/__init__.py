# SPDX-License-Identifier: MIT OR Apache-2.0
"""The replay model's properties (repository-only; RB-REPLAY-*, draft)."""
