# SPDX-License-Identifier: MIT OR Apache-2.0
"""What serve-check's client costs a server, against a bare client on the same server.

Run from the repository root::

    python benchmarks/serve_check_overhead.py [--requests 400] [--rounds 5]

It serves the toy engine (``ssm_rollback_spec.serving.toy``, plain decoding,
no step delay) on loopback and sends it the same greedy requests two ways,
alternating round by round so that both meet the same host: through the
judge's own client (:class:`ssm_rollback_spec.serving.client.Server`: the
dialect's body, the deadline, the reply parsed into tokens and logprobs) and
through a bare ``urllib`` POST whose reply is only ``json.loads``-ed. It
prints the median requests a second of each and their ratio, the figure
BENCHMARKS.md holds (goal: at least 0.9), as one row of that page's table.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import time
import urllib.request
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from ssm_rollback_spec.serving.client import Server
from ssm_rollback_spec.serving.toy import Config, serving

if TYPE_CHECKING:
    from ssm_rollback_spec.serving.workload import Request

_REQUEST: Final[Request] = {"prompt": [1, 2, 3, 1, 2, 3], "max_tokens": 8}
_TOP: Final = 5


def _judged(url: str, count: int) -> float:
    server = Server("target", "--target", url, timeout=30)
    server.model = "toy-recurrent"
    started = time.perf_counter()
    for number in range(count):
        server.complete(_REQUEST, _TOP, number=number)
    return count / (time.perf_counter() - started)


def _bare(url: str, count: int) -> float:
    body = json.dumps(
        {"model": "toy-recurrent", "prompt": _REQUEST["prompt"], "max_tokens": 8, "logprobs": _TOP}
    ).encode()
    started = time.perf_counter()
    for _ in range(count):
        request = urllib.request.Request(  # noqa: S310 - loopback
            url + "/v1/completions", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as reply:  # noqa: S310 - loopback
            json.loads(reply.read())
    return count / (time.perf_counter() - started)


def main() -> None:
    """Measure both clients round by round and print the page's row."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    arguments = parser.parse_args()
    judged, bare = [], []
    # The server's own cost only: no simulated step.
    with serving(Config(step=0.0)) as url:
        for _ in range(arguments.rounds):
            bare.append(_bare(url, arguments.requests))
            judged.append(_judged(url, arguments.requests))
    ratio = statistics.median(judged) / statistics.median(bare)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],  # noqa: S607 - the repository's own git
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    print(
        f"judge's client {statistics.median(judged):.0f} requests/s, bare client "
        f"{statistics.median(bare):.0f} requests/s ({arguments.rounds} rounds of "
        f"{arguments.requests}, medians; {platform.machine()}, Python {platform.python_version()})"
    )
    print(
        f"| serve-check's client | requests a second through the judge's client against a bare "
        f"client, one toy server | `python benchmarks/serve_check_overhead.py` | {commit} | "
        f"{datetime.now(tz=UTC).date()} | {ratio:.2f} | at least 0.9 |"
    )


if __name__ == "__main__":
    main()
