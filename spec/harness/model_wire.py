# SPDX-License-Identifier: MIT OR Apache-2.0
"""The opt-in ``model`` operation on the wire (docs/protocol-model.md).

An adapter that has loaded a model names it in its ``describe`` reply, in a
``model`` member (:func:`decode_model_offer`), and answers ``model``
requests: one request carries a whole script of steps on named sequences
(decode a batch of tokens, roll a sequence back, finish one), run from
empty sequences, and gets one result per step (:func:`decode_model`,
:func:`encode_model_results`, :func:`decode_model_results`). Nothing
survives a request, as with ``replay``. Logits travel as ``float.hex``
strings. An adapter that has no model answers ``unknown-op``.

Standard library only, beside :mod:`.protocol` and :mod:`.replay_wire`.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Final, Literal, NotRequired, TypedDict

from .protocol import bad_request, encode_value, required_field
from .replay_wire import finite_hex

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "MAX_DECODE_TOKENS",
    "MAX_ROLLBACK",
    "MAX_SCRIPT_STEPS",
    "MAX_SEQUENCES",
    "MAX_SEQUENCE_NAME",
    "MAX_SNAPSHOT_DEPTH",
    "MAX_VOCAB",
    "MODEL_OP",
    "DecodeEntry",
    "DecodeResult",
    "DecodeStep",
    "FinishResult",
    "FinishStep",
    "MalformedModelReplyError",
    "ModelOffer",
    "ModelOfferError",
    "ModelRequest",
    "ModelResult",
    "ModelStep",
    "RollbackResult",
    "RollbackStep",
    "RollbackWay",
    "decode_model",
    "decode_model_offer",
    "decode_model_results",
    "encode_model_results",
]

#: The operation's name in a request, and the ``describe`` member that offers it.
MODEL_OP: Final = "model"

#: The largest vocabulary a ``describe`` may declare.
MAX_VOCAB: Final = 262_144
#: The most sequences a model may hold at once, as its ``describe`` declares.
MAX_SEQUENCES: Final = 64
#: The deepest snapshot rollback a ``describe`` may declare.
MAX_SNAPSHOT_DEPTH: Final = 4096
#: The most steps in one request's script.
MAX_SCRIPT_STEPS: Final = 1024
#: The most tokens one sequence decodes in one decode step.
MAX_DECODE_TOKENS: Final = 64
#: The most tokens one rollback step may ask to take back.
MAX_ROLLBACK: Final = 4096
#: The longest sequence name.
MAX_SEQUENCE_NAME: Final = 64

#: The keys of a script step, exactly one of which a step carries.
_STEP_KINDS: Final = ("decode", "rollback", "finish")


class RollbackWay(enum.Enum):
    """How a runtime takes tokens back from a sequence's recurrent state."""

    #: Per-token snapshots of the recurrent state, the last ``snapshot_depth`` kept.
    SNAPSHOT = "snapshot"
    #: The state saved before each decode, restored and the kept tokens decoded again.
    CHECKPOINT = "checkpoint"


class ModelOfferError(ValueError):
    """A ``describe`` reply's ``model`` member is not of the shape docs/protocol.md gives."""


class MalformedModelReplyError(ValueError):
    """A ``model`` reply's results are not one result of the right shape per step."""


class ModelOffer(TypedDict):
    """What a ``describe`` reply says of the model the adapter loaded."""

    name: str
    vocab: int
    sequences: int
    rollback: list[RollbackWay]
    #: Present when ``rollback`` lists ``snapshot``: how many tokens back it reaches.
    snapshot_depth: NotRequired[int]
    #: The largest ``|logit - logit|`` the adapter claims between a rolled-back
    #: sequence and a plain decode of only its kept tokens; 0 unless declared.
    bound: float


class DecodeEntry(TypedDict):
    """One sequence's part of a decode step: the tokens it appends, in order."""

    sequence: str
    tokens: list[int]


class DecodeStep(TypedDict):
    """Decode a batch: each entry's tokens appended to its sequence, in one call of the engine."""

    kind: Literal["decode"]
    entries: list[DecodeEntry]


class RollbackStep(TypedDict):
    """Take the last ``tokens`` tokens back from ``sequence``, the request's way."""

    kind: Literal["rollback"]
    sequence: str
    tokens: int


class FinishStep(TypedDict):
    """End ``sequence``: its slot is free, and its name may start a new sequence later."""

    kind: Literal["finish"]
    sequence: str


ModelStep = DecodeStep | RollbackStep | FinishStep


class ModelRequest(TypedDict):
    """A decoded ``model`` request: the way its rollbacks take, and its script."""

    rollback: RollbackWay
    script: list[ModelStep]


class DecodeResult(TypedDict):
    """Per entry of the decode step, per token, the logits over the vocabulary."""

    kind: Literal["decode"]
    logits: list[list[list[float]]]


class RollbackResult(TypedDict):
    """Whether the engine accepted the rollback (the sequence is left as it was if not)."""

    kind: Literal["rollback"]
    accepted: bool


