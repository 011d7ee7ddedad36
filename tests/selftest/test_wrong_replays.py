# SPDX-License-Identifier: MIT OR Apache-2.0
"""The replay properties' self-test: every deliberately wrong replay is rejected.

The references pass the same factories in ``tests/replay/test_replay_model.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from hypothesis import Phase, settings

from tests.replay import checks
from tests.selftest.wrong_replay import (
    CONTROLS,
    WRONG_REPLAYS,
    WRONG_ROW_BYTES,
    Property,
)

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


@pytest.mark.parametrize("name", sorted(WRONG_ROW_BYTES))
def test_every_wrong_row_size_is_rejected(name: str) -> None:
    with pytest.raises(AssertionError):
        _run(checks.minimal_row_bytes_match_the_ring(WRONG_ROW_BYTES[name]))


@pytest.mark.parametrize("judged_by", list(Property), ids=lambda p: p.value)
def test_a_ring_that_also_keeps_z_passes_every_property(judged_by: Property) -> None:
    # Dropping z is not a mistake: a replay of the seed's rows, z included,
    # rebuilds the same state.
    _run(judged_by.build(CONTROLS["seed_row_with_z"]))
