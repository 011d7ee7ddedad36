# SPDX-License-Identifier: MIT OR Apache-2.0
"""The replay operation (opt-in): the shipped replay corpus, and how rounds compose.

Skipped, with the reason, for an implementation that answers ``unknown-op``.
Replies are compared within the relative bound the replay corpus states for
the pipeline (docs/replay-corpus.md, "Judging a runtime's replay").
"""

from __future__ import annotations

import copy
import functools
import random
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ssm_rollback_spec.corpus.replay_run import (
    ReplayCase,
    ReplayOffer,
    judge_replay,
    load_replay_cases,
    not_offered,
    replay_offer,
    spoken,
)
from ssm_rollback_spec.harness.failures import NonConformingReply, ReplayMismatch
from ssm_rollback_spec.harness.pytest_plugin import record_distance
from ssm_rollback_spec.harness.replay_wire import ENGINE_PIPELINES, BatchForm, rerouted_entries
from ssm_rollback_spec.tools.shipped import replay_corpus_directory

from .conformance import exchange
from .replay_reference import SMALL_REPLAY, replay_float64

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ssm_rollback_spec.harness.driver import Implementation


_NOT_OFFERED: Final = "replay is opt-in, and this implementation does not offer it"
_BATCH_NOT_OFFERED: Final = "replay_batch is opt-in, and this implementation does not offer it"
_NONE_OFFERED: Final = (
    "the implementation's describe offers no pipeline of the replay corpus for pre-conv rows"
)


@dataclass(frozen=True)
class _Corpus:
    """The shipped replay corpus, split by operation, with the bound of each pipeline."""

    #: The cases of ``replay``.
    cases: list[ReplayCase]
    #: The batch cases (``replay_batch``, opt-in apart from ``replay``).
    batch_cases: list[ReplayCase]
    #: The batch cases judged against the implementation itself (``batch_alone.json``).
    alone_cases: list[ReplayCase]
    #: The bound per pipeline for a batch against the same sequences alone, as
    #: ``batch_alone.json`` states it (0 but where an engine's kernels differ).
    alone_bound: dict[str, float]
    #: The bound per pipeline for an implementation compared with itself, as the
    #: corpus states it ("self", or else "kernel").
    bound: dict[str, float]


@functools.cache
def _corpus() -> _Corpus:
    # Read when a replay property first runs, not when the suite is collected:
    # a run that selects none of them (``check --clause RB-PARSE``) never reads it.
    # The refusals (refusals.json) have a property of their own.
    every = [case for case in load_replay_cases(replay_corpus_directory()) if case.refused is None]
    cases = [case for case in every if case.request["op"] == "replay"]
    return _Corpus(
        cases,
        [case for case in every if case.request["op"] == "replay_batch" and not case.alone],
        [case for case in every if case.alone],
        {case.pipeline: case.tolerance for case in every if case.alone},
        {case.pipeline: case.self_tolerance or case.tolerance for case in cases},
    )


def _offer(impl: Implementation, /) -> ReplayOffer | None:
    # What the implementation's describe says its replay computes (docs/protocol.md).
    return replay_offer(impl.request({"op": "describe"}))


def _pipelines(impl: Implementation, /) -> list[str]:
    offer = _offer(impl)
    if offer is None:
        return sorted(_corpus().bound)
    if "pre-conv" not in offer.layouts:
        return []
    return sorted(set(_corpus().bound) & offer.pipelines)


def _replay(
    impl: Implementation, request: dict[str, object], /
) -> tuple[list[dict[str, object]], dict[str, object]]:
    """The states an implementation replies, and its reply; skips when replay is not offered."""
    # Its pipeline named as the describe lists it (an old name, for an older adapter).
    reply = impl.request(spoken(request, _offer(impl)))
    error = reply.get("error")
    batch = request["op"] == "replay_batch"
    if isinstance(error, dict) and error.get("kind") == "unknown-op":
        pytest.skip(_BATCH_NOT_OFFERED if batch else _NOT_OFFERED)
    value = reply.get("ok")
    states = value.get("states") if isinstance(value, dict) else None
    if batch:
        steps = request["steps"]
        assert isinstance(steps, list)
        count, each = sum(len(step["batch"]) for step in steps), "entry of its steps"
    else:
        rounds = request["rounds"]
        assert isinstance(rounds, list)
        count, each = len(rounds), "rounds"
    if not isinstance(states, list) or len(states) != count:
        shape = f'{{"ok":{{"states":[...]}}}} with one state for each of its {count} {each}'
        raise NonConformingReply(request, reply, shape)
    return states, reply