class FinishResult(TypedDict):
    """A finish step's result: nothing."""

    kind: Literal["finish"]


ModelResult = DecodeResult | RollbackResult | FinishResult


def _count(value: object, where: str, least: int, most: int, /) -> int:
    if type(value) is not int or not least <= value <= most:
        raise ModelOfferError(
            f"describe's {where} must be an integer in [{least}, {most}], got {encode_value(value)}"
        )
    return value


def _ways(value: object, /) -> list[RollbackWay]:
    names = [way.value for way in RollbackWay]
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(name, str) and name in names for name in value)
        or len(set(value)) != len(value)
    ):
        raise ModelOfferError(
            f"describe's model.rollback must be a non-empty list of distinct names from "
            f"{names}, got {encode_value(value)}"
        )
    return [RollbackWay(name) for name in value]


def decode_model_offer(described: Mapping[str, object], /) -> ModelOffer | None:
    """The ``model`` member of a ``describe`` reply's ``ok`` value; None when it has none.

    Raises:
        ModelOfferError: the member is not an object of the fields docs/protocol.md
            lists, each in its range, named by its path (``model.vocab``).
    """
    member = described.get(MODEL_OP)
    if member is None:
        return None
    if not isinstance(member, dict):
        raise ModelOfferError(f"describe's model must be an object, got {encode_value(member)}")
    name = member.get("name")
    if not isinstance(name, str) or not name:
        raise ModelOfferError(
            f"describe's model.name must be a non-empty string, got {encode_value(name)}"
        )
    offer = ModelOffer(
        name=name,
        vocab=_count(member.get("vocab"), "model.vocab", 1, MAX_VOCAB),
        sequences=_count(member.get("sequences"), "model.sequences", 1, MAX_SEQUENCES),
        rollback=_ways(member.get("rollback")),
        bound=0.0,
    )
    if RollbackWay.SNAPSHOT in offer["rollback"]:
        depth = member.get("snapshot_depth")
        offer["snapshot_depth"] = _count(depth, "model.snapshot_depth", 1, MAX_SNAPSHOT_DEPTH)
    if "bound" in member:
        bound = finite_hex(member["bound"])
        if bound is None or bound < 0:
            raise ModelOfferError(
                "describe's model.bound must be a float.hex string of a finite value "
                f"of at least 0, got {encode_value(member['bound'])}"
            )
        offer["bound"] = bound
    return offer


def _name(value: object, where: str, /) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_SEQUENCE_NAME:
        raise bad_request(
            f"{where} must be a string of 1 to {MAX_SEQUENCE_NAME} characters, "
            f"got {encode_value(value)}"
        )
    return value


def _tokens(value: object, where: str, vocab: int, /) -> list[int]:
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_DECODE_TOKENS:
        raise bad_request(
            f"{where} must be a list of 1 to {MAX_DECODE_TOKENS} tokens, got {encode_value(value)}"
        )
    for index, token in enumerate(value):
        if type(token) is not int or not 0 <= token < vocab:
            raise bad_request(
                f"{where}[{index}] must be a token in [0, {vocab - 1}], got {encode_value(token)}"
            )
    return list(value)


def _decode_step(value: object, where: str, offer: ModelOffer, live: set[str], /) -> DecodeStep:
    if not isinstance(value, list) or not 1 <= len(value) <= offer["sequences"]:
        raise bad_request(
            f"{where} must be a list of 1 to {offer['sequences']} entries, "
            f"got {encode_value(value)}"
        )
    entries: list[DecodeEntry] = []
    for index, item in enumerate(value):
        at = f"{where}[{index}]"
        if not isinstance(item, dict):
            raise bad_request(f"{at} must be an object, got {encode_value(item)}")
        name = _name(required_field(item, "sequence"), f"{at}.sequence")
        if any(entry["sequence"] == name for entry in entries):
            raise bad_request(f"{at}: sequence {encode_value(name)} is already in this step")
        tokens = _tokens(required_field(item, "tokens"), f"{at}.tokens", offer["vocab"])
        entries.append(DecodeEntry(sequence=name, tokens=tokens))
    live.update(entry["sequence"] for entry in entries)
    if len(live) > offer["sequences"]:
        raise bad_request(
            f"{where}: {len(live)} sequences would be live, past the model's {offer['sequences']}"
        )
    return DecodeStep(kind="decode", entries=entries)


def _live(value: object, where: str, live: set[str], /) -> str:
    name = _name(value, where)
    if name not in live:
        raise bad_request(f"{where}: sequence {encode_value(name)} is not live")
    return name


