# SPDX-License-Identifier: MIT OR Apache-2.0
"""The batch state machine: steps of batches on a pool of slots, each sequence against itself alone.

:func:`batch_machine` builds a Hypothesis ``RuleBasedStateMachine`` over a
batch runtime factory (:class:`ssm_rollback_spec.replay.batch.SlotPool`, or a
deliberately wrong one of ``tests/fakes/wrong_batch.py``). Its one rule
verifies a batch: sequences join free slots (from a drawn checkpoint, after a
prefill of 0 to 3 rows or not, or with a prompt chunk alone that later steps
go on with, as chunked prefill splits a prompt), running ones are scheduled
or left out,
each entry draws its window (1 token, no drafts, up to the K ceiling) and its
accepted count (1 to K) and may finish, freeing its slot for the next
joiner, and the entries come in any order. After the step each entry's
state must be its sequence's own replay as if it ran alone
(:func:`~ssm_rollback_spec.replay.batch.batch_oracle`), bit for bit (RB-REPLAY-12).
"""

from __future__ import annotations

import random
from dataclasses import replace
from math import prod
from typing import TYPE_CHECKING, ClassVar, Final, TypeVar, cast

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test

from ssm_rollback_spec.replay.batch import BatchEntry, batch_oracle
from ssm_rollback_spec.replay.cases import make_layer
from ssm_rollback_spec.replay.layer import LayerState, Pipeline, TokenInput, bf16_round
from ssm_rollback_spec.replay.paths import SeedRow, seed_rows
from ssm_rollback_spec.replay_rows import GdnShape

from .machines import machine_settings

if TYPE_CHECKING:
    from collections.abc import Callable

    from numpy.typing import NDArray

    from ssm_rollback_spec.replay.batch import BatchRuntimeFactory
    from ssm_rollback_spec.replay.cases import Draw
    from ssm_rollback_spec.replay.layer import Array

__all__ = ["MAX_SLOTS", "STEPS", "batch_machine", "batch_settings", "run_batch_machine"]

_T = TypeVar("_T")

#: The most slots a machine's pool has, and the widest window it draws.
MAX_SLOTS: Final = 4
_MAX_K_CEILING: Final = 5
_MAX_PREFILL: Final = 3
#: Batches per example: a slot taken, freed and taken again shows within a few.
STEPS: Final = 8
#: A pool at the protocol's size, and the slots its sequences join there: past 255, the
#: last one, and two pairs an 8-bit slot index takes for one (0 and 256, 255 and 4,095).
_WIDE_POOL: Final = 4096
_WIDE_SLOTS: Final = (0, 255, 256, 4095)


@st.composite
def _small_shapes(draw: st.DrawFn) -> GdnShape:
    key_heads = draw(st.integers(1, 2))
    return GdnShape(
        num_key_heads=key_heads,
        key_head_dim=2,
        num_value_heads=key_heads * draw(st.integers(1, 2)),
        value_head_dim=2,
        conv_kernel=draw(st.integers(2, 3)),
    )


def _seeded(rng: random.Random, /) -> Draw:
    # The values come from a drawn seed, so a failure shrinks in its structure
    # (slots, windows, accepted counts), not one value at a time.
    def drawn(shape: tuple[int, ...], low: float, high: float, /) -> NDArray[np.float64]:
        values = [rng.uniform(low, high) for _ in range(prod(shape))]
        return np.array(values, dtype=np.float64).reshape(shape)

    return drawn


def _show(entries: list[BatchEntry], /) -> str:
    return ", ".join(
        f"{e.sequence}@{e.slot}{'+join' if e.checkpoint is not None else ''}"
        f"{f'+prefill{len(e.prefill)}' if e.prefill else ''}"
        f"{f' K={len(e.rows)} a={e.accepted}' if e.rows else ' prompt chunk'}"
        f"{' finish' if e.finish else ''}"
        for e in entries
    )


def _some(data: st.DataObject, values: list[_T], label: str, /) -> list[_T]:
    """Some of ``values``, each at most once, in the drawn order."""
    return data.draw(st.lists(st.sampled_from(values), unique=True), label=label) if values else []


