# SPDX-License-Identifier: MIT OR Apache-2.0
"""The model operation's round scripts, ``vectors/replay/model_rounds.json`` (RB-REPLAY-14).

Each case is one ``model`` request (docs/protocol-model.md): fixed
speculative rounds (decode a window on some sequences in one step, roll
each back by some of it, the request's way), one more token on every
sequence still live, so that its last rolled-back state is judged, a finish
of each, and then each sequence's kept tokens decoded again plainly, as
``plain-NAME``, one token a step, alone. Its ``equal`` pairs name a kept
token's logits in the rounds and the same token's in the plain decode; they
must be the same within the bound the adapter declares (0 unless it says).

No float is written: a case holds tokens, steps and the pairs its script
implies, so the file is the same on every machine, whatever model an
adapter loaded. ``needs`` says what a model must offer for the case to be
sent: a vocabulary, slots, and for a snapshot case a snapshot depth.
Standard library only.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Final, NotRequired, TypedDict

from ..harness.model_wire import MODEL_OP, RollbackWay

__all__ = [
    "MODEL_CLAUSES",
    "MODEL_FILE",
    "PLAIN_PREFIX",
    "ModelNeeds",
    "ModelRoundsCase",
    "model_cases",
]

#: The case file, in the replay corpus's directory.
MODEL_FILE: Final = "model_rounds.json"
#: What every case checks.
MODEL_CLAUSES: Final = ("RB-REPLAY-14",)
#: How a plain decode's sequence is named: this, then the sequence's own name.
PLAIN_PREFIX: Final = "plain-"

#: The drawn scripts' stream, their count per way, and their sizes.
_SEED: Final = 20261210
_DRAWN: Final = 6
_DRAWN_VOCAB: Final = 16
_DRAWN_SEQUENCES: Final = 3
_DRAWN_DEPTH: Final = 4
_DRAWN_WINDOW: Final = 5


class ModelNeeds(TypedDict):
    """What a model's ``describe`` must offer for a case to be sent to it."""

    #: One past the largest token the case sends.
    vocab: int
    #: The most sequences the script holds live at once.
    sequences: int
    #: A snapshot case's deepest rollback; a checkpoint case has none.
    snapshot_depth: NotRequired[int]


class ModelRoundsCase(TypedDict):
    """One case of ``model_rounds.json``: a ``model`` request and the logits that must match.

    Each pair of ``equal`` is ``[[step, entry, token], [step, entry, token]]``:
    two rows of the reply's decode results (``results[step].logits[entry][token]``),
    the first a kept token of the rounds, the second the same token of the
    plain decode. Every rollback step must be accepted: the case asks only
    for rollbacks the model offers.
    """

    id: str
    clauses: list[str]
    about: str
    needs: ModelNeeds
    request: dict[str, object]
    equal: list[list[list[int]]]


@dataclass(frozen=True)
class _Round:
    """One decode step (each sequence's window, in the step's order) and its rollbacks."""

    windows: tuple[tuple[str, tuple[int, ...]], ...]
    backs: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class _Finish:
    sequence: str


@dataclass(frozen=True)
class _Plan:
    name: str
    about: str
    steps: tuple[_Round | _Finish, ...]


def _round(*windows: tuple[str, tuple[int, ...]], backs: dict[str, int] | None = None) -> _Round:
    return _Round(windows, tuple((backs or {}).items()))


