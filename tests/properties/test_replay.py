# SPDX-License-Identifier: MIT OR Apache-2.0
"""The replay operation (opt-in): the shipped replay corpus, and how rounds compose.

Skipped, with the reason, for an implementation that answers ``unknown-op``.
Replies are compared within the relative bound the replay corpus states for
the pipeline (docs/replay.md, "Judging a runtime's replay").
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Final

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
)
from ssm_rollback_spec.harness.replay_wire import ENGINE_PIPELINES
from ssm_rollback_spec.tools.shipped import replay_corpus_directory

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ssm_rollback_spec.harness.driver import Implementation

_CASES: Final = load_replay_cases(replay_corpus_directory())
#: The bound per pipeline for an implementation compared with itself, as the
#: corpus states it ("self", or else "kernel").
_BOUND: Final = {case.pipeline: case.self_tolerance or case.tolerance for case in _CASES}
_NOT_OFFERED: Final = "replay is opt-in, and this implementation does not offer it"
_NONE_OFFERED: Final = (
    "the implementation's describe offers no pipeline of the replay corpus for pre-conv rows"
)


def _offer(impl: Implementation, /) -> ReplayOffer | None:
    # What the implementation's describe says its replay computes (docs/protocol.md).
    return replay_offer(impl.request({"op": "describe"}))


def _pipelines(impl: Implementation, /) -> list[str]:
    offer = _offer(impl)
    if offer is None:
        return sorted(_BOUND)
    if "pre-conv" not in offer.layouts:
        return []
    return sorted(set(_BOUND) & offer.pipelines)


def _replay(impl: Implementation, request: dict[str, object], /) -> list[dict[str, object]]:
    reply = impl.request(request)
    error = reply.get("error")
    if isinstance(error, dict) and error.get("kind") == "unknown-op":
        pytest.skip(_NOT_OFFERED)
    value = reply.get("ok")
    states = value.get("states") if isinstance(value, dict) else None
    rounds = request["rounds"]
    assert isinstance(rounds, list)
    assert isinstance(states, list), f"replied {reply} to a replay request"
    assert len(states) == len(rounds), f"{len(states)} states for {len(rounds)} rounds"
    return states


def _same(
    request: dict[str, object],
    got: list[dict[str, object]],
    expected: list[dict[str, object]],
    clauses: list[str],
    /,
) -> None:
    pipeline = str(request["pipeline"])
    case = ReplayCase("property", clauses, pipeline, request, expected, _BOUND[pipeline])
    result = judge_replay(case, {"ok": {"states": got}})
    assert result.outcome == "passed", result.detail


@pytest.mark.clause("RB-REPLAY-1", "RB-REPLAY-4", "RB-REPLAY-6", "RB-REPLAY-10")
def test_every_shipped_replay_case_is_rebuilt_within_its_bound(impl: Implementation) -> None:
    offer = _offer(impl)
    offered = [case for case in _CASES if not_offered(case, offer) is None]
    if not offered:
        pytest.skip("the implementation's describe offers none of the shipped replay cases")
    for case in offered:
        states = _replay(impl, case.request)
        result = judge_replay(case, {"ok": {"states": states}})
        assert result.outcome == "passed", f"{case.case_id}: {result.detail}"


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
    pipeline = data.draw(st.sampled_from(pipelines), label="pipeline")
    if pipeline in ENGINE_PIPELINES:
        return layer | {"pipeline": pipeline}
    rows = [
        {key: value for key, value in row.items() if key not in {"a", "b"}} for row in _rows(layer)
    ]
    kept = {key: value for key, value in layer.items() if key not in {"a_log", "dt_bias"}}
    return kept | {"pipeline": pipeline, "rows": rows}


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
    _same(whole, _replay(impl, whole), _replay(impl, one_by_one)[-1:], ["RB-REPLAY-6"])


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
    _same(first, _replay(impl, second), _replay(impl, first), ["RB-REPLAY-1"])


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
    states = _replay(impl, whole)
    resume = data.draw(st.integers(1, len(rounds)), label="resume after")
    if resume == len(rounds):
        return
    resumed = _request(layer, rounds[resume:]) | {"checkpoint": states[resume - 1]}
    _same(resumed, _replay(impl, resumed), states[resume:], ["RB-REPLAY-7"])
