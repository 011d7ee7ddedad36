# SPDX-License-Identifier: MIT OR Apache-2.0
"""run: the servers checked, the workload sent in batches and alone, the noise measured."""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Final, cast

import pytest

from ssm_rollback_spec.serving.client import Generation, Server
from ssm_rollback_spec.serving.errors import ServerFailedError, ServersDifferError
from ssm_rollback_spec.serving.judge import Outcome
from ssm_rollback_spec.serving.run import (
    Observed,
    Options,
    measure_noise,
    observe,
    prepare,
    run,
    send,
)
from ssm_rollback_spec.serving.workload import draw_workload
from tests.fakes.openai_engine import Config, serving

if TYPE_CHECKING:
    from collections.abc import Iterator

WORKLOAD: Final = draw_workload(
    3, count=8, vocab=64, num_drafts=3, block_size=8, max_tokens=12, concurrency=4
)


@contextlib.contextmanager
def _servers(*configs: Config) -> Iterator[list[Server]]:
    roles = ("reference", "target", "calibrate")
    with contextlib.ExitStack() as stack:
        yield [
            Server(role, f"--{role}", stack.enter_context(serving(config)), timeout=5)
            for role, config in zip(roles, configs, strict=False)
        ]


def test_servers_of_one_model_agree_on_it_and_on_the_dialect_their_owner_names() -> None:
    with _servers(Config(dialect="llama.cpp"), Config(dialect="llama.cpp")) as servers:
        assert prepare(servers, model=None, dialect=None) == ("toy-recurrent", "llama.cpp")
        assert servers[1].model == "toy-recurrent"


def test_servers_of_different_models_are_one_line_naming_each() -> None:
    with (
        _servers(Config(), Config(model="other")) as servers,
        pytest.raises(ServersDifferError) as raised,
    ):
        prepare(servers, model=None, dialect=None)
    assert str(raised.value) == (
        "the servers serve different models: --reference serves 'toy-recurrent'; "
        "--target serves 'other'"
    )


def test_a_model_asked_for_that_a_server_does_not_serve_is_one_line() -> None:
    with _servers(Config(), Config()) as servers, pytest.raises(ServersDifferError) as raised:
        prepare(servers, model="big", dialect=None)
    assert str(raised.value) == (
        f"--reference {servers[0].url} does not serve model 'big' (it serves 'toy-recurrent')"
    )


def test_servers_of_different_vocabularies_are_one_line_naming_each() -> None:
    with (
        _servers(Config(dialect="llama.cpp"), Config(dialect="llama.cpp", vocab=80)) as servers,
        pytest.raises(ServersDifferError) as raised,
    ):
        prepare(servers, model=None, dialect=None)
    assert str(raised.value) == "the servers' models differ in n_vocab: --reference 64, --target 80"


def test_servers_of_different_engines_are_one_line_naming_each() -> None:
    with (
        _servers(Config(), Config(dialect="llama.cpp")) as servers,
        pytest.raises(ServersDifferError) as raised,
    ):
        prepare(servers, model=None, dialect=None)
    assert (
        str(raised.value)
        == "the servers are different engines: --reference vllm, --target llama.cpp"
    )


def test_every_request_is_observed_in_its_batch_and_alone_with_the_counters() -> None:
    with _servers(Config(), Config(spec="ngram")) as (reference, target):
        prepare([reference, target], model=None, dialect=None)
        seen = observe(target, WORKLOAD, Options())
    assert sorted(seen.batched) == sorted(seen.alone) == list(range(8))
    assert seen.accepted is not None
    assert seen.drafted is not None
    assert 0 < seen.accepted <= seen.drafted
    assert sorted(seen.counted) == list(range(8))
    assert seen.failure is None


def test_a_target_that_fails_is_kept_in_its_observation_with_the_batch_it_failed_in() -> None:
    with _servers(Config(), Config(spec="ngram", die_after=2)) as (reference, target):
        prepare([reference, target], model=None, dialect=None)
        seen = observe(target, WORKLOAD, Options())
    assert seen.failure is not None
    assert seen.failure.role == "target"
    assert seen.failed_batch == WORKLOAD.batches[0]


def test_a_reference_that_fails_ends_the_run() -> None:
    with _servers(Config(die_after=2), Config(spec="ngram")) as (reference, target):
        prepare([reference, target], model=None, dialect=None)
        with pytest.raises(ServerFailedError) as raised:
            observe(reference, WORKLOAD, Options())
    assert raised.value.role == "reference"


