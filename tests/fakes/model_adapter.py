# SPDX-License-Identifier: MIT OR Apache-2.0
"""Offers ``model``: ``python -m tests.fakes.model_adapter [WRONG]``, a tiny GDN model in float64.

The model is one Gated DeltaNet layer of the replay model
(:mod:`ssm_rollback_spec.replay.layer`, float64) between a fixed embedding
(each token's pre-conv q, k, v, its z and its gate inputs a and b) and a
fixed output projection onto a vocabulary of 32 tokens, all drawn once from
a fixed seed. It rolls back both ways docs/protocol-model.md names, as
an engine would:

- ``snapshot``: the state before each of a sequence's last 4 tokens is kept,
  and a rollback of n tokens restores the one n tokens back;
- ``checkpoint``: the state before each decode a sequence takes part in is
  kept, and a rollback restores it and decodes the window's kept tokens again.

Every token is decoded one after another, so a rolled-back sequence's logits
are a plain decode's bit for bit, and the bound it declares is 0. WRONG makes
one rollback mistake:

- ``other-sequence``: a rollback restores the state of the sequence in the
  next slot that holds one (its own when it is alone);
- ``one-too-many``: a rollback of n tokens keeps one token too many (the
  state n - 1 tokens back) while the sequence's length moves back by n;
- ``stale-checkpoint``: the checkpoint is saved only before a sequence's
  first decode and after each rollback, so after a window that kept every
  token it restores a state from before that window.

It serves the reference (:mod:`ssm_rollback_spec.rollback`) for every other op.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import numpy as np

from ssm_rollback_spec import rollback
from ssm_rollback_spec.harness import protocol
from ssm_rollback_spec.harness.adapter import respond
from ssm_rollback_spec.harness.model_wire import (
    DecodeResult,
    FinishResult,
    ModelOffer,
    ModelRequest,
    ModelResult,
    RollbackResult,
    RollbackWay,
    decode_model,
    encode_model_results,
)
from ssm_rollback_spec.replay.layer import (
    GdnLayer,
    LayerState,
    Pipeline,
    TokenInput,
    gate_and_beta,
    gated_output,
    read_out,
)
from ssm_rollback_spec.replay.paths import step
from tests.fakes.replay_adapter import serve_fake

if TYPE_CHECKING:
    from ssm_rollback_spec.replay.portable import Array

__all__ = ["DESCRIBE", "VOCAB", "WRONG", "TinyModel", "main", "reply"]

WRONG: Final = ("other-sequence", "one-too-many", "stale-checkpoint")

VOCAB: Final = 32
_SEQUENCES: Final = 3
_DEPTH: Final = 4
_SEED: Final = 44

#: The ``describe`` reply: the reference's, with the model this adapter loaded.
DESCRIBE: Final = {
    "name": "tiny GDN model (tests/fakes/model_adapter.py)",
    "usize_bits": 64,
    "model": {
        "name": "tiny-gdn-32",
        "vocab": VOCAB,
        "sequences": _SEQUENCES,
        "rollback": ["snapshot", "checkpoint"],
        "snapshot_depth": _DEPTH,
        "bound": "0x0.0p+0",
    },
}

_OFFER: Final = ModelOffer(
    name="tiny-gdn-32",
    vocab=VOCAB,
    sequences=_SEQUENCES,
    rollback=[RollbackWay.SNAPSHOT, RollbackWay.CHECKPOINT],
    snapshot_depth=_DEPTH,
    bound=0.0,
)


class TinyModel:
    """The fixed weights: an embedding, one float64 GDN layer and an output projection."""

    def __init__(self) -> None:
        rng = np.random.default_rng(_SEED)
        self.layer = GdnLayer(
            num_key_heads=1,
            key_head_dim=4,
            num_value_heads=2,
            value_head_dim=4,
            conv_kernel=4,
            conv_weight=rng.uniform(-1, 1, (16, 4)),
            a_log=rng.uniform(-1, 0.5, 2),
            dt_bias=rng.uniform(-0.5, 0.5, 2),
            norm_weight=rng.uniform(0.5, 1.5, 4),
            pipeline=Pipeline.FLOAT64,
        )
        self.embedding = [
            TokenInput(
                qkv=rng.normal(0, 1, 16),
                z=rng.normal(0, 1, 8),
                a=rng.normal(0, 1, 2),
                b=rng.normal(0, 1, 2),
            )
            for _ in range(VOCAB)
        ]
        self.output: Array = rng.normal(0, 1, (VOCAB, 8))

    def empty(self) -> LayerState:
        """A sequence that has seen no token."""
        return self.layer.zero_state(Pipeline.FLOAT64)

    def token(self, state: LayerState, token: int, /) -> tuple[LayerState, list[float]]:
        """One token decoded from ``state``: the new state and the token's logits."""
        embedded = self.embedding[token]
        g, beta = gate_and_beta(self.layer, embedded, Pipeline.FLOAT64)
        state, post = step(self.layer, state, embedded.qkv, g, beta)
        out = gated_output(self.layer, read_out(self.layer, state.h, post), embedded.z)
        logits: list[float] = [float(value) for value in self.output @ out]
        return state, logits


