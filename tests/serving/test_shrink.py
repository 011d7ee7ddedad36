# SPDX-License-Identifier: MIT OR Apache-2.0
"""shrink: a failing set of requests cut to the smallest that still fails."""

from __future__ import annotations

import contextlib
import shlex
import socket
import sys
from functools import partial
from typing import TYPE_CHECKING

from ssm_rollback_spec.serving.client import Server
from ssm_rollback_spec.serving.launch import started
from ssm_rollback_spec.serving.run import Options, run, still_fails
from ssm_rollback_spec.serving.shrink import shrink, shrink_crash
from ssm_rollback_spec.serving.workload import Request, Workload, draw_workload
from tests.fakes.openai_engine import Config, serving

if TYPE_CHECKING:
    from pathlib import Path


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


def test_a_crash_no_request_causes_alone_is_shrunk_to_the_requests_that_cause_it_together(
    tmp_path: Path,
) -> None:
    # The target dies when a request arrives while another is in flight: no request
    # kills it alone, any two sent at once do. Started from a command, it is started
    # again after each crash.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    url = f"http://127.0.0.1:{port}"
    command = shlex.join(
        [
            sys.executable,
            "-m",
            "ssm_rollback_spec.serving.toy",
            "--port",
            str(port),
            "--spec",
            "ngram",
            "--die-with",
            "1",
            "--step",
            "0.01",
        ]
    )
    requests = tuple(
        Request(prompt=[1 + i, 2 + i, 3 + i, 1 + i, 2 + i], max_tokens=8) for i in range(3)
    )
    workload = Workload(requests, ((0, 1, 2),))
    launch = [("target", "--target-cmd", command, url)]
    with started(launch, deadline=30, logs=tmp_path) as (launched,), serving(Config()) as plain:
        reference = Server("reference", "--reference", plain, timeout=30)
        target = Server("target", "--target", url, timeout=30)
        judged = run(reference, target, workload, Options())
        assert judged.target.failure is not None
        shrunk = shrink_crash(target, judged, partial(launched.restart, 30), tries=10, top=5)
    assert len(shrunk.requests) == 2
    assert set(map(str, shrunk.requests)) <= set(map(str, requests))
    assert shrunk.tries == 4  # each of the three alone, then one dropped