def _judged(
    request: dict[str, object],
    reply: dict[str, object],
    expected: list[dict[str, object]],
    clauses: Sequence[str],
    source: str,
    more: Sequence[str] = (),
    /,
    *,
    bound: float | None = None,
    bounded: frozenset[int] | None = None,
) -> ReplayMismatch | None:
    """The mismatch of the states in ``reply`` with ``expected``, or None within the bound.

    The bound is the pipeline's for an implementation compared with itself,
    unless given (a shipped case's own, against the model); with ``bounded``,
    only those states have it, and the others must be bit for bit. The
    distance measured goes into ``check``'s report.
    """
    pipeline = str(request["pipeline"])
    bound = _corpus().bound[pipeline] if bound is None else bound
    case = ReplayCase(
        "property", list(clauses), pipeline, request, expected, bound, bounded=bounded
    )
    value = reply.get("ok")
    assert isinstance(value, dict)
    result = judge_replay(case, {"ok": {"states": value["states"]}})
    if result.distance is not None and result.bound is not None:
        record_distance(result.distance, result.bound)
    if result.outcome == "passed":
        return None
    return ReplayMismatch(
        request,
        reply,
        # The clauses are the report's to show, once.
        re.sub(r" \(RB-[^)]*\)$", "", result.detail.splitlines()[0]),
        allowed=f"the states of {source}, each field within {bound:g} of them relative to "
        f"its largest value (the bound for {pipeline})"
        + (
            ""
            if bounded is None
            else ", where a one-token prompt chunk of its sequence ran beside other rows "
            "before, and else bit for bit"
        ),
        clauses=clauses,
        more=more,
    )


def _same(
    request: dict[str, object],
    reply: dict[str, object],
    expected: list[dict[str, object]],
    clauses: Sequence[str],
    source: str,
    /,
    *,
    bound: float | None = None,
    bounded: frozenset[int] | None = None,
) -> None:
    mismatch = _judged(request, reply, expected, clauses, source, bound=bound, bounded=bounded)
    if mismatch is not None:
        raise mismatch


@pytest.mark.clause("RB-REPLAY-1", "RB-REPLAY-4", "RB-REPLAY-6", "RB-REPLAY-10")
def test_every_shipped_replay_case_is_rebuilt_within_its_bound(impl: Implementation) -> None:
    # Every case the implementation offers runs; the run is blamed on the
    # failing cases' own clauses alone. The first failure is shown whole, the
    # others named in one line.
    _shipped_cases_pass(impl, _corpus().cases, "replay")


@pytest.mark.clause("RB-REPLAY-12")
def test_every_shipped_batch_gives_each_sequence_its_own_replay(
    impl: Implementation,
) -> None:
    # The same over replay_batch: each entry's state after its step is its
    # sequence's replay alone; skipped when replay_batch is not offered.
    _shipped_cases_pass(impl, _corpus().batch_cases, "batch")


@pytest.mark.clause("RB-REPLAY-13")
def test_every_shipped_batch_gives_each_sequence_what_it_has_alone(
    impl: Implementation,
) -> None:
    # Each case runs a batch, then each of its sequences alone in a batch of
    # one with the same steps, in one request: each entry's state must be the
    # same both times, bit for bit. Skipped when replay_batch is not offered.
    offer = _offer(impl)
    offered = [case for case in _corpus().alone_cases if not_offered(case, offer) is None]
    if not offered:
        pytest.skip("the implementation's describe offers none of the shipped batches run alone")
    failed: list[tuple[ReplayCase, dict[str, object], str]] = []
    for case in offered:
        _, reply = _replay(impl, case.request)
        result = judge_replay(case, reply)
        if result.distance is not None and result.bound is not None:
            record_distance(result.distance, result.bound)
        if result.outcome != "passed":
            failed.append((case, reply, result.detail.splitlines()[0]))
    if failed:
        first, reply, detail = failed[0]
        raise ReplayMismatch(
            first.request,
            reply,
            # The clause is the report's to show, once.
            re.sub(r" \(RB-[^)]*\)$", "", detail),
            allowed=f"each entry's state the same in the batch as alone, each field within "
            f"{first.tolerance:g} of it relative to its largest value (shipped as case "
            f"{first.case_id})",
            clauses=first.clauses,
            more=[case.case_id for case, _, _ in failed[1:]],
        )


