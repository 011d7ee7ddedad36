# SPDX-License-Identifier: MIT OR Apache-2.0
"""The generic first-write-wins cell, on fresh instances."""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from .strategies import scaled

if TYPE_CHECKING:
    from collections.abc import Callable

    from ssm_rollback_spec.harness.python_impl import Cell

# Small values collide often, which is where first-write-wins bugs show.
values: Final = st.integers(0, 3)


class CellMachine(RuleBasedStateMachine):
    """Any interleaving of writes and reads, each checked against the model's fold."""

    def __init__(self, new_cell: Callable[[], Cell[object]]) -> None:
        super().__init__()
        self.cell = new_cell()
        self.calls: list[tuple[str, object]] = []

    def _pinned(self) -> object | None:
        # The model's fold: the first set or get_or_init pins its argument.
        return self.calls[0][1] if self.calls else None

    @initialize()
    def starts_empty(self) -> None:
        assert self.cell.get() is None

    @rule(value=values)
    def set(self, value: int) -> None:
        self.calls.append(("set", value))
        assert self.cell.set(value) == self._pinned()

    @rule(default=values)
    def get_or_init(self, default: int) -> None:
        self.calls.append(("get_or_init", default))
        assert self.cell.get_or_init(default) == self._pinned()

    @rule()
    def get(self) -> None:
        assert self.cell.get() == self._pinned()

    @invariant()
    def holds_the_first_written_value(self) -> None:
        assert self.cell.get() == self._pinned()


@pytest.mark.clause("RB-CELL-1", "RB-CELL-2", "RB-CELL-3")
def test_any_interleaving_of_writes_and_reads_follows_the_model(
    new_cell: Callable[[], Cell[object]],
) -> None:
    class MachineOnThisCell(CellMachine):
        def __init__(self) -> None:
            super().__init__(new_cell)

    # Older Hypothesis releases leave this function unannotated; the typed
    # alias keeps strict mypy quiet on every release.
    run: Callable[..., None] = run_state_machine_as_test
    run(MachineOnThisCell, settings=settings(stateful_step_count=20))


@pytest.mark.clause("RB-CELL-3")
def test_none_is_a_value_like_any_other(new_cell: Callable[[], Cell[object]]) -> None:
    cell = new_cell()
    assert cell.set(None) is None
    assert cell.get_or_init(1) is None
    assert cell.set(2) is None


@pytest.mark.clause("RB-CELL-4")
@scaled(150)
@given(
    calls=st.lists(
        st.tuples(st.sampled_from(["set", "get_or_init"]), values), min_size=2, max_size=8
    )
)
def test_calls_released_together_all_return_one_winners_value(
    new_cell: Callable[[], Cell[object]], calls: list[tuple[str, int]]
) -> None:
    cell = new_cell()
    barrier = threading.Barrier(len(calls))
    returned: list[object] = [None] * len(calls)

    def run(index: int, method: str, value: int) -> None:
        barrier.wait()
        returned[index] = getattr(cell, method)(value)

    threads = [
        threading.Thread(target=run, args=(index, *call)) for index, call in enumerate(calls)
    ]
    # A tiny switch interval makes the interpreter preempt between a check
    # and a set, so an unlocked cell loses the race within a few examples.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    allowed = {(value,) * len(calls) for _, value in calls}
    assert tuple(returned) in allowed, f"calls {calls} returned {returned}"
    assert cell.get() == returned[0]
