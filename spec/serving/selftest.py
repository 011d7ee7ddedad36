# SPDX-License-Identifier: MIT OR Apache-2.0
"""``serve-check --self-test``: the judge's power, shown on toy engines right and wrong on purpose.

Each scenario serves the toy engine (:mod:`.toy`) twice on loopback, once
plain and once as the scenario configures its speculation, runs the whole
judge between them and compares the verdict with the one a sound judge must
give: correct engines pass, whether or not their verify path rounds
otherwise than their decode path; a rollback one token off fails, and so
does an error small at first that grows with every rollback, even hidden
in rounding noise; an engine that never drafts is not observed.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from .client import Server
from .run import Options, run
from .toy import Config, serving
from .verdict import VerdictKind, decide
from .workload import draw_workload

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["SCENARIOS", "Scenario", "Tried", "self_test"]

#: The rounding noise a scenario's verify path adds, where it adds any.
_NOISE: Final = 1e-3


@dataclass(frozen=True)
class Scenario:
    """A target the judge meets, what it must say of it, and an optional calibration server."""

    name: str
    target: Config
    expected: VerdictKind
    calibration: Config | None = None


#: Every scenario, in the order the self-test runs them.
SCENARIOS: Final = (
    Scenario("correct speculation", Config(spec="ngram"), VerdictKind.PASS),
    Scenario(
        "a verify path that rounds otherwise than decoding, calibrated",
        Config(spec="ngram", verify_noise=_NOISE),
        VerdictKind.PASS,
        calibration=Config(spec="never", verify_noise=_NOISE),
    ),
    Scenario(
        "a rollback one token off",
        Config(spec="ngram", fault="one-token"),
        VerdictKind.FAIL,
    ),
    Scenario(
        "an error that grows with every rollback",
        Config(spec="ngram", fault="drift"),
        VerdictKind.FAIL,
    ),
    Scenario(
        "a rollback one token off, in rounding noise, calibrated",
        Config(spec="ngram", fault="one-token", verify_noise=_NOISE),
        VerdictKind.FAIL,
        calibration=Config(spec="never", verify_noise=_NOISE),
    ),
    Scenario(
        "an error that grows with every rollback, in rounding noise, calibrated",
        Config(spec="ngram", fault="drift", verify_noise=_NOISE),
        VerdictKind.FAIL,
        calibration=Config(spec="never", verify_noise=_NOISE),
    ),
    Scenario("a drafter that never drafts", Config(spec="never"), VerdictKind.NOT_OBSERVED),
    Scenario(
        "llama-server's dialect, correct",
        Config(spec="ngram", dialect="llama.cpp"),
        VerdictKind.PASS,
    ),
    Scenario(
        "llama-server's dialect, one token off",
        Config(spec="ngram", fault="one-token", dialect="llama.cpp"),
        VerdictKind.FAIL,
    ),
)


@dataclass(frozen=True)
class Tried:
    """One scenario's verdict, and its line."""

    scenario: Scenario
    got: VerdictKind
    reason: str

    @property
    def as_expected(self) -> bool:
        """Whether the judge said what it must."""
        return self.got is self.scenario.expected

    def line(self) -> str:
        """The scenario's line: as expected or not, the verdict, the scenario, why."""
        mark = "as expected" if self.as_expected else f"NOT {self.scenario.expected.value}"
        return f"{self.got.value} ({mark}): {self.scenario.name}: {self.reason}"


def _one(scenario: Scenario, seed: int, /) -> Tried:
    dialect = scenario.target.dialect
    workload = draw_workload(
        seed, count=16, vocab=64, num_drafts=3, block_size=8, max_tokens=32, concurrency=4
    )
    with contextlib.ExitStack() as stack:
        reference = stack.enter_context(serving(Config(dialect=dialect)))
        target = stack.enter_context(serving(scenario.target))
        calibration = (
            None
            if scenario.calibration is None
            else stack.enter_context(serving(scenario.calibration))
        )
        judged = run(
            Server("reference", "--reference", reference, timeout=60),
            Server("target", "--target", target, timeout=60),
            workload,
            Options(),
            calibration=None
            if calibration is None
            else Server("calibrate", "--calibrate", calibration, timeout=60),
        )
    verdict = decide(judged)
    return Tried(scenario, verdict.kind, verdict.reason)


def self_test(seed: int, /, *, say: Callable[[str], None]) -> bool:
    """Run every scenario with workloads drawn from ``seed``; say each line; True if all held."""
    held = 0
    for scenario in SCENARIOS:
        tried = _one(scenario, seed)
        held += tried.as_expected
        say(f"self-test: {tried.line()}")
    say(f"self-test: {held} of {len(SCENARIOS)} scenarios judged as they must be")
    return held == len(SCENARIOS)