#: The fixed scripts, each run both ways. The first two are the shapes the
#: llama.cpp tier shrank its two findings to (tests/llamacpp/test_rollback.py).
_PLANS: Final = (
    _Plan(
        "beside-other-sequences",
        "llama.cpp 0c1e57098's snapshot finding, as shrunk: a sequence rolled back "
        "beside two others in one decode, then decoding on",
        (
            _round(("s0", (0,))),
            _round(("s2", (0, 0)), ("s0", (0,)), ("s1", (0,)), backs={"s2": 1}),
            _round(("s2", (2,))),
        ),
    ),
    _Plan(
        "whole-window",
        "llama.cpp 0c1e57098's rollback of a whole window (#26695's case), as shrunk: "
        "a token, a window of one more rolled back whole, a token",
        (
            _round(("a", (0,))),
            _round(("a", (0,)), backs={"a": 1}),
            _round(("a", (0,))),
        ),
    ),
    _Plan(
        "one-sequence",
        "one sequence: a window rolled back by half, then another by one",
        (
            _round(("a", (3, 1, 4, 1)), backs={"a": 2}),
            _round(("a", (5, 9)), backs={"a": 1}),
        ),
    ),
    _Plan(
        "kept-whole-then-rolled-back",
        "a window kept whole, then the next rolled back: the state restored is the "
        "one after the kept window, not before it",
        (
            _round(("a", (1, 2, 3))),
            _round(("a", (4, 5, 6)), backs={"a": 2}),
            _round(("a", (7, 8)), backs={"a": 1}),
        ),
    ),
    _Plan(
        "depth-four",
        "a rollback of four tokens, as deep as a snapshot of four reaches",
        (_round(("a", (1, 2, 3, 4, 5)), backs={"a": 4}),),
    ),
    _Plan(
        "several-rolled-back-beside-each-other",
        "three sequences, each rolled back by another count in the same steps, twice",
        (
            _round(
                ("a", (1, 2, 3)), ("b", (4, 5)), ("c", (6, 7, 8, 9)), backs={"a": 1, "b": 2, "c": 3}
            ),
            _round(("c", (10,)), ("a", (11, 12)), ("b", (13, 14, 15)), backs={"a": 2, "b": 1}),
        ),
    ),
    _Plan(
        "apart-then-together",
        "two sequences decoded apart, then rolled back in the same step",
        (
            _round(("a", (1,))),
            _round(("b", (2,))),
            _round(("a", (3, 4)), ("b", (5, 6)), backs={"a": 1, "b": 1}),
            _round(("b", (7, 8)), backs={"b": 2}),
        ),
    ),
    _Plan(
        "finished-and-slot-taken",
        "a sequence finishes after a rollback beside it, and a new one takes its slot "
        "and rolls back",
        (
            _round(("a", (1, 2)), ("b", (3, 4, 5)), backs={"b": 2}),
            _Finish("a"),
            _round(("c", (6, 7)), ("b", (8,)), backs={"c": 1}),
            _round(("c", (9, 10, 11)), backs={"c": 3}),
        ),
    ),
)


def _drawn(rng: random.Random, number: int, /) -> _Plan:
    """A script drawn as check's rounds draw one, small: 3 to 5 rounds, sometimes a finish."""
    steps: list[_Round | _Finish] = []
    live: list[str] = []
    names = 0
    for _ in range(rng.randint(3, 5)):
        running = [name for name in live if rng.random() < 0.6]
        free = _DRAWN_SEQUENCES - len(live)
        joining = rng.randint(0 if running else 1, free) if free else 0
        if not running and not joining:
            running = live[:1]
        joined = [f"s{names + index}" for index in range(joining)]
        names += joining
        live += joined
        order = running + joined
        rng.shuffle(order)
        windows = tuple(
            (name, tuple(rng.randrange(_DRAWN_VOCAB) for _ in range(rng.randint(1, _DRAWN_WINDOW))))
            for name in order
        )
        backs = {name: rng.randint(0, min(len(window), _DRAWN_DEPTH)) for name, window in windows}
        steps.append(_Round(windows, tuple((name, back) for name, back in backs.items() if back)))
        if live and rng.random() < 0.2:
            finished = rng.choice(live)
            live.remove(finished)
            steps.append(_Finish(finished))
    return _Plan(
        f"drawn-{number}",
        "drawn rounds on up to three sequences, some finishing (a fixed seed)",
        tuple(steps),
    )


