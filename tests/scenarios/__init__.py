# SPDX-License-Identifier: MIT OR Apache-2.0
"""Scenarios: the suite as its users meet it, end to end through the command line and the wheel."""
