# SPDX-License-Identifier: MIT OR Apache-2.0
"""One package per engine that ``size`` compares against (:class:`..engine.EngineUnit`).

:mod:`.module` is this package's engine-neutral layout; :mod:`.vllm`,
:mod:`.sglang`, :mod:`.replayssm` and :mod:`.llamacpp` follow the engines'
releases, each with its arithmetic and cited facts (``facts``) and its unit
(``unit``). :data:`ssm_rollback_spec.sizing.registry.ENGINES` lists them.
"""

__all__: list[str] = []
