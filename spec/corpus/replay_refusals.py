# SPDX-License-Identifier: MIT OR Apache-2.0
"""The replay corpus's refusals, ``refusals.json``: each ``bad-request`` rule at and past its bound.

docs/protocol-replay.md and docs/protocol-replay-batch.md list what makes a
``replay`` or ``replay_batch`` request ``bad-request``. Each rule here is a
pair of cases: ``-at``, the request nearest the rule that it allows (the
largest dimension, the last slot, a name of 64 characters, ``accepted`` equal
to the window), which must be answered with the model's states; and ``-past``,
one step past it, whose only allowed reply is ``bad-request`` (the message is
free). A rule whose nearest allowed request is the base one shares the base's
``-at`` case. The requests are carried whole, as sent: a refusal cannot be
built from a well-formed case.

A rule that holds only for an adapter without a form of entry (a prompt
chunk, for one that does not list ``prompt-chunks``) names the form in
``without_form``: it is sent only where the form is not offered.

The values are small dyadic numbers, so the requests stay short; the
expected states come from the reference pool (:class:`..replay.batch.SlotPool`),
which is the model's replay of each sequence alone, bit for bit (the replay
profile).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Final, NotRequired, TypedDict, cast

from ..replay.batch import SlotPool
from .replay_format import BatchCase, batch_states, state_json

if TYPE_CHECKING:
    import random
    from collections.abc import Callable, Iterator

__all__ = ["REFUSALS_FILE", "RefusalCase", "refusal_cases"]

#: The file of the refusal cases.
REFUSALS_FILE: Final = "refusals.json"

#: What the only allowed reply to a request past a bound is.
_REFUSED: Final = {"error": {"kind": "bad-request"}}

_Json = dict[str, object]


class RefusalCase(TypedDict):
    """One case of ``refusals.json``: a whole request, and the one reply allowed to it.

    ``pipeline`` and ``layout`` are what an adapter's ``describe`` must list
    for the case to be sent, whatever the request holds (a request past a
    rule may name no pipeline at all).
    """

    id: str
    clauses: list[str]
    pipeline: str
    layout: str
    #: Sent only to an adapter whose describe does not list this batch form.
    without_form: NotRequired[str]
    request: _Json
    #: ``{"ok": {"states": [...]}}`` at a bound, ``{"error": {"kind": "bad-request"}}`` past it.
    expected: _Json


def _short(value: float, /) -> str:
    """``value.hex()`` without its fraction's trailing zeros (``0x1.8p-1``): the same float."""
    fraction, exponent = value.hex().split("p")
    fraction = fraction.rstrip("0")
    return f"{fraction}0p{exponent}" if fraction.endswith(".") else f"{fraction}p{exponent}"


def _drawer(rng: random.Random, /) -> Callable[[int, int, int], list[str]]:
    """Lists of ``count`` dyadic values ``k / 8`` with ``k`` drawn in ``[low, high]``, as hex."""

    def values(count: int, low: int, high: int, /) -> list[str]:
        return [_short(rng.randint(low, high) / 8) for _ in range(count)]

    return values


class _Layer:
    """A layer's shape and weights as a request carries them, and rows and states drawn for it."""

    def __init__(self, rng: random.Random, dims: dict[str, int], /) -> None:
        self.values = _drawer(rng)
        self.dims = dims
        self.conv_dim = 2 * dims["num_key_heads"] * dims["key_head_dim"]
        self.conv_dim += dims["num_value_heads"] * dims["value_head_dim"]
        kernel = dims["conv_kernel"]
        self.conv_weight = [self.values(kernel, -8, 8) for _ in range(self.conv_dim)]

    def row(self) -> _Json:
        heads = self.dims["num_value_heads"]
        return {
            "qkv": self.values(self.conv_dim, -16, 16),
            "g": self.values(heads, -8, -1),
            "beta": self.values(heads, 1, 8),
        }

    def rows(self, count: int, /) -> list[_Json]:
        return [self.row() for _ in range(count)]

    def state(self) -> _Json:
        dims = self.dims
        return {
            "conv": [self.values(dims["conv_kernel"] - 1, -8, 8) for _ in range(self.conv_dim)],
            "h": [
                [self.values(dims["value_head_dim"], -8, 8) for _ in range(dims["key_head_dim"])]
                for _ in range(dims["num_value_heads"])
            ],
        }

    def batch(self, slots: int, steps: list[list[_Json]], /) -> _Json:
        return {
            "op": "replay_batch",
            "pipeline": "float64",
            "dims": dict(self.dims),
            "conv_weight": self.conv_weight,
            "slots": slots,
            "steps": [{"batch": batch} for batch in steps],
        }

    def replay(self, rounds: list[_Json], /) -> _Json:
        return {
            "op": "replay",
            "pipeline": "float64",
            "layout": "pre-conv",
            "dims": dict(self.dims),
            "conv_weight": self.conv_weight,
            "checkpoint": self.state(),
            "rounds": rounds,
        }


