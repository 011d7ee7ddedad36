# SPDX-License-Identifier: MIT OR Apache-2.0
"""The replay designs, one module each: how a slot's ring holds a round (the replay profile).

Each is a :class:`ssm_rollback_spec.replay.rounds.Decoder` on one slot,
through the lifecycle :mod:`ssm_rollback_spec.replay.rounds` describes:

- :mod:`.seed_row`, :class:`.seed_row.SeedRowRing` (a): the seed's row,
  qkvz and g, beta, K - 1 rows; the checkpoint advances to the state before
  every verify.
- :mod:`.minimal_pre_conv`, :class:`.minimal_pre_conv.MinimalRing` (b): the same with z left
  out (RB-REPLAY-5).
- :mod:`.replayssm`, :class:`.replayssm.ReplaySsm` (c): the ReplaySSM idea,
  parameterised: one checkpoint and a ring of L (k, u, g) records, u = beta
  (v - S^T k), L independent of K; rollback moves the cursor, a fold moves
  the committed records into the checkpoint before a window that would not
  fit, and the conv state is rebuilt from a conv window kept apart. Its
  exact folds (FP32 records folded record by record, or the raw inputs
  replayed) are what a ReplaySSM needs for bit identity; no engine's GDN
  path runs them as modelled here.
- :mod:`.post_conv`, :class:`.post_conv.PostConvRing` (d): post-SiLU k and v
  with g and beta, K - 1 rows, and a conv window (RB-REPLAY-4).
- :mod:`.sglang`, :class:`.sglang.SglangGdnReplaySsm` (e): SGLang 0.5.23's
  GDN ReplaySSM as its released code runs it: a circular ring with a moving
  ``cache_base``, records of BF16 high and low parts, u from the chunked UT
  transform, a fold by the closed form after the commit that leaves no room
  for two windows (RB-REPLAY-11).

:func:`ssm_rollback_spec.replay.decoders.reference_decoder` gives each
design's reference decoder.

Sources: the seed ``000_fd8074ae8876e187.txt`` (``rollback.rs``, the replay
mode's checkpoint and K - 1 ring); ReplaySSM (Dao AI Lab with NVIDIA, 2026);
SGLang's PR #28695 (the closed-loop exact fold over raw inputs, which the
0.5.23 wheel enables for KDA models only: ``replayssm_spec_fold`` is set
when ``cache_params.is_kda``, ``sglang/srt/mem_cache/memory_pool.py`` lines
675-677, and ``gdn_backend.py`` lines 632-636 take that path only with it)
and PR #28451 (the copy-into-slot cursor reset); the SGLang 0.5.23 wheel
itself for design (e). Every operation is :mod:`ssm_rollback_spec.replay.portable`'s
or a basic one, so the model's bits are the same on every machine.
"""

__all__: list[str] = []
