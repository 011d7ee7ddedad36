# SPDX-License-Identifier: MIT OR Apache-2.0
"""The model operation (opt-in): a rolled-back sequence decodes as if it never rolled back.

Drawn speculative rounds over the model the adapter names in its
``describe``: each round decodes a window of tokens on some sequences in one
step, rolls each back by a drawn number of tokens, the adapter's way, and
sequences finish and new ones take their slots. Each token a round kept must
have the logits the same adapter gives when it decodes only the kept
tokens, one at a time, in a sequence of its own that never rolled back,
within the bound the adapter declares (0 unless it says). A wrong
rolled-back state shows in the logits of the next token kept after it; the
last round's are judged by one more token each. No model of the arithmetic
is needed. Skipped, with the reason, when the adapter names no model or
answers ``unknown-op`` (docs/protocol-model.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Final, cast

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)

from ssm_rollback_spec.harness.failures import NonConformingReply
from ssm_rollback_spec.harness.model_wire import (
    MAX_DECODE_TOKENS,
    MODEL_OP,
    DecodeResult,
    MalformedModelReplyError,
    ModelOffer,
    ModelOfferError,
    ModelResult,
    RollbackWay,
    decode_model,
    decode_model_offer,
    decode_model_results,
)
from ssm_rollback_spec.harness.protocol import encode
from ssm_rollback_spec.harness.pytest_plugin import record_distance

if TYPE_CHECKING:
    from collections.abc import Callable

    from ssm_rollback_spec.harness.driver import Implementation

_CLAUSES: Final = ("RB-REPLAY-14",)
_NO_MODEL: Final = "model is opt-in, and this implementation's describe names no model"
_NOT_OFFERED: Final = "model is opt-in, and this implementation answers unknown-op to it"
#: The longest window a round decodes: past a snapshot depth of 4, as a long draft is.
_MAX_WINDOW: Final = 7
#: Rounds and finishes per example.
_STEPS: Final = 8
#: The name of the sequence that decodes the kept tokens one at a time.
_PLAIN: Final = "plain"


def _machine_settings() -> settings:
    """The profile's settings: a quarter of its examples (at least 4), ``_STEPS`` steps each."""
    profile = settings()
    return settings(
        profile,
        max_examples=max(4, profile.max_examples // 4),
        stateful_step_count=_STEPS,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@dataclass
class _Round:
    """What a round asked: its decode step's index and entries, and each entry's rollback."""

    decode: int
    entries: list[tuple[str, list[int]]]
    #: By sequence: the rollback step's index and how many tokens it takes back.
    rollbacks: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass
class _Finish:
    """A finish step: the sequence's kept tokens are gone with it."""

    sequence: str


def _hex_row(row: list[float], /) -> str:
    return "[" + ", ".join(value.hex() for value in row) + "]"


class _Judge:
    """Plain decodes of kept tokens, each asked once per test, and the distance seen."""

    def __init__(self, impl: Implementation, offer: ModelOffer, /) -> None:
        self.impl, self.offer = impl, offer
        self.plain: dict[tuple[str, tuple[int, ...]], list[float]] = {}

    def send(self, request: dict[str, object], /) -> tuple[dict[str, object], list[ModelResult]]:
        """The reply and its results; skips on ``unknown-op``, fails on a malformed reply."""
        reply = self.impl.request(request)
        error = reply.get("error")
        if isinstance(error, dict) and error.get("kind") == "unknown-op":
            pytest.skip(_NOT_OFFERED)
        decoded = decode_model(request, self.offer)
        shape = (
            '{"ok":{"results":[...]}} with one result per step of its script '
            "(docs/protocol-model.md)"
        )
        if "ok" not in reply:
            raise NonConformingReply(request, reply, shape, clauses=_CLAUSES)
        try:
            return reply, decode_model_results(reply["ok"], decoded, self.offer["vocab"])
        except MalformedModelReplyError as error_:
            raise NonConformingReply(
                request, reply, shape, note=str(error_), clauses=_CLAUSES
            ) from None

    def plain_decode(self, way: RollbackWay, tokens: list[int], /) -> list[float]:
        """The logits of the last of ``tokens``, decoded one at a time in a fresh sequence."""
        key = (way.value, tuple(tokens))
        if key not in self.plain:
            request = _plain_request(way, tokens)
            _, results = self.send(request)
            for index, result in enumerate(results):
                assert result["kind"] == "decode"
                self.plain[way.value, tuple(tokens[: index + 1])] = result["logits"][0][0]
        return self.plain[key]


def _plain_request(way: RollbackWay, tokens: list[int], /) -> dict[str, object]:
    script = [{"decode": [{"sequence": _PLAIN, "tokens": [token]}]} for token in tokens]
    return {"op": MODEL_OP, "rollback": way.value, "script": script}


class _Rounds(RuleBasedStateMachine):
    """Speculative rounds on the adapter's model; :func:`test_model` sets ``judge`` up."""

    judge: ClassVar[_Judge]

    def __init__(self) -> None:
        super().__init__()
        self.offer = self.judge.offer
        self.way = self.offer["rollback"][0]
        self.script: list[dict[str, object]] = []
        self.asked: list[_Round | _Finish] = []
        #: The sequences that have not finished.
        self.live: set[str] = set()
        self.names = 0
        self.failed = False

    @initialize(data=st.data())
    def choose_a_way(self, data: st.DataObject) -> None:
        self.way = data.draw(st.sampled_from(self.offer["rollback"]), label="rollback way")

    def _most(self, window: int, /) -> int:
        # The rollbacks the adapter offers: within the window just decoded,
        # and for snapshots within their depth.
        if self.way is RollbackWay.SNAPSHOT:
            return min(window, self.offer.get("snapshot_depth", 0))
        return window

    @rule(data=st.data())
    def speculative_round(self, data: st.DataObject) -> None:
        free = self.offer["sequences"] - len(self.live)
        running = [name for name in sorted(self.live) if data.draw(st.booleans(), label=name)]
        if not running and not free:
            running = sorted(self.live)[:1]
        joining = data.draw(st.integers(0 if running else 1, free), label="new sequences")
        names = running + [f"s{self.names + index}" for index in range(joining)]
        self.names += joining
        windows = [
            st.lists(
                st.integers(0, self.offer["vocab"] - 1),
                min_size=1,
                max_size=min(_MAX_WINDOW, MAX_DECODE_TOKENS),
            )
            for _ in names
        ]
        entries = [
            (name, data.draw(window, label=f"window of {name}"))
            for name, window in zip(names, windows, strict=True)
        ]
        asked = _Round(len(self.script), entries)
        self.script.append(
            {"decode": [{"sequence": name, "tokens": tokens} for name, tokens in entries]}
        )
        for name, tokens in entries:
            self.live.add(name)
            most = self._most(len(tokens))
            # Now and then past the offer: the engine may refuse it, and what it
            # accepts is judged all the same.
            past = data.draw(st.integers(0, 9), label=f"past the offer {name}") == 0
            if past:
                back = data.draw(st.integers(most + 1, most + 3), label=f"rollback {name}")
            else:
                back = data.draw(st.integers(0, most), label=f"rollback {name}")
            if back:
                asked.rollbacks[name] = (len(self.script), back)
                self.script.append({"rollback": name, "tokens": back})
        self.asked.append(asked)
        self._run()

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.live)), label="finish")
        self.live.discard(name)
        self.script.append({"finish": name})
        self.asked.append(_Finish(name))

    def _request(self) -> dict[str, object]:
        return {"op": MODEL_OP, "rollback": self.way.value, "script": list(self.script)}

    def _history(self, upto: int, /) -> str:
        shown = []
        for asked in self.asked:
            if isinstance(asked, _Finish):
                shown.append(f"finish {asked.sequence}")
                continue
            if asked.decode >= upto:
                break
            for name, tokens in asked.entries:
                back = asked.rollbacks.get(name, (0, 0))[1]
                shown.append(f"{name} +{len(tokens)} -{back}")
        return "; ".join(shown) or "nothing"

    def _fail(
        self, request: dict[str, object], reply: dict[str, object], note: str, /
    ) -> NonConformingReply:
        self.failed = True
        bound = self.offer["bound"]
        allowed = (
            "each kept token's logits within "
            f"{bound:g} of a plain decode of only the kept tokens, one at a time, in a "
            f"sequence that never rolled back (the bound model {self.offer['name']!r} declares)"
        )
        return NonConformingReply(request, reply, allowed, note=note, clauses=_CLAUSES)

    def _run(self) -> None:
        """Send the script so far, whole, and judge every kept token's logits in it.

        Each sequence's kept tokens follow the reply: a rollback the engine
        refused keeps them all, one it accepted takes its tokens back, past
        the window into earlier ones when it asked for more.
        """
        request = self._request()
        reply, results = self.judge.send(request)
        kept: dict[str, list[int]] = {}
        largest = 0.0
        for asked in self.asked:
            if isinstance(asked, _Finish):
                kept.pop(asked.sequence, None)
                continue
            decoded = results[asked.decode]
            assert decoded["kind"] == "decode"
            for index, (name, tokens) in enumerate(asked.entries):
                before = kept.setdefault(name, [])
                step, back = asked.rollbacks.get(name, (0, 0))
                if back and not self._accepted(request, reply, results[step], asked, name):
                    back = 0
                judged = max(0, len(tokens) - back)
                largest = max(
                    largest,
                    self._judge_window(request, reply, asked, decoded, index, before, judged),
                )
                whole = before + tokens
                kept[name] = whole[: max(0, len(whole) - back)]
        record_distance(largest, self.offer["bound"])

    def _accepted(
        self,
        request: dict[str, object],
        reply: dict[str, object],
        result: ModelResult,
        asked: _Round,
        name: str,
    ) -> bool:
        """Whether the engine took the tokens back; a refusal of an offered rollback fails."""
        accepted = result["kind"] == "rollback" and result["accepted"]
        step, back = asked.rollbacks[name]
        tokens = dict(asked.entries)[name]
        if not accepted and back <= self._most(len(tokens)):
            raise self._fail(
                request,
                reply,
                f"results[{step}]: the rollback of {back} of {name}'s {len(tokens)} "
                f"new tokens was refused, though the adapter offers it, after "
                f"{self._history(asked.decode)}",
            )
        return accepted

    def _judge_window(
        self,
        request: dict[str, object],
        reply: dict[str, object],
        asked: _Round,
        decoded: DecodeResult,
        index: int,
        before: list[int],
        judged: int,
    ) -> float:
        name, tokens = asked.entries[index]
        largest = 0.0
        for position in range(judged):
            got = decoded["logits"][index][position]
            prefix = before + tokens[: position + 1]
            want = self.judge.plain_decode(self.way, prefix)
            apart = [abs(a - b) for a, b in zip(got, want, strict=True)]
            distance = max(apart)
            largest = max(largest, distance)
            if distance > self.offer["bound"]:
                worst = apart.index(distance)
                raise self._fail(
                    request,
                    reply,
                    f"results[{asked.decode}].logits[{index}][{position}], token {position} of "
                    f"{name}'s window after {self._history(asked.decode)}: logit {worst} is "
                    f"{got[worst].hex()}, and a plain decode of {name}'s {len(prefix)} kept "
                    f"tokens gives {want[worst].hex()}, {distance:.3g} apart; the plain decode: "
                    f"{encode(_plain_request(self.way, prefix))} gives the row {_hex_row(want)}",
                )
        return largest

    def teardown(self) -> None:
        # The last round's rolled-back states, judged by one more token each.
        if self.failed or not self.live:
            return
        names = sorted(self.live)
        entries = [(name, [index % self.offer["vocab"]]) for index, name in enumerate(names)]
        self.asked.append(_Round(len(self.script), entries))
        self.script.append(
            {"decode": [{"sequence": name, "tokens": tokens} for name, tokens in entries]}
        )
        self._run()


# Typed the same whether or not the installed Hypothesis annotates it.
_run_machine: Final = cast("Callable[..., None]", run_state_machine_as_test)


def _offer(impl: Implementation, /) -> ModelOffer:
    request: dict[str, object] = {"op": "describe"}
    reply = impl.request(request)
    described = reply.get("ok")
    try:
        offer = decode_model_offer(described) if isinstance(described, dict) else None
    except ModelOfferError as error:
        raise NonConformingReply(
            request,
            reply,
            'a describe whose "model" member has the fields docs/protocol-model.md lists',
            note=str(error),
            clauses=_CLAUSES,
        ) from None
    if offer is None:
        pytest.skip(_NO_MODEL)
    return offer


@pytest.mark.clause(*_CLAUSES)
def test_a_rolled_back_sequence_decodes_as_the_kept_tokens_decoded_plainly(
    impl: Implementation,
) -> None:
    # Drawn speculative rounds (decode K tokens, roll back all but some),
    # each way the adapter offers, judged against its own plain decode of the
    # kept tokens in a sequence that never rolls back.
    judge = _Judge(impl, _offer(impl))
    machine = type("ModelRounds", (_Rounds,), {"judge": judge})
    _run_machine(machine, settings=_machine_settings())