def _states(request: _Json, /) -> list[object]:
    """The model's states for a well-formed float64 pre-conv request, one a round or an entry."""
    if request["op"] == "replay":
        # A replay is a batch of one sequence, one entry a round.
        rounds = cast("list[_Json]", request["rounds"])
        steps: list[_Json] = [
            {
                "batch": [
                    {"sequence": "r", "slot": 0}
                    | ({"checkpoint": request["checkpoint"]} if i == 0 else {})
                    | r
                ]
            }
            for i, r in enumerate(rounds)
        ]
        slots = 1
    else:
        steps = cast("list[_Json]", request["steps"])
        slots = cast("int", request["slots"])
    windows = [
        len(cast("list[object]", entry.get("rows", [])))
        for step in steps
        for entry in cast("list[_Json]", step["batch"])
    ]
    case = {
        "pipeline": "float64",
        "dims": request["dims"],
        "conv_weight": request["conv_weight"],
        "slots": slots,
        "k_ceiling": max([1, *windows]),
        "steps": steps,
    }
    return [state_json(state) for state in batch_states(cast("BatchCase", case), SlotPool)]


def _changed(request: _Json, path: tuple[object, ...], value: object, /) -> _Json:
    """``request`` with the field at ``path`` set to ``value`` (removed when it is ``...``)."""
    out = copy.deepcopy(request)
    parent: object = out
    for key in path[:-1]:
        parent = parent[key]  # type: ignore[index]
    if value is ...:
        del parent[path[-1]]  # type: ignore[attr-defined]
    else:
        parent[path[-1]] = value  # type: ignore[index]
    return out


_SMALL: Final = {
    "num_key_heads": 1,
    "key_head_dim": 1,
    "num_value_heads": 1,
    "value_head_dim": 1,
    "conv_kernel": 2,
}


def _replay_rules(rng: random.Random, /) -> Iterator[tuple[str, _Json | None, _Json]]:
    """Each ``replay`` rule: its name, the request at its bound (None: the base's), one past it."""
    small = _Layer(rng, dict(_SMALL))
    base = small.replay([{"rows": small.rows(2), "accepted": 1}])
    yield "replay-base", base, _changed(base, ("dims",), ...)
    yield "replay-row-field", None, _changed(base, ("rounds", 0, "rows", 0, "beta"), ...)
    yield "replay-pipeline", None, _changed(base, ("pipeline",), "float32")
    yield "replay-layout", None, _changed(base, ("layout",), "pre_conv")
    for name in _SMALL:
        if name != "conv_kernel":
            yield f"replay-{name.replace('_', '-')}-0", None, _changed(base, ("dims", name), 0)
    # The largest dimension, and one past it, each with the matrices its dims give.
    widest, past = (_Layer(rng, dict(_SMALL) | {"value_head_dim": size}) for size in (4096, 4097))
    yield (
        "replay-value-head-dim-4096",
        widest.replay([{"rows": widest.rows(1), "accepted": 1}]),
        past.replay([{"rows": past.rows(1), "accepted": 1}]),
    )
    two = _Layer(rng, dict(_SMALL) | {"num_key_heads": 2, "num_value_heads": 4})
    three = _Layer(rng, dict(_SMALL) | {"num_key_heads": 2, "num_value_heads": 3})
    yield (
        "replay-value-heads-a-multiple",
        two.replay([{"rows": two.rows(1), "accepted": 1}]),
        three.replay([{"rows": three.rows(1), "accepted": 1}]),
    )
    one = _Layer(rng, dict(_SMALL) | {"conv_kernel": 1})
    yield "replay-conv-kernel-1", None, one.replay([{"rows": one.rows(1), "accepted": 1}])
    yield "replay-conv-weight-rows", None, _changed(base, ("conv_weight",), base["conv_weight"][:2])  # type: ignore[index]
    yield "replay-checkpoint-h", None, _changed(base, ("checkpoint", "h"), [[["0x0p+0", "0x0p+0"]]])
    yield "replay-qkv-length", None, _changed(base, ("rounds", 0, "rows", 0, "qkv"), ["0x0p+0"] * 4)
    yield "replay-g-length", None, _changed(base, ("rounds", 0, "rows", 0, "g"), ["-0x1p-3"] * 2)
    yield "replay-json-number", None, _changed(base, ("conv_weight", 0, 0), 0.5)
    yield "replay-decimal-string", None, _changed(base, ("conv_weight", 0, 0), "0.5")
    yield "replay-nan", None, _changed(base, ("rounds", 0, "rows", 0, "g", 0), "nan")
    # The largest finite float in a row past the accepted one (never read), and 2**1024.
    unread = ("rounds", 0, "rows", 1, "qkv", 0)
    yield (
        "replay-largest-finite",
        _changed(base, unread, "0x1.fffffffffffffp+1023"),
        _changed(base, unread, "0x1p+1024"),
    )
    yield "replay-rounds", None, _changed(base, ("rounds",), [])
    yield "replay-rows", None, _changed(base, ("rounds", 0, "rows"), [])
    yield "replay-accepted-1", None, _changed(base, ("rounds", 0, "accepted"), 0)
    yield (
        "replay-accepted-all",
        _changed(base, ("rounds", 0, "accepted"), 2),
        _changed(base, ("rounds", 0, "accepted"), 3),
    )
    yield "replay-accepted-string", None, _changed(base, ("rounds", 0, "accepted"), "1")