def _generation(*logprobs: float) -> Generation:
    return Generation(("1",) * len(logprobs), tuple({"1": value} for value in logprobs))


def test_the_noise_bound_is_the_factor_times_the_largest_rollback_free_source() -> None:
    reference = Observed(
        batched={0: _generation(-1.0, -1.0, -1.0), 1: _generation(-1.0, -1.0, -1.0)},
        alone={0: _generation(-1.0, -1.01, -1.0), 1: _generation(-1.0, -1.0, -1.0)},
    )
    target = Observed(
        batched={0: _generation(-1.0, -1.0, -1.0), 1: _generation(-1.0, -1.0, -1.0)},
        alone={0: _generation(-1.0, -1.0, -1.0), 1: _generation(-1.0, -1.0, -1.0)},
    )
    measured = measure_noise(reference, target, None, 3.0)
    assert set(measured.sources) == {"reference alone against in a batch"}
    assert set(measured.reported) == {
        "first token, reference against target",
        "target alone against in a batch",
    }
    assert abs(measured.sources["reference alone against in a batch"] - 0.01) < 1e-9
    assert abs(measured.bound - 0.03) < 1e-9
    calibrated = measure_noise(reference, target, target, 2.0)
    assert "never-drafting target against reference" in calibrated.sources


def test_a_fault_in_the_target_cannot_widen_the_bound_it_is_judged_by() -> None:
    # The target's runs differ from the reference's from the first verify on, and alone
    # from in a batch (as vLLM's do with an accepted count one too many): reported only.
    reference = Observed(
        batched={i: _generation(-1.0, -1.0, -1.0, -1.0) for i in range(4)},
        alone={i: _generation(-1.0, -1.0, -1.0, -1.0) for i in range(4)},
    )
    target = Observed(
        batched={i: _generation(-1.2, -1.0, -3.0, -4.0) for i in range(4)},
        alone={i: _generation(-1.2, -1.0, -1.5, -1.0) for i in range(4)},
    )
    measured = measure_noise(reference, target, None, 3.0)
    assert measured.bound == 0.0
    assert measured.reported["target alone against in a batch"] == 3.0


def test_a_bit_stable_engine_has_bound_zero_and_a_calibrated_noisy_one_a_bound_above_zero() -> None:
    with _servers(Config(), Config(spec="ngram")) as (reference, target):
        stable = run(reference, target, WORKLOAD, Options())
    noisy_target = Config(spec="ngram", verify_noise=1e-3)
    with (
        _servers(Config(), noisy_target) as (reference, target),
        serving(Config(spec="never", verify_noise=1e-3)) as never,
    ):
        calibration = Server("calibrate", "--calibrate", never, timeout=30)
        noisy = run(reference, target, WORKLOAD, Options(), calibration=calibration)
    assert stable.noise.bound == 0.0
    assert all(result.outcome is Outcome.PASSED for result in stable.results)
    assert 0.0 < noisy.noise.bound < 0.1
    assert all(result.outcome is not Outcome.FAILED for result in noisy.results)


class _Dying:
    """A server whose requests fail as ``failures`` says, each after ``delays`` seconds."""

    def __init__(self, failures: dict[int, ServerFailedError], delays: dict[int, float]) -> None:
        self.failures, self.delays = failures, delays

    def complete(self, request: object, top: int, /, *, number: int) -> Generation:
        del request, top
        time.sleep(self.delays.get(number, 0.0))
        raise self.failures[number]


def test_of_requests_a_dying_server_failed_the_one_it_answered_with_an_error_is_reported() -> None:
    # The toy answers HTTP 500 to the request that kills it, then exits: its
    # other requests' connections are cut, and one may be cut first.
    cut = ServerFailedError("target", "stopped answering at request 0 (reset)")
    answered = ServerFailedError("target", "answered HTTP 500 to request 2: boom", answered=True)
    later = ServerFailedError("target", "answered HTTP 500 to request 3: boom", answered=True)
    dying = _Dying({0: cut, 2: answered, 3: later}, {2: 0.05, 3: 0.01})
    with pytest.raises(ServerFailedError) as raised:
        send(cast("Server", dying), WORKLOAD, (0, 2, 3), 1)
    assert raised.value is answered


def test_of_requests_all_cut_the_first_by_number_is_reported() -> None:
    cuts = {n: ServerFailedError("target", f"stopped answering at request {n}") for n in (1, 4)}
    dying = _Dying(cuts, {1: 0.05})
    with pytest.raises(ServerFailedError) as raised:
        send(cast("Server", dying), WORKLOAD, (4, 1), 1)
    assert raised.value is cuts[1]
