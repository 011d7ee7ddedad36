# SPDX-License-Identifier: MIT OR Apache-2.0
"""An executable model of replay rollback (the replay profile; SPEC.md RB-REPLAY-*).

The runtime module (seed ``000_fd8074ae8876e187.txt``) describes replay mode
but does not implement it. This subpackage models what its ring must hold:

- :mod:`ssm_rollback_spec.replay_rows`: the row and ring byte arithmetic, standard
  library only, on the contract's floor beside this subpackage (the sizing
  views use it too);
- :mod:`ssm_rollback_spec.replay.layer`: a small reference Gated DeltaNet layer in five
  dtype pipelines, transformers' and the engines' (numpy);
- :mod:`ssm_rollback_spec.replay.paths`: the two rollback paths, snapshot and replay (numpy);
- :mod:`ssm_rollback_spec.replay.rounds`: a decode of many verify rounds, the
  ring's whole lifecycle (numpy; RB-REPLAY-6 to RB-REPLAY-9);
- :mod:`ssm_rollback_spec.replay.designs`: the five replay designs, a module
  each, SGLang's GDN ReplaySSM as it runs among them (numpy; RB-REPLAY-7 to
  RB-REPLAY-9, RB-REPLAY-11), and :mod:`ssm_rollback_spec.replay.decoders`,
  each design's reference decoder;
- :mod:`ssm_rollback_spec.replay.batch`: many sequences verified together on a pool of
  slots, the bookkeeping an engine keeps around the arithmetic (numpy; RB-REPLAY-12);
- :mod:`ssm_rollback_spec.corpus.replay_cases`: the deterministic generator of
  ``vectors/replay/`` (numpy).

Every module of this subpackage needs the ``replay`` extra (numpy). Nothing
in the 1.0.0 contract imports it.
"""

from __future__ import annotations

__all__: list[str] = []
