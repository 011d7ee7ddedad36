# SPDX-License-Identifier: MIT OR Apache-2.0
"""The project as a whole: its documents, its layers, the wheel as installed, the mutation gate."""
