# SPDX-License-Identifier: MIT OR Apache-2.0
"""The ``model`` operation's wire format (docs/protocol-model.md), and the property's skips."""

from __future__ import annotations

import copy
import functools
import json
import subprocess
import sys
from typing import TYPE_CHECKING, Any, Final, cast

import pytest

from ssm_rollback_spec.corpus.model_run import ModelCase, judge_model, load_model_cases
from ssm_rollback_spec.harness.driver import Implementation, InProcessDriver
from ssm_rollback_spec.harness.failures import NonConformingReply
from ssm_rollback_spec.harness.model_wire import (
    DecodeResult,
    FinishResult,
    MalformedModelReplyError,
    ModelOffer,
    ModelOfferError,
    ModelResult,
    RollbackResult,
    RollbackWay,
    decode_model,
    decode_model_offer,
    decode_model_results,
    encode_model_results,
)
from ssm_rollback_spec.harness.protocol import ErrorKind, ProtocolError, error_reply, ok_reply
from tests.child import ROOT
from tests.fakes.model_adapter import DESCRIBE, VOCAB
from tests.properties import test_model

if TYPE_CHECKING:
    from collections.abc import Mapping

_OFFER: Final = ModelOffer(
    name="tiny",
    vocab=4,
    sequences=2,
    rollback=[RollbackWay.CHECKPOINT],
    bound=0.0,
)

_REQUEST: Final[dict[str, Any]] = {
    "op": "model",
    "rollback": "checkpoint",
    "script": [
        {"decode": [{"sequence": "a", "tokens": [3, 1]}, {"sequence": "b", "tokens": [0]}]},
        {"rollback": "a", "tokens": 1},
        {"finish": "b"},
        {"decode": [{"sequence": "b", "tokens": [2]}]},
    ],
}


def _changed(path: tuple[object, ...], value: object, /) -> dict[str, Any]:
    """``_REQUEST`` with the field at ``path`` set to ``value`` (removed when it is ``...``)."""
    request = copy.deepcopy(_REQUEST)
    parent: Any = request
    for key in path[:-1]:
        parent = parent[key]
    if value is ...:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return request


def test_a_request_decodes_to_its_way_and_steps() -> None:
    decoded = decode_model(_REQUEST, _OFFER)
    assert decoded == {
        "rollback": RollbackWay.CHECKPOINT,
        "script": [
            {
                "kind": "decode",
                "entries": [{"sequence": "a", "tokens": [3, 1]}, {"sequence": "b", "tokens": [0]}],
            },
            {"kind": "rollback", "sequence": "a", "tokens": 1},
            {"kind": "finish", "sequence": "b"},
            {"kind": "decode", "entries": [{"sequence": "b", "tokens": [2]}]},
        ],
    }


_BAD: Final = {
    "no way": (_changed(("rollback",), ...), "missing field 'rollback'"),
    "a way not offered": (
        _changed(("rollback",), "snapshot"),
        "field 'rollback' must be one of ['checkpoint'], got \"snapshot\"",
    ),
    "an empty script": (
        _changed(("script",), []),
        "field 'script' must be a list of 1 to 1024 steps, got []",
    ),
    "a script past 1,024 steps": (
        _changed(("script",), [{"decode": [{"sequence": "a", "tokens": [0]}]}] * 1025),
        (
            "field 'script' must be a list of 1 to 1024 steps, got "
            '[{"decode": [{"sequence": "a", "tokens": [0]}]}, {"decode": [{"sequence": "a"...'
        ),
    ),
    "a step of two kinds": (
        _changed(("script", 2), {"finish": "b", "rollback": "b"}),
        (
            "script[2] must be an object with exactly one of ['decode', 'rollback', 'finish'], "
            'got {"finish": "b", "rollback": "b"}'
        ),
    ),
    "an empty decode": (
        _changed(("script", 0, "decode"), []),
        "script[0].decode must be a list of 1 to 2 entries, got []",
    ),
    "a name of 65 characters": (
        _changed(("script", 0, "decode", 0, "sequence"), "x" * 65),
        'script[0].decode[0].sequence must be a string of 1 to 64 characters, got "'
        + "x" * 65
        + '"',
    ),
    "a name twice in a step": (
        _changed(("script", 0, "decode", 1, "sequence"), "a"),
        'script[0].decode[1]: sequence "a" is already in this step',
    ),
    "a token past the vocabulary": (
        _changed(("script", 0, "decode", 0, "tokens", 1), 4),
        "script[0].decode[0].tokens[1] must be a token in [0, 3], got 4",
    ),
    "65 tokens in an entry": (
        _changed(("script", 0, "decode", 0, "tokens"), [0] * 65),
        "script[0].decode[0].tokens must be a list of 1 to 64 tokens, got [" + "0, " * 25 + "0...",
    ),
    "more sequences live than the model holds": (
        _changed(("script", 2), {"decode": [{"sequence": "c", "tokens": [0]}]}),
        "script[2].decode: 3 sequences would be live, past the model's 2",
    ),
    "a rollback of a sequence never started": (
        _changed(("script", 1, "rollback"), "z"),
        'script[1].rollback: sequence "z" is not live',
    ),
    "a rollback of 0 tokens": (
        _changed(("script", 1, "tokens"), 0),
        "script[1].tokens must be an integer in [1, 4096], got 0",
    ),
    "a rollback of 4,097 tokens": (
        _changed(("script", 1, "tokens"), 4097),
        "script[1].tokens must be an integer in [1, 4096], got 4097",
    ),
    "an entry that is not an object": (
        _changed(("script", 0, "decode", 1), 3),
        "script[0].decode[1] must be an object, got 3",
    ),
    "a rollback naming no text": (
        _changed(("script", 1, "rollback"), 3),
        "script[1].rollback must be a string of 1 to 64 characters, got 3",
    ),
    "a finish of a finished sequence": (
        _changed(("script", 3), {"finish": "b"}),
        'script[3].finish: sequence "b" is not live',
    ),
}