def _shipped_cases_pass(impl: Implementation, cases: Sequence[ReplayCase], kind: str, /) -> None:
    offer = _offer(impl)
    offered = [case for case in cases if not_offered(case, offer) is None]
    if not offered:
        pytest.skip(f"the implementation's describe offers none of the shipped {kind} cases")
    failed: list[tuple[ReplayCase, dict[str, object]]] = []
    for case in offered:
        _, reply = _replay(impl, case.request)
        # Against the model, within the case's own bound, as vectors run judges it.
        judged = _judged(case.request, reply, case.expected, case.clauses, "", bound=case.tolerance)
        if judged is not None:
            failed.append((case, reply))
    if not failed:
        return
    (first, reply), others = failed[0], [case for case, _ in failed[1:]]
    clauses = {clause for case, _ in failed for clause in case.clauses}
    mismatch = _judged(
        first.request,
        reply,
        first.expected,
        sorted(clauses),
        f"the model, shipped as case {first.case_id}",
        [case.case_id for case in others],
        bound=first.tolerance,
    )
    assert mismatch is not None
    raise mismatch


def _hex(numerator: int, denominator: int, /) -> str:
    # Small dyadic values: exact in BF16, so both pipelines hold them as drawn.
    return (numerator / denominator).hex()


@st.composite
def _layers(draw: st.DrawFn) -> dict[str, object]:
    nk = draw(st.integers(1, 2))
    dims = {
        "num_key_heads": nk,
        "key_head_dim": draw(st.integers(1, 3)),
        "num_value_heads": nk * draw(st.integers(1, 2)),
        "value_head_dim": draw(st.integers(1, 3)),
        "conv_kernel": draw(st.integers(2, 4)),
    }
    conv_dim = 2 * nk * dims["key_head_dim"] + dims["num_value_heads"] * dims["value_head_dim"]
    # The values come from a drawn seed, so that a failure shrinks in a few
    # steps (the shapes and the seed), not one value at a time.
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))  # noqa: S311 - reproducible, no secret

    def value(low: int, high: int, denominator: int, /) -> str:
        return _hex(rng.randint(low, high), denominator)

    def matrix(rows: int, columns: int, /) -> list[list[str]]:
        return [[value(-64, 64, 64) for _ in range(columns)] for _ in range(rows)]

    heads = dims["num_value_heads"]
    return {
        "op": "replay",
        "layout": "pre-conv",
        "dims": dims,
        "conv_weight": matrix(conv_dim, dims["conv_kernel"]),
        "checkpoint": {
            "conv": matrix(conv_dim, dims["conv_kernel"] - 1),
            "h": [matrix(dims["key_head_dim"], dims["value_head_dim"]) for _ in range(heads)],
        },
        "rows": [
            {
                "qkv": [value(-64, 64, 64) for _ in range(conv_dim)],
                "g": [value(-128, 0, 64) for _ in range(heads)],
                "beta": [value(0, 128, 128) for _ in range(heads)],
                # The raw gate inputs, for an engine pipeline's kernels.
                "a": [value(-64, 64, 64) for _ in range(heads)],
                "b": [value(-64, 64, 64) for _ in range(heads)],
            }
            for _ in range(draw(st.integers(2, 6)))
        ],
        "a_log": [value(-64, 64, 64) for _ in range(heads)],
        "dt_bias": [value(-64, 64, 64) for _ in range(heads)],
    }


def _with_pipeline(
    impl: Implementation, layer: dict[str, object], data: st.DataObject, /
) -> dict[str, object]:
    """The layer with a pipeline the implementation offers; gate inputs kept for an engine's."""
    pipelines = _pipelines(impl)
    if not pipelines:
        pytest.skip(_NONE_OFFERED)
    return _as_pipeline(layer, data.draw(st.sampled_from(pipelines), label="pipeline"))


def _as_pipeline(layer: dict[str, object], pipeline: str, /) -> dict[str, object]:
    # The pipeline follows the op, as a request is written (docs/protocol.md).
    named = {"op": layer["op"], "pipeline": pipeline}
    if pipeline in ENGINE_PIPELINES:
        return named | layer
    rows = [
        {key: value for key, value in row.items() if key not in {"a", "b"}} for row in _rows(layer)
    ]
    kept = {key: value for key, value in layer.items() if key not in {"a_log", "dt_bias"}}
    return named | kept | {"rows": rows}