@dataclass
class _Life:
    """One sequence from its start to its finish: its kept tokens and where each was judged."""

    name: str
    kept: list[int]
    #: Per kept position, the row ``[step, entry, token]`` that gave its logits.
    rows: list[list[int]]


class _Script:
    """A plan written out as a ``model`` script, with each kept token's row noted."""

    def __init__(self) -> None:
        self.steps: list[dict[str, object]] = []
        self.live: dict[str, _Life] = {}
        self.lives: list[_Life] = []
        self.most_live = 0
        self.deepest = 0
        self.largest = 0

    def decode(self, windows: tuple[tuple[str, tuple[int, ...]], ...], /) -> None:
        step = len(self.steps)
        self.steps.append(
            {"decode": [{"sequence": name, "tokens": list(tokens)} for name, tokens in windows]}
        )
        for entry, (name, tokens) in enumerate(windows):
            if name not in self.live:
                self.live[name] = _Life(name, [], [])
                self.lives.append(self.live[name])
            life = self.live[name]
            life.kept += tokens
            life.rows += [[step, entry, token] for token in range(len(tokens))]
            self.largest = max(self.largest, *tokens)
        self.most_live = max(self.most_live, len(self.live))

    def rollback(self, name: str, tokens: int, /) -> None:
        self.steps.append({"rollback": name, "tokens": tokens})
        life = self.live[name]
        del life.kept[-tokens:], life.rows[-tokens:]
        self.deepest = max(self.deepest, tokens)

    def finish(self, name: str, /) -> None:
        self.steps.append({"finish": name})
        del self.live[name]

    def plain(self) -> list[list[list[int]]]:
        """Each life's kept tokens decoded again alone, one a step: the pairs that must match."""
        equal: list[list[list[int]]] = []
        # A life whose every token was rolled back has nothing to decode again.
        for life in (life for life in self.lives if life.kept):
            plain = f"{PLAIN_PREFIX}{life.name}"
            for position, token in enumerate(life.kept):
                equal.append([life.rows[position], [len(self.steps), 0, 0]])
                self.steps.append({"decode": [{"sequence": plain, "tokens": [token]}]})
            self.steps.append({"finish": plain})
        return equal


def _case(number: int, plan: _Plan, way: RollbackWay, /) -> ModelRoundsCase:
    script = _Script()
    for item in plan.steps:
        if isinstance(item, _Finish):
            script.finish(item.sequence)
            continue
        script.decode(item.windows)
        for name, back in item.backs:
            script.rollback(name, back)
    # One more token on each live sequence judges its last rolled-back state.
    if script.live:
        script.decode(tuple((name, (index % 3,)) for index, name in enumerate(script.live)))
    for name in list(script.live):
        script.finish(name)
    equal = script.plain()
    needs = ModelNeeds(vocab=script.largest + 1, sequences=script.most_live)
    if way is RollbackWay.SNAPSHOT:
        needs["snapshot_depth"] = max(1, script.deepest)
    return ModelRoundsCase(
        id=f"{number:03d}-{way.value}-{plan.name}",
        clauses=list(MODEL_CLAUSES),
        about=plan.about,
        needs=needs,
        request={"op": MODEL_OP, "rollback": way.value, "script": script.steps},
        equal=equal,
    )


def model_cases() -> list[ModelRoundsCase]:
    """Every case of ``model_rounds.json``: the fixed scripts, then the drawn ones, each way."""
    # Reproducible draws, not secrets: Random's stream is fixed for a seed.
    rng = random.Random(_SEED)  # noqa: S311
    plans = [*_PLANS, *(_drawn(rng, number) for number in range(_DRAWN))]
    cases: list[ModelRoundsCase] = []
    for way in RollbackWay:
        cases += [_case(len(cases) + index, plan, way) for index, plan in enumerate(plans)]
    return cases
