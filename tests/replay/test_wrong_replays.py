# SPDX-License-Identifier: MIT OR Apache-2.0
"""The replay properties' self-test: every deliberately wrong replay is rejected.

The references pass the same factories in ``tests/replay/test_replay_model.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from hypothesis import Phase, settings

from ssm_rollback_spec.corpus.replay_format import decode_case
from tests.fakes.wrong_replay import (
    CONTROLS,
    LIFECYCLE_CONTROLS,
    WRONG_LIFECYCLES,
    WRONG_REPLAYS,
    WRONG_ROW_BYTES,
    Property,
)
from tests.replay import checks
from tests.replay.machines import ROUND_PIPELINES, run_decode_machine
from tests.replay.strategies import POST_CONV_PIPELINES
from tests.replay.test_replay_vectors import rounds_cases

if TYPE_CHECKING:
    from collections.abc import Callable

# Finding a failure is the point; shrinking it would only cost time, and one
# failure is enough (no grouping of several into an ExceptionGroup).
_FIND_ONLY = settings(
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    report_multiple_bugs=False,
    print_blob=False,
)


def _run(property_: Callable[[], None], /) -> None:
    _FIND_ONLY(property_)()


_PAIRS = [
    (name, judged_by)
    for name, wrong in sorted(WRONG_REPLAYS.items())
    for judged_by in wrong.rejected_by
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "judged_by"), _PAIRS, ids=[f"{n}-{p.value}" for n, p in _PAIRS])
def test_every_wrong_replay_is_rejected_by_its_properties(name: str, judged_by: Property) -> None:
    with pytest.raises(AssertionError):
        _run(judged_by.build(WRONG_REPLAYS[name].replay))


def test_every_property_rejects_some_wrong_replay() -> None:
    judged = {prop for wrong in WRONG_REPLAYS.values() for prop in wrong.rejected_by}
    assert judged == set(Property)


def test_every_field_the_state_reads_has_its_wrong_replay() -> None:
    assert {f"dropping_{field.value}" for field in checks.STATE_FIELDS} <= set(WRONG_REPLAYS)
    assert "dropping_z" not in WRONG_REPLAYS


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(WRONG_ROW_BYTES))
def test_every_wrong_row_size_is_rejected(name: str) -> None:
    with pytest.raises(AssertionError):
        _run(checks.minimal_row_bytes_match_the_ring(WRONG_ROW_BYTES[name]))


@pytest.mark.slow
@pytest.mark.parametrize("judged_by", list(Property), ids=lambda p: p.value)
def test_a_ring_that_also_keeps_z_passes_every_property(judged_by: Property) -> None:
    # Dropping z is not a mistake: a replay of the seed's rows, z included,
    # rebuilds the same state.
    _run(judged_by.build(CONTROLS["seed_row_with_z"]))


#: The wrong lifecycles engines shipped or fixed, each of which must have its entry.
_SHIPPED_LIFECYCLE_BUGS = {
    "checkpoint_anchored_to_a_short_round_s_base",  # a llama.cpp fork's issue #345
    "cursor_kept_when_a_slot_is_reused",  # SGLang PR #28451
    "fold_misses_the_last_committed_record",
    "stale_rows_of_an_earlier_round_replayed",
    "fold_of_u_stored_in_bf16",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(WRONG_LIFECYCLES))
def test_every_wrong_lifecycle_is_rejected_by_the_decode_machine(name: str) -> None:
    with pytest.raises(AssertionError, match=r"after .*\nplain "):
        run_decode_machine(WRONG_LIFECYCLES[name], find_only=True)


def test_every_wrong_lifecycle_the_issue_names_is_in_the_self_test() -> None:
    assert set(WRONG_LIFECYCLES) >= _SHIPPED_LIFECYCLE_BUGS


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(LIFECYCLE_CONTROLS))
def test_a_right_lifecycle_that_differs_from_the_reference_passes_the_decode_machine(
    name: str,
) -> None:
    # The raw-input fold keeps each token's post-conv k and v as a post-conv row
    # does, in BF16: exact where the SiLU output is BF16, not ggml-f32's FP32.
    raw_inputs = "raw_input" in name
    pipelines = tuple(p for p in ROUND_PIPELINES if p in POST_CONV_PIPELINES or not raw_inputs)
    run_decode_machine(LIFECYCLE_CONTROLS[name], find_only=True, pipelines=pipelines)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(WRONG_LIFECYCLES))
def test_every_wrong_lifecycle_misses_a_round_of_the_rounds_vectors(name: str) -> None:
    # The committed decodes are regression cases a port can run without Hypothesis.
    results = [
        pair for case in rounds_cases() for pair in decode_case(case, WRONG_LIFECYCLES[name])
    ]
    assert not all(rebuilt.equals(expected) for rebuilt, expected in results)