@pytest.mark.parametrize("case", sorted(_BAD))
def test_a_malformed_model_request_is_a_bad_request_naming_its_field(case: str) -> None:
    request, message = _BAD[case]
    with pytest.raises(ProtocolError) as raised:
        decode_model(request, _OFFER)
    assert raised.value.kind is ErrorKind.BAD_REQUEST
    assert str(raised.value) == message


def test_the_bounds_themselves_are_allowed() -> None:
    script: list[object] = [{"decode": [{"sequence": "x" * 64, "tokens": [3] * 64}]}]
    script += [{"rollback": "x" * 64, "tokens": 4096}] * 1023
    decoded = decode_model({"rollback": "checkpoint", "script": script}, _OFFER)
    assert len(decoded["script"]) == 1024


def test_a_finished_name_may_start_a_new_sequence() -> None:
    decoded = decode_model(_REQUEST, _OFFER)
    assert decoded["script"][-1] == {
        "kind": "decode",
        "entries": [{"sequence": "b", "tokens": [2]}],
    }


def test_the_fake_model_s_describe_offers_both_ways_at_bound_0() -> None:
    assert decode_model_offer(DESCRIBE) == {
        "name": "tiny-gdn-32",
        "vocab": 32,
        "sequences": 3,
        "rollback": [RollbackWay.SNAPSHOT, RollbackWay.CHECKPOINT],
        "snapshot_depth": 4,
        "bound": 0.0,
    }


def test_a_describe_without_model_offers_none() -> None:
    assert decode_model_offer({"name": "x", "usize_bits": 64}) is None


def _member(**changes: object) -> dict[str, object]:
    model: dict[str, object] = dict(cast("dict[str, object]", DESCRIBE["model"]))
    model.update(changes)
    return {"model": {key: value for key, value in model.items() if value is not ...}}


_BAD_OFFERS: Final = {
    "not an object": ({"model": []}, "describe's model must be an object, got []"),
    "no name": (_member(name=...), "describe's model.name must be a non-empty string, got null"),
    "an empty name": (
        _member(name=""),
        'describe\'s model.name must be a non-empty string, got ""',
    ),
    "a name that is no text": (
        _member(name=3),
        "describe's model.name must be a non-empty string, got 3",
    ),
    "a way of another name": (
        _member(rollback=["fast"]),
        (
            "describe's model.rollback must be a non-empty list of distinct names from "
            "['snapshot', 'checkpoint'], got [\"fast\"]"
        ),
    ),
    "a vocabulary of 0": (
        _member(vocab=0),
        "describe's model.vocab must be an integer in [1, 262144], got 0",
    ),
    "65 sequences": (
        _member(sequences=65),
        "describe's model.sequences must be an integer in [1, 64], got 65",
    ),
    "no way": (
        _member(rollback=[]),
        (
            "describe's model.rollback must be a non-empty list of distinct names from "
            "['snapshot', 'checkpoint'], got []"
        ),
    ),
    "a way twice": (
        _member(rollback=["checkpoint", "checkpoint"]),
        (
            "describe's model.rollback must be a non-empty list of distinct names from "
            "['snapshot', 'checkpoint'], got [\"checkpoint\", \"checkpoint\"]"
        ),
    ),
    "snapshots with no depth": (
        _member(snapshot_depth=...),
        "describe's model.snapshot_depth must be an integer in [1, 4096], got null",
    ),
    "a negative bound": (
        _member(bound="-0x1p-10"),
        (
            "describe's model.bound must be a float.hex string of a finite value of at least 0, "
            'got "-0x1p-10"'
        ),
    ),
    "a bound as a JSON number": (
        _member(bound=0.001),
        (
            "describe's model.bound must be a float.hex string of a finite value of at least 0, "
            "got 0.001"
        ),
    ),
}