def _batch_rules(rng: random.Random, /) -> Iterator[tuple[str, _Json | None, _Json]]:
    """Each ``replay_batch`` rule: its name, its request at the bound (None: the base), past it."""
    layer = _Layer(rng, dict(_SMALL))

    def entry(sequence: str, slot: int, /, *, joins: bool = False, **more: object) -> _Json:
        out: _Json = {"sequence": sequence, "slot": slot}
        if joins:
            out["checkpoint"] = layer.state()
        return out | {"rows": layer.rows(2), "accepted": 1} | more

    base = layer.batch(
        2, [[entry("a", 0, joins=True), entry("b", 1, joins=True)], [entry("a", 0), entry("b", 1)]]
    )
    yield "batch-base", base, _changed(base, ("slots",), ...)
    yield "batch-steps-missing", None, _changed(base, ("steps",), ...)
    yield "batch-row-field", None, _changed(base, ("steps", 1, "batch", 0, "rows", 0, "beta"), ...)
    yield (
        "batch-checkpoint-float",
        None,
        _changed(base, ("steps", 0, "batch", 1, "checkpoint", "h", 0, 0, 0), "inf"),
    )
    yield (
        "batch-slots-1",
        layer.batch(1, [[entry("a", 0, joins=True)]]),
        _changed(base, ("slots",), 0),
    )
    yield (
        "batch-slots-4096",
        layer.batch(4096, [[entry("a", 4095, joins=True)], [entry("a", 4095)]]),
        layer.batch(4097, [[entry("a", 4096, joins=True)], [entry("a", 4096)]]),
    )
    yield "batch-slots-integer", None, _changed(base, ("slots",), "2")
    yield "batch-steps-empty", None, _changed(base, ("steps",), [])
    yield "batch-batch-empty", None, _changed(base, ("steps", 1, "batch"), [])
    yield (
        "batch-last-slot",
        layer.batch(2, [[entry("a", 1, joins=True)]]),
        layer.batch(2, [[entry("a", 2, joins=True)]]),
    )
    yield "batch-slot-negative", None, _changed(base, ("steps", 0, "batch", 1, "slot"), -1)
    # A slot freed by a finish is free after its step: the next step may take it, this one not.
    yield (
        "batch-slot-freed-after-its-step",
        layer.batch(
            2,
            [
                [entry("a", 0, joins=True, finish=True), entry("b", 1, joins=True)],
                [entry("c", 0, joins=True), entry("b", 1)],
            ],
        ),
        layer.batch(
            2,
            [[entry("a", 0, joins=True, finish=True), entry("c", 0, joins=True)]],
        ),
    )
    yield "batch-slot-held", None, _changed(base, ("steps", 0, "batch", 1, "slot"), 0)
    yield (
        "batch-first-checkpoint",
        None,
        _changed(base, ("steps", 0, "batch", 0, "checkpoint"), ...),
    )
    yield (
        "batch-later-checkpoint",
        None,
        _changed(base, ("steps", 1, "batch", 0, "checkpoint"), layer.state()),
    )
    # A prefill on a first entry is allowed; after the sequence verified, for every adapter not.
    yield (
        "batch-prefill-after-a-verify",
        _changed(base, ("steps", 0, "batch", 0, "prefill"), layer.rows(1)),
        _changed(base, ("steps", 1, "batch", 0, "prefill"), layer.rows(1)),
    )
    yield "batch-prefill-empty", None, _changed(base, ("steps", 0, "batch", 0, "prefill"), [])
    chunk_after = copy.deepcopy(base)
    chunk_after["steps"][1]["batch"][0] = {"sequence": "a", "slot": 0, "prefill": layer.rows(1)}  # type: ignore[index]
    yield "batch-prompt-chunk-after-a-verify", None, chunk_after
    yield "batch-moves-slot", None, _changed(base, ("steps", 1, "batch", 1, "slot"), 0)
    yield "batch-twice-in-a-step", None, _changed(base, ("steps", 1, "batch", 1), entry("a", 0))
    yield (
        "batch-back-after-finish",
        None,
        _changed(base, ("steps", 0, "batch", 0, "finish"), True),  # noqa: FBT003 (a field's value)
    )
    yield "batch-finish-integer", None, _changed(base, ("steps", 1, "batch", 0, "finish"), 1)
    yield "batch-finish-null", None, _changed(base, ("steps", 1, "batch", 0, "finish"), None)
    # Names of 1 to 64 characters, counted in code points: 64 of U+00E9 are 128 UTF-8 bytes.
    for name, length in (("a", 0), ("x" * 64, 65), ("\u00e9" * 64, 65)):
        at = layer.batch(1, [[entry(name, 0, joins=True)], [entry(name, 0)]])
        past_name = name[0] * length if length else ""
        past = layer.batch(1, [[entry(past_name, 0, joins=True)], [entry(past_name, 0)]])
        label = "ascii" if name.isascii() else "non-ascii"
        yield f"batch-name-{len(name)}-{label}", at, past
    yield "batch-name-string", None, _changed(base, ("steps", 0, "batch", 0, "sequence"), 7)
    yield (
        "batch-accepted-all",
        _changed(base, ("steps", 1, "batch", 0, "accepted"), 2),
        _changed(base, ("steps", 1, "batch", 0, "accepted"), 3),
    )
    yield "batch-accepted-1", None, _changed(base, ("steps", 1, "batch", 0, "accepted"), 0)
    yield "batch-rows-empty", None, _changed(base, ("steps", 1, "batch", 0, "rows"), [])


