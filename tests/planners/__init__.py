# SPDX-License-Identifier: MIT OR Apache-2.0
"""The planners tier: the engines' own planners, run on CPU, against ``size``'s figures."""

__all__: list[str] = []
