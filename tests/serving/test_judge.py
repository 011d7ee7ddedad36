# SPDX-License-Identifier: MIT OR Apache-2.0
"""judge: speculative against plain decoding, one request at a time, within a bound."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from ssm_rollback_spec.serving.client import Generation
from ssm_rollback_spec.serving.judge import ENDED, Outcome, compare, noise


def _run(tokens: str, *logprobs: dict[str, float]) -> Generation:
    """A generation of one-letter tokens, each position's listing given (else its token at 0)."""
    listed = [*logprobs] + [{token: 0.0} for token in tokens[len(logprobs) :]]
    return Generation(tuple(tokens), tuple(listed))


def test_two_runs_that_agree_exactly_pass_at_bound_zero() -> None:
    run = _run("ab", {"a": -0.1, "b": -2.0}, {"b": -0.2, "c": -1.0})
    comparison = compare(run, run, bound=0.0)
    assert comparison.outcome is Outcome.PASSED
    assert comparison.position is None
    assert comparison.sentence() == "2 positions agree (largest logprob difference 0)"


def test_logprobs_that_drift_past_the_bound_fail_even_where_every_token_agrees() -> None:
    reference = _run("abc", {"a": -0.1}, {"b": -0.1}, {"c": -0.1})
    target = _run("abc", {"a": -0.1}, {"b": -0.1}, {"c": -0.4})
    comparison = compare(reference, target, bound=0.1)
    assert comparison.outcome is Outcome.FAILED
    assert comparison.position is None
    assert comparison.drift_position == 2
    assert comparison.sentence() == (
        "logprobs drift past the bound at position 2: |difference| 0.3 > 0.1"
    )


def test_logprobs_within_the_bound_pass() -> None:
    reference = _run("abc", {"a": -0.1}, {"b": -0.1}, {"c": -0.1})
    target = _run("abc", {"a": -0.1}, {"b": -0.15}, {"c": -0.12})
    assert compare(reference, target, bound=0.1).outcome is Outcome.PASSED


def test_at_bound_zero_the_least_logprob_difference_fails() -> None:
    reference = _run("ab", {"a": -0.1}, {"b": -0.1})
    target = _run("ab", {"a": -0.1}, {"b": -0.1 + 1e-12})
    assert compare(reference, target, bound=0.0).outcome is Outcome.FAILED


def test_a_first_differing_token_within_the_references_margin_is_inconclusive() -> None:
    reference = _run("ab", {"a": -0.5}, {"b": -0.69, "c": -0.70})
    target = _run("ac", {"a": -0.5}, {"c": -0.69, "b": -0.70})
    comparison = compare(reference, target, bound=0.05)
    assert comparison.outcome is Outcome.INCONCLUSIVE
    assert comparison.position == 1
    assert (comparison.reference_token, comparison.target_token) == ("b", "c")
    assert comparison.margin is not None
    assert abs(comparison.margin - 0.01) < 1e-9
    assert (
        comparison.sentence() == "first differs at position 1: reference b (margin 0.01), target c"
    )


def test_a_first_differing_token_beyond_the_references_margin_fails() -> None:
    reference = _run("ab", {"a": -0.5}, {"b": -0.2, "c": -2.0})
    target = _run("ac", {"a": -0.5}, {"c": -0.2, "b": -2.0})
    comparison = compare(reference, target, bound=0.05)
    assert comparison.outcome is Outcome.FAILED
    assert comparison.position == 1
    assert comparison.margin == 1.8


def test_a_target_token_the_reference_did_not_list_fails_with_a_margin_at_least_its_listing() -> (
    None
):
    reference = _run("ab", {"a": -0.5}, {"b": -0.2, "c": -2.0})
    target = _run("az", {"a": -0.5}, {"z": -0.2})
    comparison = compare(reference, target, bound=0.05)
    assert comparison.outcome is Outcome.FAILED
    assert comparison.margin_at_least
    assert comparison.sentence() == (
        "first differs at position 1: reference b (margin at least 1.8), target z"
    )


def test_a_differing_token_at_bound_zero_with_any_margin_fails() -> None:
    reference = _run("ab", {"a": -0.5}, {"b": -0.6, "c": -0.6000001})
    target = _run("ac", {"a": -0.5}, {"b": -0.6, "c": -0.6000001})
    assert compare(reference, target, bound=0.0).outcome is Outcome.FAILED


def test_an_exact_tie_at_bound_zero_is_inconclusive() -> None:
    reference = _run("ab", {"a": -0.5}, {"b": -0.6, "c": -0.6})
    target = _run("ac", {"a": -0.5}, {"b": -0.6, "c": -0.6})
    assert compare(reference, target, bound=0.0).outcome is Outcome.INCONCLUSIVE


def test_a_target_that_ended_first_fails_where_the_reference_was_sure_of_its_next_token() -> None:
    reference = _run("abc", {"a": -0.1}, {"b": -0.1}, {"c": -0.01, "d": -5.0})
    target = _run("ab", {"a": -0.1}, {"b": -0.1})
    comparison = compare(reference, target, bound=0.1)
    assert comparison.outcome is Outcome.FAILED
    assert (comparison.position, comparison.reference_token, comparison.target_token) == (
        2,
        "c",
        ENDED,
    )
    assert comparison.margin_at_least