def _prompt_chunk_rules(rng: random.Random, /) -> Iterator[tuple[str, _Json]]:
    """The requests that are ``bad-request`` only for an adapter without ``prompt-chunks``."""
    layer = _Layer(rng, dict(_SMALL))
    chunk = {"sequence": "a", "slot": 0, "checkpoint": layer.state(), "prefill": layer.rows(1)}
    then = {"sequence": "a", "slot": 0, "prefill": layer.rows(1), "rows": layer.rows(1)}
    yield "batch-prompt-chunk-without-the-form", layer.batch(1, [[chunk], [then | {"accepted": 1}]])


def refusal_cases(rng: random.Random, /) -> list[RefusalCase]:
    """Every rule's pair of cases: ``-at`` (the model's states) and ``-past`` (``bad-request``)."""
    out: list[RefusalCase] = []

    def add(name: str, request: _Json, clause: str, /, *, refused: bool) -> None:
        expected = _REFUSED if refused else {"ok": {"states": _states(request)}}
        out.append(
            RefusalCase(
                id=f"{len(out):03d}-{name}",
                # The replay clause too, so that a run of --clause RB-REPLAY sends it.
                clauses=["RB-PROTO-4", clause],
                pipeline="float64",
                layout="pre-conv",
                request=request,
                expected=cast("_Json", expected),
            )
        )

    for rules, clause in ((_replay_rules(rng), "RB-REPLAY-1"), (_batch_rules(rng), "RB-REPLAY-12")):
        for name, at, past in rules:
            if at is not None:
                add(f"{name}-at", at, clause, refused=False)
            add(f"{name}-past", past, clause, refused=True)
    for name, request in _prompt_chunk_rules(rng):
        add(name, request, "RB-REPLAY-12", refused=True)
        out[-1]["without_form"] = "prompt-chunks"
    return out
