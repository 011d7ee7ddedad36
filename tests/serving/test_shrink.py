# SPDX-License-Identifier: MIT OR Apache-2.0
"""shrink: a failing set of requests cut to the smallest that still fails."""

from __future__ import annotations

import contextlib

from ssm_rollback_spec.serving.client import Server
from ssm_rollback_spec.serving.run import Options, run, still_fails
from ssm_rollback_spec.serving.shrink import shrink
from ssm_rollback_spec.serving.workload import draw_workload
from tests.fakes.openai_engine import Config, serving


def test_a_rollback_one_token_off_is_shrunk_to_a_smaller_set_that_still_fails() -> None:
    workload = draw_workload(
        1, count=8, vocab=64, num_drafts=3, block_size=8, max_tokens=24, concurrency=4
    )
    with contextlib.ExitStack() as stack:
        reference = Server(
            "reference", "--reference", stack.enter_context(serving(Config())), timeout=5
        )
        target = Server(
            "target",
            "--target",
            stack.enter_context(serving(Config(spec="ngram", fault="one-token"))),
            timeout=5,
        )
        judged = run(reference, target, workload, Options())
        shrunk = shrink(reference, target, judged, tries=40, top=5)
        assert shrunk is not None
        failing = workload.requests[shrunk.index]
        assert 1 <= len(shrunk.requests) <= 4
        assert shrunk.tries <= 40
        kept = shrunk.requests[shrunk.focus]
        assert kept["max_tokens"] <= failing["max_tokens"]
        assert len(kept["prompt"]) <= len(failing["prompt"])
        # What it gives still fails, tried again as the run judges it.
        assert still_fails(reference, target, list(shrunk.requests), shrunk.focus, 0.0, 5)


def test_a_run_with_nothing_failed_is_not_shrunk() -> None:
    workload = draw_workload(
        1, count=4, vocab=64, num_drafts=3, block_size=8, max_tokens=8, concurrency=4
    )
    with serving(Config()) as plain, serving(Config(spec="ngram")) as speculating:
        reference = Server("reference", "--reference", plain, timeout=5)
        target = Server("target", "--target", speculating, timeout=5)
        judged = run(reference, target, workload, Options())
        assert shrink(reference, target, judged, tries=10, top=5) is None
