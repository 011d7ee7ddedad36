# SPDX-License-Identifier: MIT OR Apache-2.0
"""Unit tests of spec/results/ and of the report command that drives it."""
