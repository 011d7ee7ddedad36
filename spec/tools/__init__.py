# SPDX-License-Identifier: MIT OR Apache-2.0
"""The tools: the ``ssm-rollback-spec`` command, one module per subcommand.

``check`` runs the property suite, ``vectors`` generates and runs the
language-neutral corpus, ``size`` sizes the replay ring for a design review.
Each calls down into the harness and the contract; nothing calls up into them.
"""

from __future__ import annotations

__all__: list[str] = []
