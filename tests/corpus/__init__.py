# SPDX-License-Identifier: MIT OR Apache-2.0
"""Unit tests of spec/corpus/, and the committed vectors."""
