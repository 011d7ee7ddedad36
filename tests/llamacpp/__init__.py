# SPDX-License-Identifier: MIT OR Apache-2.0
"""The llamacpp tier: llama.cpp built from its released source, its rollback through llama.h."""
