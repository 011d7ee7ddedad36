# SPDX-License-Identifier: MIT OR Apache-2.0
"""Design-review sizing: the replay rings, and the state each engine holds instead.

Standard library only. One module per concept: :mod:`.dimensions` (a
config's GDN and attention shapes), :mod:`.dtypes`, :mod:`.rings` (the seed's
replay ring and the minimal ring), one package per engine under
:mod:`.engines` (its facts, citations and plan in ``facts``, its unit in
``unit``) behind one interface
(:mod:`.engine`) listed in :mod:`.registry`, following the releases of
:mod:`ssm_rollback_spec.releases`, :mod:`.views`, which puts them side by side, and
:mod:`.review`, one ``size`` review from a typed request to a typed report, made
from the flags' values by :mod:`.request`, each value read by :mod:`.options`
and :mod:`.units`. The figures are estimates for comparison, not part of the
contract; only the seed's ring sizes come from it (:mod:`ssm_rollback_spec.rollback`).
"""

__all__: list[str] = []