class _Batches(RuleBasedStateMachine):
    """Batches verified by the runtime; each sequence replayed alone beside it."""

    make: ClassVar[BatchRuntimeFactory]
    pipelines: ClassVar[tuple[Pipeline, ...]]

    @initialize(data=st.data())
    def start(self, data: st.DataObject) -> None:
        self.pipeline = data.draw(st.sampled_from(self.pipelines), label="pipeline")
        seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
        self.numbers = _seeded(random.Random(seed))  # noqa: S311 - reproducible, no secret
        shape = data.draw(_small_shapes(), label="shape")
        self.layer = replace(make_layer(shape, self.numbers), pipeline=self.pipeline)
        # A few slots, every one of which may be taken, or 4,096, of which a few far apart are.
        wide = st.just(_WIDE_POOL)
        self.slots = data.draw(st.one_of(st.integers(1, MAX_SLOTS), wide), label="slots")
        self.joinable = _WIDE_SLOTS if self.slots == _WIDE_POOL else tuple(range(self.slots))
        self.k_ceiling = data.draw(st.integers(1, _MAX_K_CEILING), label="k_ceiling")
        self.runtime = self.make(self.layer, self.pipeline, self.slots, self.k_ceiling)
        #: Each running sequence's slot, and its state replayed alone.
        self.running: dict[str, tuple[int, LayerState]] = {}
        self.joined = 0
        #: The running sequences that have not verified yet: their prompt goes on.
        self.prompting: set[str] = set()
        self.history: list[str] = []

    def _rows(self, count: int, /) -> tuple[SeedRow, ...]:
        layer, numbers = self.layer, self.numbers
        tokens = [
            TokenInput(
                qkv=numbers((layer.conv_dim,), -2.0, 2.0),
                z=numbers((layer.value_dim,), -2.0, 2.0),
                a=numbers((layer.num_value_heads,), -2.0, 2.0),
                b=numbers((layer.num_value_heads,), -2.0, 2.0),
            )
            for _ in range(count)
        ]
        return seed_rows(layer, tokens, self.pipeline)

    def _checkpoint(self) -> LayerState:
        zero, dtype = self.layer.zero_state(self.pipeline), self.pipeline.dtype
        conv: Array = self.numbers(zero.conv.shape, -2.0, 2.0)
        if self.pipeline is not Pipeline.FLOAT64:
            conv = bf16_round(conv)
        h = self.numbers(zero.h.shape, -2.0, 2.0)
        return LayerState(conv=np.asarray(conv, dtype=dtype), h=h.astype(dtype))

    def _entry(
        self, data: st.DataObject, sequence: str, slot: int, /, *, joins: bool
    ) -> BatchEntry:
        prompting = joins or sequence in self.prompting
        prefill = data.draw(st.integers(0, _MAX_PREFILL), label="prefill") if prompting else 0
        # A prompt chunk alone: its rows this step, its first verify in a later one.
        chunk = prefill > 0 and data.draw(st.booleans(), label="prompt chunk alone")
        window = 0 if chunk else data.draw(st.integers(1, self.k_ceiling), label="window")
        return BatchEntry(
            sequence=sequence,
            slot=slot,
            rows=self._rows(window) if window else (),
            accepted=data.draw(st.integers(1, window), label="accepted") if window else 0,
            checkpoint=self._checkpoint() if joins else None,
            prefill=self._rows(prefill) if prefill else (),
            finish=data.draw(st.booleans(), label="finish"),
        )

    def _batch(self, data: st.DataObject, /) -> list[BatchEntry]:
        """Joiners in some free slots, some running sequences, in any order; never empty."""
        held = {slot for slot, _ in self.running.values()}
        free = [slot for slot in self.joinable if slot not in held]
        names = sorted(self.running)
        joining = (
            data.draw(st.lists(st.sampled_from(free), unique=True), label="joining") if free else []
        )
        scheduled = (
            data.draw(st.lists(st.sampled_from(names), unique=True), label="scheduled")
            if names
            else []
        )
        if not joining and not scheduled:
            joining, scheduled = free[:1], names[:1]
        entries = [
            self._entry(data, name, self.running[name][0], joins=False) for name in scheduled
        ]
        for slot in joining:
            # Names of 64 characters, the longest allowed, in the pool at the protocol's size.
            name = f"s{self.joined}"
            name = f"{name}-".ljust(64, "x") if self.slots == _WIDE_POOL else name
            entries.append(self._entry(data, name, slot, joins=True))
            self.joined += 1
        return data.draw(st.permutations(entries), label="order")

    @rule(data=st.data())
    def verify_a_batch(self, data: st.DataObject) -> None:
        entries = self._batch(data)
        # Each sequence alone: its own state so far is its checkpoint for this step.
        alone = [
            entry
            if entry.checkpoint is not None
            else replace(entry, checkpoint=self.running[entry.sequence][1])
            for entry in entries
        ]
        expected = batch_oracle(self.layer, self.pipeline, [alone])[0]
        self.history.append(_show(entries))
        reported = self.runtime.step(entries)
        for entry, got, wanted in zip(entries, reported, expected, strict=True):
            assert got.equals(wanted), (
                f"{self.pipeline.value}, {self.slots} slots, K ceiling {self.k_ceiling}; "
                f"sequence {entry.sequence} in slot {entry.slot} after step "
                f"{len(self.history)} of:\n  " + "\n  ".join(self.history) + "\n"
                f"alone   conv={wanted.conv.tolist()} h={wanted.h.tolist()}\n"
                f"batched conv={got.conv.tolist()} h={got.h.tolist()}"
            )
        for entry, state in zip(entries, expected, strict=True):
            if entry.rows or entry.finish:
                self.prompting.discard(entry.sequence)
            else:
                self.prompting.add(entry.sequence)
            if entry.finish:
                self.running.pop(entry.sequence, None)
            else:
                self.running[entry.sequence] = (entry.slot, state)


def batch_machine(
    make: BatchRuntimeFactory, /, *, pipelines: tuple[Pipeline, ...] = tuple(Pipeline)
) -> type[RuleBasedStateMachine]:
    """The batch machine for runtimes ``make`` builds, drawing ``pipelines``.

    RB-REPLAY-12.
    """
    return type("Batches", (_Batches,), {"make": staticmethod(make), "pipelines": pipelines})


def batch_settings(*, find_only: bool = False) -> settings:
    """The profile's settings for the batch machine: a fifth of its examples, STEPS steps each.

    Each step verifies a whole batch, so an example is several decode
    machines' worth. ``find_only`` (the self-test) stops at the first
    failure, unshrunk.
    """
    return machine_settings(find_only=find_only, share=5, least=6, steps=STEPS)


# Typed the same whether or not the installed Hypothesis annotates it.
_run_machine: Final = cast("Callable[..., None]", run_state_machine_as_test)


def run_batch_machine(make: BatchRuntimeFactory, /, *, find_only: bool = False) -> None:
    """Run the batch machine of ``make`` under :func:`batch_settings`.

    RB-REPLAY-12.
    """
    _run_machine(batch_machine(make), settings=batch_settings(find_only=find_only))
