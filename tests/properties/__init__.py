# SPDX-License-Identifier: MIT OR Apache-2.0
"""The property suite: every clause of SPEC.md, judged by the model through the harness.

It lives at ``tests/properties`` in the repository and ships in the wheel as
``ssm_rollback_spec.suite``, so its modules import each other relatively and reach the
package by its name, ``spec``.
"""