_MODEL: Final = TinyModel()


@dataclass
class _Sequence:
    """One sequence's state in its slot, and what each way keeps to roll it back."""

    state: LayerState
    length: int = 0
    #: The state before each of the last ``_DEPTH`` tokens, oldest first.
    snapshots: list[LayerState] = field(default_factory=list)
    #: The state before the checkpoint's window, and the window's tokens kept since.
    checkpoint: LayerState | None = None
    window: list[int] = field(default_factory=list)


class _Engine:
    """One request's engine: a pool of slots, each sequence in the first free one."""

    def __init__(self, way: RollbackWay, how: str | None, /) -> None:
        self.way, self.how = way, how
        self.slots: list[str | None] = [None] * _SEQUENCES
        self.sequences: dict[str, _Sequence] = {}

    def _other(self, name: str, /) -> _Sequence:
        # The sequence in the next slot that holds one (wrong on purpose).
        start = self.slots.index(name)
        for offset in range(1, _SEQUENCES):
            holder = self.slots[(start + offset) % _SEQUENCES]
            if holder is not None:
                return self.sequences[holder]
        return self.sequences[name]

    def decode(self, entries: list[tuple[str, list[int]]], /) -> DecodeResult:
        logits = []
        for name, tokens in entries:
            if name not in self.sequences:
                self.slots[self.slots.index(None)] = name
                self.sequences[name] = _Sequence(_MODEL.empty())
            sequence = self.sequences[name]
            stale = self.how == "stale-checkpoint" and sequence.checkpoint is not None
            if not stale:
                sequence.checkpoint = sequence.state
            sequence.window = list(tokens)
            rows = []
            for token in tokens:
                sequence.snapshots = [*sequence.snapshots, sequence.state][-_DEPTH:]
                sequence.state, row = _MODEL.token(sequence.state, token)
                rows.append(row)
            sequence.length += len(tokens)
            logits.append(rows)
        return DecodeResult(kind="decode", logits=logits)

    def rollback(self, name: str, tokens: int, /) -> RollbackResult:
        sequence = self.sequences[name]
        source = self._other(name) if self.how == "other-sequence" else sequence
        back = tokens - 1 if self.how == "one-too-many" else tokens
        if self.way is RollbackWay.SNAPSHOT:
            if tokens > len(sequence.snapshots):
                return RollbackResult(kind="rollback", accepted=False)
            if back > len(source.snapshots):
                source = sequence
            if back:
                sequence.state = source.snapshots[-back]
            sequence.snapshots = sequence.snapshots[:-tokens]
        else:
            if sequence.checkpoint is None or tokens > len(sequence.window):
                return RollbackResult(kind="rollback", accepted=False)
            if source.checkpoint is None:
                source = sequence
            kept = sequence.window[: len(sequence.window) - back]
            state = source.checkpoint
            assert state is not None
            for token in kept:
                state = _MODEL.token(state, token)[0]
            sequence.state = state
            sequence.window = sequence.window[: len(sequence.window) - tokens]
            if self.how == "stale-checkpoint":
                sequence.checkpoint, sequence.window = sequence.state, []
        sequence.length -= tokens
        return RollbackResult(kind="rollback", accepted=True)

    def finish(self, name: str, /) -> FinishResult:
        self.slots[self.slots.index(name)] = None
        del self.sequences[name]
        return FinishResult(kind="finish")


def run_script(request: ModelRequest, how: str | None = None, /) -> list[ModelResult]:
    """Each step's result, from empty sequences, rolled back the request's way."""
    engine = _Engine(request["rollback"], how)
    results: list[ModelResult] = []
    for item in request["script"]:
        if item["kind"] == "decode":
            entries = [(entry["sequence"], entry["tokens"]) for entry in item["entries"]]
            results.append(engine.decode(entries))
        elif item["kind"] == "rollback":
            results.append(engine.rollback(item["sequence"], item["tokens"]))
        else:
            results.append(engine.finish(item["sequence"]))
    return results


def reply(line: str, how: str | None, /) -> dict[str, object]:
    """The reply to one request line: ``model`` and ``describe`` here, the rest the reference's."""
    try:
        request = json.loads(line)
    except ValueError:
        return respond(rollback, line)
    op = request.get("op") if isinstance(request, dict) else None
    if op == "describe":
        return protocol.ok_reply(dict(DESCRIBE))
    if op != "model":
        return respond(rollback, line)
    try:
        decoded = decode_model(request, _OFFER)
    except protocol.ProtocolError as error:
        return protocol.error_reply(error.kind, str(error))
    return protocol.ok_reply(encode_model_results(run_script(decoded, how)))


def main() -> int:
    """Serve the model on standard input and output, wrong as the first argument says."""
    return serve_fake("model_adapter.py", WRONG, reply)


if __name__ == "__main__":
    sys.exit(main())
