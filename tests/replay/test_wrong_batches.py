# SPDX-License-Identifier: MIT OR Apache-2.0
"""The batch property's and the batch vectors' self-test: every wrong bookkeeping is rejected.

The reference pool passes both in ``tests/replay/test_batch.py``.
"""

from __future__ import annotations

import pytest

from ssm_rollback_spec.corpus.replay_format import batch_case_states
from tests.fakes.wrong_batch import WRONG_BATCHES
from tests.replay.batch_machine import run_batch_machine
from tests.replay.test_batch import batch_cases

#: The wrong bookkeeping engines shipped or could, each of which must have its entry.
_NAMED_BY_THE_ISSUE = {
    "reads_slot_0_for_a_decode_without_drafts",  # vLLM #39273 and #40875
    "takes_the_neighbouring_entry_s_accepted_count",
    "forgets_to_commit_a_full_accept",
    "gathers_the_gates_at_window_indices",  # vLLM #51812
}


def test_every_wrong_bookkeeping_of_the_shipped_bugs_is_in_the_self_test() -> None:
    assert set(WRONG_BATCHES) >= _NAMED_BY_THE_ISSUE


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(WRONG_BATCHES))
def test_every_wrong_bookkeeping_is_rejected_by_the_batch_machine(name: str) -> None:
    with pytest.raises(AssertionError, match=r"after step \d+ of:\n"):
        run_batch_machine(WRONG_BATCHES[name], find_only=True)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(WRONG_BATCHES))
def test_every_wrong_bookkeeping_misses_an_entry_of_the_batch_vectors(name: str) -> None:
    # The committed batches are regression cases a port can run without Hypothesis.
    results = [
        pair for case in batch_cases() for pair in batch_case_states(case, WRONG_BATCHES[name])
    ]
    assert results
    assert not all(reported.equals(expected) for reported, expected in results)
