# SPDX-License-Identifier: MIT OR Apache-2.0
"""The SGLang's GDN ReplaySSM view of ``size`` in one place: its facts, citations, plan and unit.

:mod:`.facts` holds the engine's arithmetic and its cited facts, :mod:`.unit`
puts them behind :class:`ssm_rollback_spec.sizing.unit.EngineUnit`, and
:mod:`ssm_rollback_spec.sizing.registry` lists the unit.
"""

__all__: list[str] = []
