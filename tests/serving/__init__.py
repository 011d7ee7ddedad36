# SPDX-License-Identifier: MIT OR Apache-2.0
"""Unit tests of spec/serving/, one file per module."""
