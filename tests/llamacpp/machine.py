# SPDX-License-Identifier: MIT OR Apache-2.0
"""Speculative rounds as runtimes make them, through llama.h, judged by decoding only what was kept.

Each round decodes a window for some of the sequences in one batch, rolls
each back by a drawn number of tokens that the engine accepts, and may end
sequences and start others in their slots. After every round, each token the
round kept must have the logits that the same model gives when it decodes
only the kept tokens, one at a time, in a sequence that never rolled back:
a wrong rolled-back state shows in the logits of the next token kept after
it. The property needs no model of the arithmetic; the bound is measured on
llama.cpp's own (BOUND).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Final, TypeAlias, cast

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tests.llamacpp.engine import Arch, Built, Engine, Fault, Logits, Way
from tests.replay.machines import machine_settings as shared_settings

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "BOUND",
    "MAX_WINDOW",
    "N_RS_SEQ",
    "N_SEQ",
    "Calls",
    "Judged",
    "Rounds",
    "largest_difference",
    "rounds_machine",
    "run_rounds",
    "worst_kept_difference",
]

#: Sequences in the context (slots), and the context's per-token snapshots.
N_SEQ: Final = 3
N_RS_SEQ: Final = 4
#: Windows as long as the snapshots cover and longer (a long prompt, a long chunk).
MAX_WINDOW: Final = N_RS_SEQ + 3
#: How far a kept token's logits may be from decoding only the kept tokens one
#: at a time. Measured on the pinned release's portable CPU build, one
#: thread: 0, bit for bit, on every token of thousands of drawn rounds in both
#: ways (BENCHMARKS.md), while the wrong rollbacks and the deviation miss by
#: 1e-2 and more on logits of about 5.
BOUND: Final = 0.0
#: Steps per example.
STEPS: Final = 8
#: Rounds of calls: each round's windows by sequence, then its rollback lengths by sequence.
Calls: TypeAlias = tuple[tuple[dict[int, list[int]], dict[int, int]], ...]


def largest_difference(actual: Logits, expected: Logits, /) -> float:
    """The largest ``|actual - expected|`` over every logit of every row."""
    assert len(actual) == len(expected)
    return max(
        (
            abs(a - e)
            for got, want in zip(actual, expected, strict=True)
            for a, e in zip(got, want, strict=True)
        ),
        default=0.0,
    )


def worst_kept_difference(
    built: Built, way: Way, rounds: Calls, /, *, model: str | None = None
) -> float:
    """The largest difference of a kept token's logits from the reference's over ``rounds``.

    Every rollback must be accepted: the findings are that llama.cpp accepts them.
    ``model`` is a make-model file of another architecture than Qwen3.5.
    """
    with Engine(built, n_seq=N_SEQ, n_rs_seq=N_RS_SEQ, way=way, model=model) as engine:
        worst = 0.0
        for windows, backs in rounds:
            logits = engine.decode(windows)
            for seq, window in windows.items():
                assert engine.rollback(seq, backs.get(seq, 0))
                kept = window[: len(window) - backs.get(seq, 0)]
                expected = engine.reference(seq, kept)
                worst = max(worst, largest_difference(logits[seq][: len(kept)], expected))
        return worst


@dataclass
class Judged:
    """What the machine saw: the largest difference and how many rounds it compared."""

    largest: float = 0.0
    rounds: int = 0
    tokens: int = 0
    log: list[str] = field(default_factory=list)


class Rounds(RuleBasedStateMachine):
    """Several sequences of one context in speculative rounds; :func:`rounds_machine` sets it up."""

    built: ClassVar[Built]
    way: ClassVar[Way]
    fault: ClassVar[Fault | None] = None
    arch: ClassVar[Arch] = Arch.QWEN35
    #: A model file of another architecture (make-model's), in place of ``arch``'s.
    model: ClassVar[str | None] = None
    whole_window: ClassVar[bool] = False
    #: With ``whole_window``, whether a rollback may go past the window too.
    past_window: ClassVar[bool] = True
    batched: ClassVar[bool] = True
    slots: ClassVar[int] = N_SEQ
    bound: ClassVar[float] = BOUND
    judged: ClassVar[Judged]

    def __init__(self) -> None:
        super().__init__()
        self.engine = Engine(
            self.built,
            n_seq=N_SEQ,
            n_rs_seq=N_RS_SEQ,
            way=self.way,
            fault=self.fault,
            arch=self.arch,
            model=self.model,
        )
        self.n_vocab = self.engine.describe()["n_vocab"]
        # Each sequence's kept tokens, and whether its reference holds exactly them.
        self.kept: list[list[int]] = [[] for _ in range(N_SEQ)]
        self.in_step = [True] * N_SEQ
        self.history: list[str] = []
        #: Sequences a round decoded into: teardown judges each of them, so an
        #: example with a round compares a token even when its rounds kept none.
        self.touched: set[int] = set()

    def _most(self, seq: int, window: int, /) -> int:
        """The longest rollback drawn for ``seq`` after a window of ``window`` tokens."""
        after = len(self.kept[seq]) + window
        most = window if self.way is Way.CHECKPOINT else min(N_RS_SEQ, after)
        if not self.whole_window:
            most = min(most, window - 1)
        elif not self.past_window:
            most = min(most, window)
        return max(0, most)

    def _judge(self, seq: int, logits: Logits, tokens: list[int], /) -> None:
        if self.in_step[seq]:
            expected = self.engine.reference(seq, tokens)
        else:
            whole = self.engine.reference(seq, self.kept[seq], restart=True)
            expected = whole[len(whole) - len(tokens) :]
            self.in_step[seq] = True
        difference = largest_difference(logits, expected)
        self.judged.largest = max(self.judged.largest, difference)
        self.judged.tokens += len(tokens)
        assert difference <= self.bound, (
            f"sequence {seq}: a kept token's logits are {difference:.3g} from decoding only "
            f"the kept tokens, past {self.bound:g}, after {'; '.join(self.history)}"
        )

    @rule(data=st.data())
    def verify_round(self, data: st.DataObject) -> None:
        seqs = data.draw(
            st.lists(
                st.integers(0, self.slots - 1),
                min_size=1,
                max_size=self.slots if self.batched else 1,
                unique=True,
            ),
            label="seqs",
        )
        windows = {
            s: data.draw(
                st.lists(st.integers(0, self.n_vocab - 1), min_size=1, max_size=MAX_WINDOW),
                label=f"window {s}",
            )
            for s in seqs
        }
        # Every draw before the first call: a draw that runs out of data ends
        # the example there (Hypothesis's StopTest), and teardown then judges
        # what the engine holds. Drawn after the decode, the rollbacks of a
        # cut round were never made, so the teardown's token followed a whole
        # unrolled window, off by 8.7e-2, and Hypothesis, which takes a failure
        # in teardown after a cut for a test that stopped (its data frozen),
        # reported nothing but Judged's largest.
        backs = {
            s: data.draw(st.integers(0, self._most(s, len(windows[s]))), label=f"rollback {s}")
            for s in seqs
        }
        logits = self.engine.decode(windows)
        self.touched.update(seqs)
        for s in seqs:
            window, back = len(windows[s]), backs[s]
            if back:
                assert self.engine.rollback(s, back), (
                    f"the engine refused to roll sequence {s} back by {back} "
                    f"after a window of {window}"
                )
            kept = window - back
            self.history.append(f"seq {s}: {len(self.kept[s])}+{window}-{back}")
            if kept >= 0:
                self.kept[s].extend(windows[s][:kept])
                if kept > 0:
                    self._judge(s, logits[s][:kept], windows[s][:kept])
            else:
                # Past the window, the sequence's earlier tokens go too.
                del self.kept[s][len(self.kept[s]) + kept :]
                self.in_step[s] = False
        self.judged.rounds += 1

    # Only after a round: an example's first step is then a round, and the
    # teardown compares a token of each sequence it decoded into, so no
    # counted example compares nothing.
    @precondition(lambda self: bool(self.touched))
    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        seq = data.draw(st.integers(0, self.slots - 1), label="finish")
        self.engine.finish(seq)
        self.kept[seq] = []
        self.in_step[seq] = True
        self.history.append(f"finish {seq}")

    def teardown(self) -> None:
        try:
            # The last round's rolled-back states, judged by one more token each,
            # a sequence rolled back to nothing too: its token must read as the
            # first of a fresh sequence. No assume() here: after a draw ran out of
            # data (StopTest), the example's data is frozen, and an assume in
            # teardown raised Hypothesis's Frozen in place of a verdict.
            live = {s: [s % self.n_vocab] for s in sorted(self.touched)}
            batches = [live] if self.batched else [{s: t} for s, t in live.items()]
            for batch in filter(None, batches):
                logits = self.engine.decode(batch)
                for s, tokens in batch.items():
                    self.kept[s].extend(tokens)
                    self._judge(s, logits[s], tokens)
        finally:
            self.engine.close()


def rounds_machine(
    built: Built,
    way: Way,
    /,
    *,
    fault: Fault | None = None,
    arch: Arch = Arch.QWEN35,
    model: str | None = None,
    whole_window: bool = False,
    past_window: bool = True,
    batched: bool = True,
    slots: int = N_SEQ,
    bound: float = BOUND,
    judged: Judged | None = None,
) -> type[Rounds]:
    """The machine over one adapter process of ``way`` (and ``fault``, for the self-test).

    ``whole_window`` lets a round roll a sequence back past the first token of
    its window, which llama_memory_seq_rm accepts; left False, at least one
    of the window's tokens is kept, as a runtime's verify keeps its bonus
    token; ``past_window`` False keeps such rollbacks within the window
    (the snapshot way's, which can go past it). ``bound`` is the judge's,
    :data:`BOUND` unless a build measured its own.
    ``model`` is a make-model file of another architecture, judged in ``arch``'s place.
    """
    settings_ = {
        "built": built,
        "way": way,
        "fault": fault,
        "arch": arch,
        "model": model,
        "whole_window": whole_window,
        "past_window": past_window,
        "batched": batched,
        "slots": slots,
        "bound": bound,
        "judged": judged if judged is not None else Judged(),
    }
    name = arch.value if model is None else model.rsplit("/", 1)[-1].split("-seed", 1)[0]
    return type(f"Rounds_{way.value}_{name}", (Rounds,), settings_)


def machine_settings(*, find_only: bool = False, share: int = 4, least: int = 8) -> settings:
    """The profile's settings, a quarter of its examples (at least ``least``), STEPS steps each.

    ``find_only`` (the self-test) stops at the first failure, unshrunk;
    ``share`` divides the profile's examples otherwise than by 4, for a costlier model,
    and ``least`` is the fewest examples, for a run that only widens another's.
    """
    # The replay machines' settings; llama.cpp's decodes have no deadline to keep.
    shared = shared_settings(find_only=find_only, share=share, least=least, steps=STEPS)
    return settings(shared, deadline=None)


# Typed the same whether or not the installed Hypothesis annotates it.
_run_machine: Final = cast("Callable[..., None]", run_state_machine_as_test)


def run_rounds(
    machine: type[RuleBasedStateMachine],
    /,
    *,
    find_only: bool = False,
    share: int = 4,
    least: int = 8,
) -> None:
    """Run ``machine`` under :func:`machine_settings`."""
    _run_machine(machine, settings=machine_settings(find_only=find_only, share=share, least=least))