@pytest.mark.parametrize("case", sorted(_BAD_OFFERS))
def test_a_malformed_describe_model_is_named_by_its_field(case: str) -> None:
    described, message = _BAD_OFFERS[case]
    assert isinstance(described, dict)
    with pytest.raises(ModelOfferError) as raised:
        decode_model_offer(described)
    assert str(raised.value) == message


def test_the_largest_vocabulary_is_allowed() -> None:
    offer = decode_model_offer(_member(vocab=262_144))
    assert offer is not None
    assert offer["vocab"] == 262_144


def test_a_checkpoint_only_model_needs_no_snapshot_depth() -> None:
    offer = decode_model_offer(_member(rollback=["checkpoint"], snapshot_depth=...))
    assert offer is not None
    assert "snapshot_depth" not in offer
    assert offer["rollback"] == [RollbackWay.CHECKPOINT]


def test_results_go_out_in_hex_and_come_back_the_same() -> None:
    decoded = decode_model(_REQUEST, _OFFER)
    rows = [[[0.5, -1.0, 2.0**-30, 3.0], [0.0, 1.0, 2.0, 3.0]], [[1.5, 1.5, 1.5, 1.5]]]
    results: list[ModelResult] = [
        DecodeResult(kind="decode", logits=rows),
        RollbackResult(kind="rollback", accepted=False),
        FinishResult(kind="finish"),
        DecodeResult(kind="decode", logits=[[[0.0, 0.0, 0.0, -0.0]]]),
    ]
    encoded: Any = encode_model_results(results)
    assert encoded["results"][1:3] == [{"accepted": False}, {}]
    first = ["0x1.0000000000000p-1", "-0x1.0000000000000p+0", "0x1.0000000000000p-30"]
    assert encoded["results"][0]["logits"][0][0] == [*first, "0x1.8000000000000p+1"]
    assert decode_model_results(json.loads(json.dumps(encoded)), decoded, 4) == results


_ZEROS: Final = ["0x0p+0"] * 4


def _results(first: object, /, *, accepted: object = True) -> dict[str, object]:
    """Results for ``_REQUEST``: the first decode's ``first``, the rollback's ``accepted``."""
    return {"results": [{"logits": first}, {"accepted": accepted}, {}, {"logits": [[_ZEROS]]}]}


_BAD_RESULTS: Final = {
    "no results": (
        {},
        (
            "the reply's ok must be an object whose results are a list of 4 results, "
            "one per step, got {}"
        ),
    ),
    "ok not an object": (
        [],
        (
            "the reply's ok must be an object whose results are a list of 4 results, "
            "one per step, got []"
        ),
    ),
    "a result not an object": (
        {"results": [3, {"accepted": True}, {}, {"logits": [[_ZEROS]]}]},
        "results[0] must be an object, got 3",
    ),
    "logits not a list": (
        _results(3),
        "results[0].logits must be a list of 2 entries, one per entry of the decode step, got 3",
    ),
    "a row not a list": (
        _results([[_ZEROS] * 2, [3]]),
        "results[0].logits[1][0] must be a list of 4 finite float.hex strings, got 3",
    ),
    "a row short": (
        _results([[_ZEROS], [_ZEROS]]),
        (
            'results[0].logits[0] must be a list of 2 rows, one per token of sequence "a", '
            'got [["0x0p+0", "0x0p+0", "0x0p+0", "0x0p+0"]]'
        ),
    ),
    "a decimal logit": (
        _results([[_ZEROS] * 2, [["0x0p+0", "0.5", "0x0p+0", "0x0p+0"]]]),
        (
            "results[0].logits[1][0] must be a list of 4 finite float.hex strings, "
            'got ["0x0p+0", "0.5", "0x0p+0", "0x0p+0"]'
        ),
    ),
    "accepted as a number": (
        _results([[_ZEROS] * 2, [_ZEROS]], accepted=1),
        "results[1].accepted must be true or false, got 1",
    ),
}


