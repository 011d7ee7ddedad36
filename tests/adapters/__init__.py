# SPDX-License-Identifier: MIT OR Apache-2.0
"""The shipped adapters: Python and Rust through the suite, the engine adapters' protocol."""
