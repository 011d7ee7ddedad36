# SPDX-License-Identifier: MIT OR Apache-2.0
"""The decode-loop state machine: many verify rounds against plain decoding, bit for bit.

:func:`decode_machine` builds a Hypothesis ``RuleBasedStateMachine`` over a
decoder factory (a design of ``spec/replay/rounds.py``, or a deliberately
wrong one of ``tests/fakes/wrong_replay.py``). Its rules run a verify
round (a drawn draft count, so adaptive drafting; an accepted count from 1 to
K; the bonus token opening the next window) and reuse the slot by copy; its
invariant says the state the design yields equals plain decoding's over the
accepted tokens, dtypes and bits included (RB-REPLAY-6).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Final, cast

import numpy as np
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from ssm_rollback_spec.replay.cases import make_layer
from ssm_rollback_spec.replay.layer import GdnLayer, LayerState, Pipeline, TokenInput, bf16_round
from ssm_rollback_spec.replay.paths import seed_rows
from ssm_rollback_spec.replay.rounds import plain_decode
from ssm_rollback_spec.replay_rows import GdnShape

from .strategies import drawer

if TYPE_CHECKING:
    from collections.abc import Callable

    from ssm_rollback_spec.replay.cases import Draw
    from ssm_rollback_spec.replay.layer import Array
    from ssm_rollback_spec.replay.rounds import DecoderFactory

__all__ = [
    "MAX_K_CEILING",
    "ROUND_PIPELINES",
    "STEPS",
    "decode_machine",
    "machine_settings",
    "run_decode_machine",
]

#: Rounds per example under every profile; a lifecycle bug shows within a few.
STEPS: Final = 16
#: The pipelines whose state after a round is plain decoding's bit for bit:
#: every one but vLLM's, which stores h in BF16 after every call
#: (:func:`ssm_rollback_spec.replay.rounds.decode_round`).
ROUND_PIPELINES: Final = tuple(p for p in Pipeline if not p.stores_h_in_bf16)
#: The widest K a machine draws (a ring of K - 1 rows, or an L of K to K + 2).
MAX_K_CEILING: Final = 4


@st.composite
def _small_shapes(draw: st.DrawFn) -> GdnShape:
    key_heads = draw(st.integers(1, 2))
    return GdnShape(
        num_key_heads=key_heads,
        key_head_dim=draw(st.integers(2, 3)),
        num_value_heads=key_heads * draw(st.integers(1, 2)),
        value_head_dim=2,
        conv_kernel=draw(st.integers(2, 4)),
    )


def _token(layer: GdnLayer, numbers: Draw, /) -> TokenInput:
    return TokenInput(
        qkv=numbers((layer.conv_dim,), -2.0, 2.0),
        z=numbers((layer.value_dim,), -2.0, 2.0),
        a=numbers((layer.num_value_heads,), -2.0, 2.0),
        b=numbers((layer.num_value_heads,), -2.0, 2.0),
    )


def _show(state: LayerState, /) -> str:
    return f"conv={state.conv.tolist()}\n  h={state.h.tolist()}"


def _relative_error(actual: Array, expected: Array, /) -> float:
    scale = float(np.max(np.abs(expected)))
    error = float(np.max(np.abs(actual - expected)))
    return error / scale if scale else error


def decode_machine(
    make: DecoderFactory,
    /,
    *,
    pipelines: tuple[Pipeline, ...] = ROUND_PIPELINES,
    bound: float | None = None,
) -> type[RuleBasedStateMachine]:
    """The decode loop's state machine for decoders ``make`` builds.

    ``bound`` None: the design's state must be plain decoding's bit for bit.
    Otherwise its conv state must be plain decoding's bit for bit and its h
    within ``bound``, relative to plain decoding's largest ``|h|``.

    RB-REPLAY-6, RB-REPLAY-11.
    """

    class DecodeRounds(RuleBasedStateMachine):
        """One sequence decoded in verify rounds by the design, and plainly beside it."""

        @initialize(data=st.data())
        def start(self, data: st.DataObject) -> None:
            numbers = drawer(data.draw)
            self.pipeline = data.draw(st.sampled_from(pipelines), label="pipeline")
            shape = data.draw(_small_shapes(), label="shape")
            self.layer = replace(make_layer(shape, numbers), pipeline=self.pipeline)
            self.k_ceiling = data.draw(st.integers(2, MAX_K_CEILING), label="k_ceiling")
            ring_length = data.draw(st.integers(self.k_ceiling, self.k_ceiling + 2), label="L")
            zero = self.layer.zero_state(self.pipeline)
            conv: Array = numbers(zero.conv.shape, -2.0, 2.0)
            if self.pipeline is not Pipeline.FLOAT64:
                conv = bf16_round(conv)
            h = numbers(zero.h.shape, -2.0, 2.0)
            dtype = self.pipeline.dtype
            initial = LayerState(conv=np.asarray(conv, dtype=dtype), h=h.astype(dtype))
            self.decoder = make(self.layer, self.pipeline, initial, self.k_ceiling, ring_length)
            self.plain = initial
            self.pending = _token(self.layer, numbers)
            self.history: list[str] = []

        @rule(data=st.data())
        def verify_round(self, data: st.DataObject) -> None:
            numbers = drawer(data.draw)
            drafts = data.draw(st.integers(0, self.k_ceiling - 1), label="drafts")
            tokens = [self.pending, *(_token(self.layer, numbers) for _ in range(drafts))]
            rows = seed_rows(self.layer, tokens, self.pipeline)
            accepted = data.draw(st.integers(1, len(rows)), label="accepted")
            self.decoder.verify_round(rows, accepted)
            self.plain = plain_decode(self.layer, self.plain, rows[:accepted])
            self.pending = _token(self.layer, numbers)  # the bonus token
            self.history.append(f"K={len(rows)} a={accepted}")

        @rule()
        def reuse_slot(self) -> None:
            self.decoder.reuse_slot()
            self.history.append("reuse")

        @precondition(lambda self: hasattr(self, "decoder"))
        @invariant()
        def rollback_equals_plain_decoding(self) -> None:
            rebuilt = self.decoder.state()
            if bound is not None:
                error = _relative_error(rebuilt.h, self.plain.h)
                assert np.array_equal(rebuilt.conv, self.plain.conv), "conv"
                assert rebuilt.h.dtype == self.plain.h.dtype, "dtype"
                assert error <= bound, (
                    f"{self.pipeline.value}, after {', '.join(self.history)}: h off by "
                    f"{error:.3g} relative, past {bound:g}"
                )
                return
            assert rebuilt.equals(self.plain), (
                f"{self.pipeline.value}, K ceiling {self.k_ceiling}, after "
                f"{', '.join(self.history) or 'no round'}:\n"
                f"plain  {_show(self.plain)}\ndesign {_show(rebuilt)}"
            )

    return DecodeRounds


def machine_settings(
    *, find_only: bool = False, share: int = 2, least: int = 10, steps: int = STEPS
) -> settings:
    """The profile's settings for a stateful machine: its examples over ``share``, ``steps`` steps.

    A decode machine takes half the profile's examples (at least ``least``)
    and up to STEPS steps; a costlier machine asks for a smaller share.
    ``find_only`` (the self-test) stops at the first failure, unshrunk, and
    draws the same examples every run.
    """
    profile = settings()
    chosen = settings(
        profile,
        max_examples=max(least, profile.max_examples // share),
        stateful_step_count=steps,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    if find_only:
        # A self-test's verdict must not hang on a draw: under the random dev
        # profile, a run of the llama.cpp tier once missed both restores of
        # another sequence's state in its 8 examples. The same draws every
        # run, in every profile.
        return settings(
            chosen,
            phases=[Phase.explicit, Phase.reuse, Phase.generate],
            report_multiple_bugs=False,
            print_blob=False,
            derandomize=True,
            database=None,
        )
    return chosen


# Typed the same whether or not the installed Hypothesis annotates it (6.155 does not).
_run_machine: Final = cast("Callable[..., None]", run_state_machine_as_test)


def run_decode_machine(
    make: DecoderFactory,
    /,
    *,
    find_only: bool = False,
    pipelines: tuple[Pipeline, ...] = ROUND_PIPELINES,
    bound: float | None = None,
) -> None:
    """Run the decode machine of ``make`` under :func:`machine_settings`.

    RB-REPLAY-6.
    """
    machine = decode_machine(make, pipelines=pipelines, bound=bound)
    _run_machine(machine, settings=machine_settings(find_only=find_only))