def _step(value: object, where: str, offer: ModelOffer, live: set[str], /) -> ModelStep:
    kinds = [kind for kind in _STEP_KINDS if isinstance(value, dict) and kind in value]
    if not isinstance(value, dict) or len(kinds) != 1:
        raise bad_request(
            f"{where} must be an object with exactly one of {list(_STEP_KINDS)}, "
            f"got {encode_value(value)}"
        )
    if kinds == ["decode"]:
        return _decode_step(value["decode"], f"{where}.decode", offer, live)
    if kinds == ["rollback"]:
        name = _live(value["rollback"], f"{where}.rollback", live)
        tokens = required_field(value, "tokens")
        if type(tokens) is not int or not 1 <= tokens <= MAX_ROLLBACK:
            raise bad_request(
                f"{where}.tokens must be an integer in [1, {MAX_ROLLBACK}], "
                f"got {encode_value(tokens)}"
            )
        return RollbackStep(kind="rollback", sequence=name, tokens=tokens)
    name = _live(value["finish"], f"{where}.finish", live)
    live.discard(name)
    return FinishStep(kind="finish", sequence=name)


def decode_model(request: Mapping[str, object], offer: ModelOffer, /) -> ModelRequest:
    """A ``model`` request's way and script, checked against the model ``offer`` describes.

    Raises:
        ProtocolError: ``bad-request``, named by its path (``script[2].decode[0].tokens[1]``):
            a field is missing or out of range, the way is not one ``offer``
            lists, a token is past the vocabulary, a step would hold more live
            sequences than the model does, or a rollback or finish names a
            sequence that is not live.
    """
    way = required_field(request, "rollback")
    offered = [item.value for item in offer["rollback"]]
    if not isinstance(way, str) or way not in offered:
        raise bad_request(f"field 'rollback' must be one of {offered}, got {encode_value(way)}")
    script = required_field(request, "script")
    if not isinstance(script, list) or not 1 <= len(script) <= MAX_SCRIPT_STEPS:
        raise bad_request(
            f"field 'script' must be a list of 1 to {MAX_SCRIPT_STEPS} steps, "
            f"got {encode_value(script)}"
        )
    live: set[str] = set()
    steps = [_step(item, f"script[{index}]", offer, live) for index, item in enumerate(script)]
    return ModelRequest(rollback=RollbackWay(way), script=steps)


def encode_model_results(results: Sequence[ModelResult], /) -> dict[str, object]:
    """A ``model`` reply's ``ok`` value: one result per step, logits as ``float.hex``."""
    encoded: list[dict[str, object]] = []
    for result in results:
        if result["kind"] == "decode":
            logits = [[[value.hex() for value in row] for row in rows] for rows in result["logits"]]
            encoded.append({"logits": logits})
        elif result["kind"] == "rollback":
            encoded.append({"accepted": result["accepted"]})
        else:
            encoded.append({})
    return {"results": encoded}


def _logits(value: object, where: str, entry: DecodeEntry, vocab: int, /) -> list[list[float]]:
    count = len(entry["tokens"])
    if not isinstance(value, list) or len(value) != count:
        raise MalformedModelReplyError(
            f"{where} must be a list of {count} rows, one per token of sequence "
            f"{encode_value(entry['sequence'])}, got {encode_value(value)}"
        )
    rows: list[list[float]] = []
    for index, row in enumerate(value):
        numbers = [finite_hex(item) for item in row] if isinstance(row, list) else []
        if len(numbers) != vocab or None in numbers:
            raise MalformedModelReplyError(
                f"{where}[{index}] must be a list of {vocab} finite float.hex strings, "
                f"got {encode_value(row)}"
            )
        rows.append([number for number in numbers if number is not None])
    return rows


def _result(value: object, where: str, step: ModelStep, vocab: int, /) -> ModelResult:
    if not isinstance(value, dict):
        raise MalformedModelReplyError(f"{where} must be an object, got {encode_value(value)}")
    if step["kind"] == "decode":
        logits = value.get("logits")
        entries = step["entries"]
        if not isinstance(logits, list) or len(logits) != len(entries):
            raise MalformedModelReplyError(
                f"{where}.logits must be a list of {len(entries)} entries, one per entry of "
                f"the decode step, got {encode_value(logits)}"
            )
        return DecodeResult(
            kind="decode",
            logits=[
                _logits(rows, f"{where}.logits[{index}]", entry, vocab)
                for index, (rows, entry) in enumerate(zip(logits, entries, strict=True))
            ],
        )
    if step["kind"] == "rollback":
        accepted = value.get("accepted")
        if type(accepted) is not bool:
            raise MalformedModelReplyError(
                f"{where}.accepted must be true or false, got {encode_value(accepted)}"
            )
        return RollbackResult(kind="rollback", accepted=accepted)
    return FinishResult(kind="finish")


def decode_model_results(value: object, request: ModelRequest, vocab: int, /) -> list[ModelResult]:
    """The results a ``model`` reply's ``ok`` value gives, one per step of ``request``.

    Raises:
        MalformedModelReplyError: the value is not ``{"results": [...]}`` with
            one result of its step's shape per step, named by its path.
    """
    results = value.get("results") if isinstance(value, dict) else None
    script = request["script"]
    if not isinstance(results, list) or len(results) != len(script):
        raise MalformedModelReplyError(
            f"the reply's ok must be an object whose results are a list of {len(script)} "
            f"results, one per step, got {encode_value(value)}"
        )
    return [
        _result(item, f"results[{index}]", step, vocab)
        for index, (item, step) in enumerate(zip(results, script, strict=True))
    ]
