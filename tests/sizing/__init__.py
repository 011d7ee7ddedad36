# SPDX-License-Identifier: MIT OR Apache-2.0
"""Unit tests of spec/sizing/, one file per module, and the pinned figures of each engine."""
