# SPDX-License-Identifier: MIT OR Apache-2.0
"""The shipped replay corpus, read and checked once a test process.

Three test modules build their parameters from it while they are collected,
and every worker collects all three: reading its 8 MB once saves a second of
each worker's start.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from ssm_rollback_spec.corpus.replay_run import load_replay_cases
from ssm_rollback_spec.tools.shipped import replay_corpus_directory

if TYPE_CHECKING:
    from ssm_rollback_spec.corpus.replay_run import ReplayCase

__all__ = ["shipped_replay_cases"]


@functools.cache
def shipped_replay_cases() -> tuple[ReplayCase, ...]:
    """Every state and refusal case of ``vectors/replay``; callers copy a request to change it."""
    return tuple(load_replay_cases(replay_corpus_directory()))
