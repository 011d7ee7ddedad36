# SPDX-License-Identifier: MIT OR Apache-2.0
"""One unit per engine that ``size`` compares against (:class:`..engine.SizingEngine`).

:mod:`.module` is this package's engine-neutral layout; :mod:`.vllm`,
:mod:`.sglang` and :mod:`.replayssm` follow the engines' releases, whose
arithmetic and cited facts are in :mod:`ssm_rollback_spec.sizing.vllm`,
:mod:`ssm_rollback_spec.sizing.sglang` and :mod:`ssm_rollback_spec.sizing.replayssm`.
:data:`ssm_rollback_spec.sizing.registry.ENGINES` lists them.
"""

__all__: list[str] = []