def _request(layer: dict[str, object], rounds: Sequence[object], /) -> dict[str, object]:
    return {key: value for key, value in layer.items() if key != "rows"} | {"rounds": rounds}


def _rows(layer: dict[str, object], /) -> list[dict[str, object]]:
    rows = layer["rows"]
    assert isinstance(rows, list)
    return rows


def _other_gates(row: dict[str, object], /) -> dict[str, object]:
    # The same row with other gates: g for the model's pipelines, a and b for an engine's.
    return row | {name: [_hex(-1, 2)] * len(row["g"]) for name in ("g", "a", "b") if name in row}  # type: ignore[arg-type]


@pytest.mark.clause("RB-REPLAY-1", "RB-REPLAY-6")
@given(layer=_layers(), data=st.data())
def test_a_round_of_accepted_rows_is_those_rows_decoded_one_round_each(
    impl: Implementation, layer: dict[str, object], data: st.DataObject
) -> None:
    layer = _with_pipeline(impl, layer, data)
    rows = _rows(layer)
    accepted = data.draw(st.integers(1, len(rows)), label="accepted")
    whole = _request(layer, [{"rows": rows, "accepted": accepted}])
    one_by_one = _request(layer, [{"rows": [row], "accepted": 1} for row in rows[:accepted]])
    _, reply = _replay(impl, whole)
    source = "its own replay of the same rows one round each"
    _same(whole, reply, _replay(impl, one_by_one)[0][-1:], ["RB-REPLAY-6"], source)


@pytest.mark.clause("RB-REPLAY-1", "RB-REPLAY-2")
@given(layer=_layers(), data=st.data())
def test_the_rows_past_the_accepted_ones_change_nothing(
    impl: Implementation, layer: dict[str, object], data: st.DataObject
) -> None:
    layer = _with_pipeline(impl, layer, data)
    rows = _rows(layer)
    accepted = data.draw(st.integers(1, len(rows) - 1), label="accepted")
    other = [_other_gates(row) for row in rows[accepted:]]
    first = _request(layer, [{"rows": rows, "accepted": accepted}])
    second = _request(layer, [{"rows": rows[:accepted] + other, "accepted": accepted}])
    _, reply = _replay(impl, second)
    source = "its own replay of the same accepted rows with other rows after them"
    _same(second, reply, _replay(impl, first)[0], ["RB-REPLAY-2"], source)


@pytest.mark.clause("RB-REPLAY-6", "RB-REPLAY-7")
@given(layer=_layers(), data=st.data())
def test_a_trace_resumed_from_a_state_it_reported_goes_on_the_same(
    impl: Implementation, layer: dict[str, object], data: st.DataObject
) -> None:
    layer = _with_pipeline(impl, layer, data)
    rows = _rows(layer)
    # Windows of varying length, with rows of earlier windows still in a ring.
    cuts = sorted(data.draw(st.sets(st.integers(1, len(rows) - 1), max_size=3), label="cuts"))
    windows = [rows[start:end] for start, end in zip([0, *cuts], [*cuts, len(rows)], strict=True)]
    rounds = [
        {"rows": window, "accepted": data.draw(st.integers(1, len(window)), label="accepted")}
        for window in windows
    ]
    whole = _request(layer, rounds)
    states, _ = _replay(impl, whole)
    resume = data.draw(st.integers(1, len(rounds)), label="resume after")
    if resume == len(rounds):
        return
    resumed = _request(layer, rounds[resume:]) | {"checkpoint": states[resume - 1]}
    _, reply = _replay(impl, resumed)
    source = "its own replay of the rounds run whole, from the start"
    _same(resumed, reply, states[resume:], ["RB-REPLAY-7"], source)


#: Exact rescalings (a sign and a power of two, exact in BF16 too) that make
#: each drawn sequence's checkpoint and rows its own.
_SCALES: Final = (1.0, -1.0, 0.5, -0.5, 2.0)


def _scaled(value: object, factor: float, /) -> object:
    if isinstance(value, dict):
        return {key: _scaled(item, factor) for key, item in value.items()}
    if isinstance(value, list):
        return [_scaled(item, factor) for item in value]
    return (float.fromhex(str(value)) * factor).hex()