@pytest.mark.parametrize("case", sorted(_BAD_RESULTS))
def test_malformed_results_are_named_by_their_path(case: str) -> None:
    value, message = _BAD_RESULTS[case]
    with pytest.raises(MalformedModelReplyError) as raised:
        decode_model_results(value, decode_model(_REQUEST, _OFFER), 4)
    assert str(raised.value) == message


#: The example exchange of docs/protocol-model.md: the request, and each row's first logit.
_DOCUMENTED: Final = (
    '{"op":"model","rollback":"checkpoint","script":[{"decode":[{"sequence":"a","tokens":[3,1,4]},'
    '{"sequence":"b","tokens":[1]}]},{"rollback":"a","tokens":2},{"decode":[{"sequence":"a",'
    '"tokens":[5]}]},{"finish":"b"}]}'
)
_FIRST_LOGITS: Final = [
    [
        ["-0x1.06714b68d6a63p+2", "0x1.81627c6444e1ap-1", "0x1.b719683694c10p-1"],
        ["0x1.7b87878ac73e8p-2"],
    ],
    True,
    [["0x1.054f62857d1bcp-3"]],
    None,
]


def _fake(*lines: str) -> list[dict[str, Any]]:
    finished = subprocess.run(
        [sys.executable, "-m", "tests.fakes.model_adapter"],
        input="".join(f"{line}\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [json.loads(line) for line in finished.stdout.splitlines()]


def test_the_documented_exchange_is_what_the_fake_model_replies() -> None:
    page = (ROOT / "docs" / "protocol-model.md").read_text(encoding="utf-8")
    assert f"> {_DOCUMENTED}\n" in page
    shown: Any = _FIRST_LOGITS[0]
    assert all(f'"{first}", "..."' in page for entry in shown for first in entry)
    plain = _DOCUMENTED.replace('"rollback":"checkpoint"', '"rollback":"snapshot"')
    plain_of_3_5 = (
        '{"op":"model","rollback":"checkpoint","script":['
        '{"decode":[{"sequence":"p","tokens":[3]}]},{"decode":[{"sequence":"p","tokens":[5]}]}]}'
    )
    [reply, by_snapshot, plain_reply] = _fake(_DOCUMENTED, plain, plain_of_3_5)
    results = reply["ok"]["results"]
    seen: list[object] = []
    for result in results:
        if "logits" in result:
            assert all(len(row) == VOCAB for entry in result["logits"] for row in entry)
            seen.append([[row[0] for row in entry] for entry in result["logits"]])
        else:
            seen.append(result.get("accepted"))
    assert seen == _FIRST_LOGITS
    # a's token after the rollback is the second token of a plain decode of [3, 5],
    # and a snapshot rollback gives the same bits.
    assert results[2]["logits"][0][0] == plain_reply["ok"]["results"][1]["logits"][0][0]
    assert by_snapshot == reply


class _NamesAModelButAnswersUnknownOp(Implementation):
    """A describe that names a model, and ``unknown-op`` to ``model`` itself."""

    name = "names a model, offers none"
    python = None

    def request(
        self, request: Mapping[str, object], /, *, line: str | None = None
    ) -> dict[str, object]:
        del line
        if request.get("op") == "describe":
            return {"ok": DESCRIBE}
        return {"error": {"kind": "unknown-op", "message": 'unknown op "model"'}}


def test_the_property_is_skipped_for_the_reference_which_names_no_model() -> None:
    with pytest.raises(pytest.skip.Exception) as raised:
        test_model.test_a_rolled_back_sequence_decodes_as_the_kept_tokens_decoded_plainly(
            InProcessDriver.load()
        )
    assert raised.value.msg == (
        "model is opt-in, and this implementation's describe names no model"
    )


def test_the_property_is_skipped_for_an_adapter_that_answers_unknown_op() -> None:
    with pytest.raises(pytest.skip.Exception) as raised:
        test_model.test_a_rolled_back_sequence_decodes_as_the_kept_tokens_decoded_plainly(
            _NamesAModelButAnswersUnknownOp()
        )
    assert raised.value.msg == "model is opt-in, and this implementation answers unknown-op to it"


def test_a_describe_that_declares_no_bound_is_judged_at_0() -> None:
    offer = decode_model_offer(_member(bound=...))
    assert offer is not None
    assert offer["bound"] == 0.0


#: The offset the off-by-a-little model adds to every logit of a sequence that
#: is not a plain decode: a power of two, so each row is that far off exactly.
_OFFSET: Final = 2.0**-12


def _logit_row(history: list[int], vocab: int, /) -> list[float]:
    """The little model's logits after ``history``: a fixed function of every kept token.

    Each is a multiple of 2**-7 below 1, so adding ``_OFFSET`` to it is exact.
    """
    mixed = sum((index + 1) * (token + 1) for index, token in enumerate(history))
    return [((mixed * (value + 3)) % 97) / 128 for value in range(vocab)]


class _OffByALittle(Implementation):
    """A model whose rollbacks are right but whose batched logits are ``_OFFSET`` off.

    It keeps each sequence's tokens and gives each token's logits from them
    alone; every sequence not named ``plain...`` (the property's and the
    round scripts' plain decodes) has ``_OFFSET`` added to each logit, as a
    runtime whose window kernels round otherwise than its one-token ones
    would. Its ``describe`` declares ``bound``.
    """

    python = None

    def __init__(self, bound: float, /) -> None:
        self.name = f"off by {_OFFSET:g}, bound {bound:g}"
        self._offer = ModelOffer(
            name="off-by-a-little", vocab=8, sequences=3, rollback=[RollbackWay.CHECKPOINT],
            bound=bound,
        )  # fmt: skip
        self._describe = {
            "name": self.name,
            "usize_bits": 64,
            "model": {
                "name": "off-by-a-little",
                "vocab": 8,
                "sequences": 3,
                "rollback": ["checkpoint"],
                "bound": bound.hex(),
            },
        }

    def request(
        self, request: Mapping[str, object], /, *, line: str | None = None
    ) -> dict[str, object]:
        del line
        if request.get("op") == "describe":
            return ok_reply(dict(self._describe))
        try:
            decoded = decode_model(dict(request), self._offer)
        except ProtocolError as error:
            return error_reply(error.kind, str(error))
        held: dict[str, list[int]] = {}
        results: list[ModelResult] = []
        for step in decoded["script"]:
            if step["kind"] == "decode":
                rows = []
                for entry in step["entries"]:
                    name, tokens = entry["sequence"], entry["tokens"]
                    history = held.setdefault(name, [])
                    off = 0.0 if name.startswith("plain") else _OFFSET
                    entry_rows = []
                    for token in tokens:
                        history.append(token)
                        entry_rows.append([x + off for x in _logit_row(history, 8)])
                    rows.append(entry_rows)
                results.append(DecodeResult(kind="decode", logits=rows))
            elif step["kind"] == "rollback":
                history = held[step["sequence"]]
                accepted = step["tokens"] <= len(history)
                if accepted:
                    del history[len(history) - step["tokens"] :]
                results.append(RollbackResult(kind="rollback", accepted=accepted))
            else:
                del held[step["sequence"]]
                results.append(FinishResult(kind="finish"))
        return ok_reply(encode_model_results(results))


#: A bound at ``_OFFSET`` and one below it, and how each model is judged.
_BOUNDS: Final = [(_OFFSET, "passed"), (_OFFSET / 2, "failed")]


@pytest.mark.parametrize(("bound", "outcome"), _BOUNDS)
def test_the_property_passes_a_difference_within_the_declared_bound_and_fails_one_past_it(
    bound: float, outcome: str
) -> None:
    run = test_model.test_a_rolled_back_sequence_decodes_as_the_kept_tokens_decoded_plainly
    if outcome == "passed":
        run(_OffByALittle(bound))
        return
    with pytest.raises(NonConformingReply) as raised:
        run(_OffByALittle(bound))
    assert f"{_OFFSET:.3g} apart" in str(raised.value)
    assert f"within {bound:g} of a plain decode" in str(raised.value)


@functools.cache
def _round_scripts() -> list[ModelCase]:
    """The shipped round scripts, read once (the replay corpus's hashes take seconds)."""
    return load_model_cases(ROOT / "vectors" / "replay")


@pytest.mark.parametrize(("bound", "outcome"), _BOUNDS)
def test_the_round_scripts_pass_a_difference_within_the_declared_bound_and_fail_one_past_it(
    bound: float, outcome: str
) -> None:
    adapter = _OffByALittle(bound)
    offer = decode_model_offer(cast("dict[str, object]", adapter.request({"op": "describe"})["ok"]))
    assert offer is not None
    assert offer["bound"] == bound
    cases = [
        case for case in _round_scripts() if case.way is RollbackWay.CHECKPOINT and case.vocab <= 8
    ]
    assert cases
    outcomes = {
        case.case_id: judge_model(case, offer, adapter.request(case.request)) for case in cases
    }
    assert {result.outcome for result in outcomes.values()} == {outcome}
    for result in outcomes.values():
        assert (result.distance, result.bound) == (_OFFSET, bound)
        if outcome == "failed":
            assert f"{_OFFSET:.3g} apart, past the bound {bound:g}" in result.detail