def test_a_reference_that_ended_first_is_inconclusive_its_margin_unknown() -> None:
    reference = _run("ab", {"a": -0.1}, {"b": -0.1})
    target = _run("abc", {"a": -0.1}, {"b": -0.1}, {"c": -0.1})
    comparison = compare(reference, target, bound=0.1)
    assert comparison.outcome is Outcome.INCONCLUSIVE
    assert comparison.reference_token == ENDED
    assert comparison.margin is None
    assert "(margin unknown)" in comparison.sentence()


def test_logprobs_after_the_first_difference_are_not_compared() -> None:
    reference = _run("abc", {"a": -0.1}, {"b": -0.6, "x": -0.8}, {"c": -0.1})
    target = _run("axc", {"a": -0.1}, {"b": -0.6, "x": -0.8}, {"c": -9.0})
    comparison = compare(reference, target, bound=0.5)
    assert comparison.outcome is Outcome.INCONCLUSIVE
    assert comparison.drift == 0.0
    assert comparison.compared == 2


def test_noise_is_the_largest_difference_on_the_shared_context() -> None:
    first = _run("abc", {"a": -0.1}, {"b": -0.2}, {"c": -0.3})
    second = _run("abd", {"a": -0.1}, {"b": -0.25}, {"d": -0.3, "c": -0.9})
    assert abs(noise(first, second) - 0.6) < 1e-9
    assert noise(first, second, positions=1) == 0.0
    assert abs(noise(first, second, positions=2) - 0.05) < 1e-9


_LOGPROB = st.floats(min_value=-20.0, max_value=0.0, allow_nan=False)


@given(
    st.lists(st.tuples(_LOGPROB, _LOGPROB), min_size=1, max_size=8),
    st.floats(min_value=0.0, max_value=1.0, allow_nan=False),
)
@example([(-0.5, -0.5)], 0.0)
def test_a_target_whose_logprobs_move_within_the_bound_passes_and_past_it_fails(
    positions: list[tuple[float, float]], bound: float
) -> None:
    reference = Generation(("t",) * len(positions), tuple({"t": a} for a, _ in positions))
    target = Generation(("t",) * len(positions), tuple({"t": b} for _, b in positions))
    largest = max(abs(a - b) for a, b in positions)
    outcome = compare(reference, target, bound=bound).outcome
    assert outcome is (Outcome.FAILED if largest > bound else Outcome.PASSED)


# The judge at its edges: a bound met exactly, ties in where it looks, short listings.


def test_a_drift_equal_to_the_bound_is_within_it_and_the_failure_is_the_margins() -> None:
    # 0.25 and 0.5 are exact in binary, so the drift is the bound to the last bit.
    reference = Generation(("a", "b"), ({"a": -0.5}, {"b": -0.1, "c": -1.0}))
    target = Generation(("a", "c"), ({"a": -0.25}, {"b": -0.1, "c": -1.0}))
    comparison = compare(reference, target, bound=0.25)
    assert comparison.outcome is Outcome.FAILED
    assert comparison.drift == 0.25
    assert comparison.margin_at_least is False
    assert (
        comparison.sentence() == "first differs at position 1: reference b (margin 0.9), target c"
    )


def test_of_two_equal_drifts_the_first_position_is_reported() -> None:
    reference = Generation(("a", "b"), ({"a": -0.5}, {"b": -0.5}))
    target = Generation(("a", "b"), ({"a": -0.25}, {"b": -0.25}))
    comparison = compare(reference, target, bound=0.5)
    assert (comparison.outcome, comparison.drift, comparison.drift_position) == (
        Outcome.PASSED,
        0.25,
        0,
    )


def test_runs_that_agree_exactly_report_their_first_position_as_the_drifts() -> None:
    run = Generation(("a", "b"), ({"a": -0.5}, {"b": -0.5}))
    comparison = compare(run, run, bound=0.0)
    assert (comparison.drift, comparison.drift_position) == (0.0, 0)
    assert comparison.margin_at_least is False
    assert comparison.margin is None


def test_a_difference_where_the_reference_listed_nothing_has_no_margin() -> None:
    # The reference's listing stops before the first differing position.
    reference = Generation(("a", "b"), ({"a": -0.5},))
    target = Generation(("a", "c"), ({"a": -0.5}, {"c": -0.1}, {"d": -0.1}))
    comparison = compare(reference, target, bound=0.1)
    assert comparison.outcome is Outcome.INCONCLUSIVE
    assert (comparison.position, comparison.margin, comparison.compared) == (1, None, 1)


def test_positions_compared_stop_at_the_targets_shorter_listing() -> None:
    reference = Generation(("a", "b", "c"), ({"a": -0.5}, {"b": -0.5}, {"c": -0.5}))
    target = Generation(("a", "b", "d"), ({"a": -0.5},))
    comparison = compare(reference, target, bound=0.1)
    assert (comparison.position, comparison.compared) == (2, 1)
    # The reference listed only its own token: the margin is at least 0, a near tie.
    assert (comparison.outcome, comparison.margin, comparison.margin_at_least) == (
        Outcome.INCONCLUSIVE,
        0.0,
        True,
    )


def test_a_run_that_ends_first_is_compared_against_the_end() -> None:
    reference = Generation(("a",), ({"a": -0.5},))
    target = Generation(("a", "b"), ({"a": -0.5}, {"b": -0.5}))
    comparison = compare(reference, target, bound=0.1)
    assert (comparison.position, comparison.reference_token, comparison.target_token) == (
        1,
        ENDED,
        "b",
    )
    assert (comparison.outcome, comparison.margin) == (Outcome.INCONCLUSIVE, None)