#: A pool at the protocol's size, and the slots its sequences join there: past 255, the
#: last one, and two pairs an 8-bit slot index takes for one (0 and 256, 255 and 4,095).
#: Its sequences' names are 64 characters, the longest allowed.
_WIDE_POOL: Final = 4096
_WIDE_SLOTS: Final = (0, 255, 256, 4095)


class _DrawnBatch:
    """A ``replay_batch`` request drawn step by step, and each sequence's trace alone.

    The pool has 1 to 3 slots, every one of which may be taken, or 4,096, of
    which a few far apart are (``_WIDE_SLOTS``): large pools, few rows.

    With ``chunks`` (the adapter lists the form ``prompt-chunks``) a joining
    sequence may run a prompt chunk alone (its rows, no window), and go on
    with more chunks in later steps before its first verify.
    """

    def __init__(self, layer: dict[str, object], data: st.DataObject, /, *, chunks: bool) -> None:
        self.layer, self.data, self.rows = layer, data, _rows(layer)
        self.chunks = chunks
        self.slots = data.draw(st.one_of(st.integers(1, 3), st.just(_WIDE_POOL)), label="slots")
        self.joinable = _WIDE_SLOTS if self.slots == _WIDE_POOL else tuple(range(self.slots))
        self.running: dict[str, int] = {}
        #: The running sequences that have not verified yet: their prompt may go on.
        self.prompting: set[str] = set()
        #: Each sequence's own replay request, and which of its rounds each entry is.
        self.alone: dict[str, dict[str, object]] = {}
        self.entries: list[tuple[str, int]] = []
        #: Each sequence's entries, in order: its steps as a batch of one.
        self.solo: dict[str, list[dict[str, object]]] = {}
        self.steps: list[dict[str, object]] = []
        self.tokens = 0

    def _window(self, count: int, /) -> list[dict[str, object]]:
        window = []
        for _ in range(count):
            row = self.rows[self.tokens % len(self.rows)]
            factor = _SCALES[(self.tokens // len(self.rows)) % len(_SCALES)]
            window.append(row | {"qkv": _scaled(row["qkv"], factor)})
            self.tokens += 1
        return window

    def _entry(self, name: str, slot: int, /, *, joins: bool) -> dict[str, object]:
        draw = self.data.draw
        entry: dict[str, object] = {"sequence": name, "slot": slot}
        if joins:
            factor = _SCALES[len(self.alone) % len(_SCALES)]
            entry["checkpoint"] = _scaled(self.layer["checkpoint"], factor)
            self.alone[name] = _request(self.layer, []) | {"checkpoint": entry["checkpoint"]}
            self.solo[name] = []
        rounds = self.alone[name]["rounds"]
        assert isinstance(rounds, list)
        if (joins or name in self.prompting) and (
            prefill := draw(st.integers(0, 2), label="prefill")
        ):
            entry["prefill"] = self._window(prefill)
            rounds.append({"rows": entry["prefill"], "accepted": prefill})
        if not (self.chunks and "prefill" in entry and draw(st.booleans(), label="chunk alone")):
            window = draw(st.integers(1, 4), label="window")
            entry["rows"] = self._window(window)
            entry["accepted"] = draw(st.integers(1, window), label="accepted")
            rounds.append({"rows": entry["rows"], "accepted": entry["accepted"]})
        if draw(st.booleans(), label="finish"):
            entry["finish"] = True
        self.entries.append((name, len(rounds) - 1))
        self.solo[name].append(entry)
        return entry

    def step(self) -> None:
        draw = self.data.draw
        held = set(self.running.values())
        batch = [
            self._entry(name, slot, joins=False)
            for name, slot in sorted(self.running.items())
            if draw(st.booleans(), label=f"{name} scheduled")
        ]
        for slot in self.joinable:
            if slot not in held and draw(st.booleans(), label=f"slot {slot} taken"):
                name = f"s{len(self.alone)}"
                if self.slots == _WIDE_POOL:
                    name = f"{name}-".ljust(64, "x")
                self.running[name] = slot
                batch.append(self._entry(name, slot, joins=True))
        if not batch:
            return
        # The entries' order is drawn, and with it the order of their states.
        order = draw(st.permutations(range(len(batch))), label="order")
        first = len(self.entries) - len(batch)
        drawn = self.entries[first:]
        self.entries[first:] = [drawn[index] for index in order]
        batch = [batch[index] for index in order]
        for entry in batch:
            name = str(entry["sequence"])
            if "rows" in entry or entry.get("finish"):
                self.prompting.discard(name)
            elif self.chunks:
                self.prompting.add(name)
            if entry.get("finish"):
                del self.running[name]
        self.steps.append({"batch": batch})

    def request(self, steps: list[dict[str, object]] | None = None, /) -> dict[str, object]:
        """The request of the drawn steps, or of ``steps``."""
        kept = {key: self.layer[key] for key in ("pipeline", "dims", "conv_weight")}
        gates = {key: self.layer[key] for key in ("a_log", "dt_bias") if key in self.layer}
        chosen = self.steps if steps is None else steps
        return {"op": "replay_batch"} | kept | gates | {"slots": self.slots, "steps": chosen}

    def alone_request(self, name: str, /) -> dict[str, object]:
        """Sequence ``name``'s entries alone: a batch of one with the same steps."""
        return self.request([{"batch": [entry]} for entry in self.solo[name]])


def _drawn_batch(
    impl: Implementation, layer: dict[str, object], data: st.DataObject, /, *, chunks: bool
) -> _DrawnBatch:
    """1 to 4 drawn steps; with ``chunks``, prompt chunks where the adapter offers them."""
    offer = _offer(impl)
    chunks = chunks and offer is not None and BatchForm.PROMPT_CHUNKS.value in offer.batch
    batch = _DrawnBatch(_with_pipeline(impl, layer, data), data, chunks=chunks)
    for _ in range(data.draw(st.integers(1, 4), label="steps")):
        batch.step()
    return batch


@pytest.mark.clause("RB-REPLAY-12")
@given(layer=_layers(), data=st.data())
def test_each_sequence_of_a_drawn_batch_is_its_own_replay_alone(
    impl: Implementation, layer: dict[str, object], data: st.DataObject
) -> None:
    # Sequences join free slots (after a prefill or not), sit steps out,
    # finish and leave their slot to the next, windows of 1 to 4 rows in any
    # order: each entry's state is the implementation's own replay of its
    # sequence alone, in the pipeline's self bound. No prompt chunks: an
    # engine runs a prompt on a path its replay does not take, and the next
    # property judges those against the engine's own batch of one.
    batch = _drawn_batch(impl, layer, data, chunks=False)
    if not batch.steps:
        return
    request = batch.request()
    _, reply = _replay(impl, request)
    alone = {name: _replay(impl, trace)[0] for name, trace in batch.alone.items()}
    expected = [alone[name][index] for name, index in batch.entries]
    source = "its own replay of each sequence alone"
    _same(request, reply, expected, ["RB-REPLAY-12"], source)


@pytest.mark.clause("RB-REPLAY-13")
@given(layer=_layers(), data=st.data())
def test_each_sequence_of_a_drawn_batch_is_what_the_same_adapter_gives_it_alone(
    impl: Implementation, layer: dict[str, object], data: st.DataObject
) -> None:
    # The same drawn batches, with prompt chunks beside verifies where the
    # adapter offers them, judged against the adapter's own replay_batch of
    # each sequence in a batch of one with the same steps: bit for bit, but
    # where an engine's own kernels differ for the same rows (batch_alone.json's
    # bounds), and those only for a sequence from its one-token prompt chunk
    # beside other rows on, as batch_alone.json's rerouted entries. No model of
    # its arithmetic is needed.
    batch = _drawn_batch(impl, layer, data, chunks=True)
    if not batch.steps:
        return
    request = batch.request()
    _, reply = _replay(impl, request)
    alone = {name: _replay(impl, batch.alone_request(name))[0] for name in batch.solo}
    seen: dict[str, int] = {}
    expected = []
    for step in batch.steps:
        entries = step["batch"]
        assert isinstance(entries, list)
        for entry in entries:
            name = entry["sequence"]
            expected.append(alone[name][seen.get(name, 0)])
            seen[name] = seen.get(name, 0) + 1
    source = "its own replay_batch of each sequence alone, with the same steps"
    bound = _corpus().alone_bound.get(str(request["pipeline"]), 0.0)
    steps = [cast("list[dict[str, object]]", step["batch"]) for step in batch.steps]
    rerouted = frozenset(rerouted_entries(steps))
    _same(request, reply, expected, ["RB-REPLAY-13"], source, bound=bound, bounded=rerouted)


def _windows(rows: list[dict[str, object]], data: st.DataObject, /) -> list[dict[str, object]]:
    """Rounds of varying window length, each with its drawn accepted count."""
    cuts = sorted(data.draw(st.sets(st.integers(1, len(rows) - 1), max_size=3), label="cuts"))
    windows = [rows[start:end] for start, end in zip([0, *cuts], [*cuts, len(rows)], strict=True)]
    return [
        {"rows": window, "accepted": data.draw(st.integers(1, len(window)), label="accepted")}
        for window in windows
    ]


@pytest.mark.clause("RB-REPLAY-1", "RB-REPLAY-6")
@given(layer=_layers(), data=st.data())
def test_a_drawn_float64_replay_gives_the_models_states_within_the_bound(
    impl: Implementation, layer: dict[str, object], data: st.DataObject
) -> None:
    # Judged by the model itself (its float64 step, replay_reference.py), not
    # by the implementation against itself: wrong arithmetic fails here.
    pipelines = _pipelines(impl)
    if not pipelines:
        pytest.skip(_NONE_OFFERED)
    if "float64" not in pipelines:
        pytest.skip("the implementation's describe does not offer the float64 pipeline")
    layer = _as_pipeline(layer, "float64")
    request = _request(layer, _windows(_rows(layer), data))
    _, reply = _replay(impl, request)
    rounds = request["rounds"]
    assert isinstance(rounds, list)
    clauses = ["RB-REPLAY-1"] if len(rounds) == 1 else ["RB-REPLAY-1", "RB-REPLAY-6"]
    _same(request, reply, replay_float64(request), clauses, "the model's float64 step")


def _changed(path: tuple[object, ...], value: object, /) -> dict[str, object]:
    """``SMALL_REPLAY`` with the field at ``path`` set to ``value`` (removed when it is ``...``)."""
    request = copy.deepcopy(SMALL_REPLAY)
    parent: Any = request
    for key in path[:-1]:
        parent = parent[key]
    if value is ...:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return request


#: One request for each way docs/protocol.md says a replay is malformed.
_MALFORMED: Final = {
    "a field missing": _changed(("dims",), ...),
    "a row's field missing": _changed(("rounds", 0, "rows", 0, "beta"), ...),
    "an unknown pipeline": _changed(("pipeline",), "float16"),
    "an unknown layout": _changed(("layout",), "sideways"),
    "a dimension of 0": _changed(("dims", "num_key_heads"), 0),
    "value heads not a multiple of key heads": _changed(
        ("dims",),
        {
            "num_key_heads": 2,
            "key_head_dim": 1,
            "num_value_heads": 3,
            "value_head_dim": 1,
            "conv_kernel": 2,
        },
    ),
    "a conv kernel of 1": _changed(("dims", "conv_kernel"), 1),
    "a matrix with a row missing": _changed(("conv_weight",), [["0x1p-1", "0x1p+0"]] * 2),
    "a checkpoint of the wrong shape": _changed(("checkpoint", "h"), [[["0x0p+0", "0x0p+0"]]]),
    "a decimal float": _changed(("conv_weight", 0), ["0.5", "0x1p+0"]),
    "a JSON number for a float": _changed(("conv_weight", 0), [0.5, "0x1p+0"]),
    "an infinite float": _changed(("conv_weight", 0), ["inf", "0x1p+0"]),
    "a NaN": _changed(("rounds", 0, "rows", 0, "g"), ["nan"]),
    "a row of the wrong length": _changed(("rounds", 0, "rows", 0, "qkv"), ["0x0p+0"] * 4),
    "no rounds": _changed(("rounds",), []),
    "a round with no rows": _changed(("rounds", 0, "rows"), []),
    "accepted 0": _changed(("rounds", 0, "accepted"), 0),
    "accepted past the rows": _changed(("rounds", 0, "accepted"), 2),
    "accepted as a string": _changed(("rounds", 0, "accepted"), "1"),
}


@pytest.mark.clause("RB-PROTO-4")
@pytest.mark.parametrize("malformed", sorted(_MALFORMED))
def test_a_malformed_replay_request_is_a_bad_request(impl: Implementation, malformed: str) -> None:
    _replay(impl, dict(SMALL_REPLAY))
    exchange(impl, _MALFORMED[malformed], allowed=[{"error": {"kind": "bad-request"}}])
