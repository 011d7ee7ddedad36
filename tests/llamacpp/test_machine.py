# SPDX-License-Identifier: MIT OR Apache-2.0
"""The tier's machine itself: a round cut at any draw leaves the engine holding what it kept.

Hypothesis ends an example at the draw that runs out of data, and the
machine's teardown then judges one more token of every live sequence. That
judgement is only sound if the engine holds exactly the tokens the machine
thinks each sequence kept. A machine that decoded a round's windows before
drawing their rollbacks broke it: cut at a rollback's draw, the engine held
a whole window the machine never recorded, the teardown's token was off by
up to 1.75e-1 on llama.cpp v0.5.0's checkpoint way (docs/engines-llama-cpp.md), and
Hypothesis, which takes a failure after such a cut for a test that stopped,
reported no example. These tests run the machine's own rules on a stand-in
for the adapter that keeps each sequence's tokens; no llama.cpp is needed.
"""

from __future__ import annotations

import contextlib
from typing import cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.llamacpp import machine
from tests.llamacpp.engine import Arch, Built, Description, Fault, Logits, Way

pytestmark = pytest.mark.llamacpp

#: The stand-in's vocabulary: small, so that draws are cheap.
_VOCAB = 5


class _Tracked:
    """The adapter's requests over lists: each sequence's tokens as the calls leave them."""

    def __init__(
        self,
        built: Built,
        /,
        *,
        n_seq: int,
        n_rs_seq: int,
        way: Way,
        fault: Fault | None = None,
        arch: Arch = Arch.QWEN35,
        model: str | None = None,
    ) -> None:
        del built, fault, arch, model
        self.way, self.n_seq, self.n_rs_seq = way, n_seq, n_rs_seq
        self.held: list[list[int]] = [[] for _ in range(n_seq)]

    def describe(self) -> Description:
        return {
            "engine": "stand-in",
            "commit": "none",
            "arch": "qwen35",
            "n_vocab": _VOCAB,
            "n_seq": self.n_seq,
            "n_rs_seq": self.n_rs_seq,
            "way": self.way.value,
        }

    def decode(self, windows: dict[int, list[int]], /) -> dict[int, Logits]:
        for seq, window in windows.items():
            self.held[seq].extend(window)
        return {seq: [[0.0] * _VOCAB for _ in window] for seq, window in windows.items()}

    def rollback(self, seq: int, n: int, /) -> bool:
        del self.held[seq][len(self.held[seq]) - n :]
        return True

    def finish(self, seq: int, /) -> None:
        self.held[seq] = []

    def reference(self, seq: int, tokens: list[int], /, *, restart: bool = False) -> Logits:
        del seq, restart
        return [[0.0] * _VOCAB for _ in tokens]

    def close(self) -> None:
        """Nothing to end."""


class _OutOfDataError(Exception):
    """The draw at which the data ran out."""


class _Scripted:
    """A data object that hands out ``values`` in order, then runs out."""

    def __init__(self, values: list[object], /) -> None:
        self._values = list(values)

    def draw(self, strategy: st.SearchStrategy[object], label: str | None = None) -> object:
        del strategy, label
        if not self._values:
            raise _OutOfDataError
        return self._values.pop(0)


def _machine(way: Way, /) -> machine.Rounds:
    """The tier's machine of ``way`` over a :class:`_Tracked` stand-in."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(machine, "Engine", _Tracked)
        return machine.rounds_machine(cast("Built", {}), way)()


class _CutData:
    """Hypothesis's data object, cut after ``left`` draws, as an example that runs out of data."""

    def __init__(self, data: st.DataObject, left: int, /) -> None:
        self._data, self.left = data, left

    def draw(self, strategy: st.SearchStrategy[object], label: str | None = None) -> object:
        if self.left == 0:
            raise _OutOfDataError
        self.left -= 1
        return self._data.draw(strategy, label=label)


@given(
    data=st.data(),
    way=st.sampled_from(Way),
    rounds=st.integers(0, 3),
    cut=st.integers(0, 3 + 2 * machine.N_SEQ),
)
def test_a_round_cut_at_any_draw_leaves_the_engine_holding_what_the_machine_kept(
    data: st.DataObject, way: Way, rounds: int, cut: int
) -> None:
    run = _machine(way)
    engine = cast("_Tracked", run.engine)
    for _ in range(rounds):
        run.verify_round(data)
        assert engine.held == run.kept
    with contextlib.suppress(_OutOfDataError):
        run.verify_round(cast("st.DataObject", _CutData(data, cut)))
    assert engine.held == run.kept


def test_the_teardown_after_a_round_cut_at_a_rollback_judges_only_kept_tokens() -> None:
    # The cut that hid v0.5.0's checkpoint failure (docs/engines-llama-cpp.md,
    # "llama.cpp v0.5.0 as node-llama-cpp 3.22.1 ships it, prebuilt"), in its
    # last round: sequences 2 and 1 decode windows in one llama_decode (2
    # tokens for sequence 2, as in the run that logged it; sequence 1's length
    # was not logged), and the data runs out at sequence 1's rollback. The
    # machine judged sequence 1's next token after its kept tokens; the engine
    # had the whole window behind it (off by 6.95e-2).
    run = _machine(Way.CHECKPOINT)
    engine = cast("_Tracked", run.engine)
    run.verify_round(cast("st.DataObject", _Scripted([[1], [0, 1, 2], 1])))
    assert engine.held == run.kept == [[], [0, 1], []]
    with pytest.raises(_OutOfDataError):
        run.verify_round(cast("st.DataObject", _Scripted([[2, 1], [3, 4], [1, 2, 3, 4], 0])))
    assert engine.held == run.kept == [[], [0, 1], []]


def test_the_teardown_judges_a_sequence_whose_rounds_kept_no_token() -> None:
    # v0.5.0's qwen35moe checkpoint run drew examples whose every round rolled
    # its whole window back: no token kept, none compared. The teardown judges
    # each sequence a round decoded into, one rolled back to nothing included,
    # so such an example compares a token, with no assume() in teardown (which
    # raised Hypothesis's Frozen after a draw ran out of data).
    judged = machine.Judged()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(machine, "Engine", _Tracked)
        rounds = machine.rounds_machine(
            cast("Built", {}), Way.CHECKPOINT, whole_window=True, judged=judged
        )
        run = rounds()
    run.verify_round(cast("st.DataObject", _Scripted([[1], [0, 1, 2], 3])))
    assert run.kept == [[], [], []]
    assert judged.tokens == 0
    run.teardown()
    assert judged.tokens == 1
    assert run.kept == [[], [1], []]


def test_every_example_of_the_machine_compares_a_token() -> None:
    # Run under Hypothesis as the tier runs it, on the stand-in, rounds that
    # may roll a whole window back: each example that took a step judged at
    # least one token. (One cut at its first draw took none: Hypothesis
    # discards it as overrun.) Drawing finishes before any round failed this.
    per_example: list[int] = []
    judged = machine.Judged()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(machine, "Engine", _Tracked)
        base = machine.rounds_machine(
            cast("Built", {}), Way.SNAPSHOT, whole_window=True, judged=judged
        )

        class Counted(base):  # type: ignore[misc,valid-type]
            def __init__(self) -> None:
                super().__init__()
                self.start = judged.tokens

            def teardown(self) -> None:
                super().teardown()
                if self.history:
                    per_example.append(judged.tokens - self.start)

        machine.run_rounds(Counted)
    assert len(per_example) >= 8
    assert min(per_example) > 0
