# SPDX-License-Identifier: MIT OR Apache-2.0
"""Measure the protocol path, fresh-process traces and whole-suite wall time.

Run from the repository root::

    python benchmarks/protocol_bench.py [--requests N] [--fresh N] [--write PATH]

Everything is measured side by side in one run, on the same machine, through
the same driver the properties use.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ssm_rollback_spec.harness.subprocess_driver import SubprocessDriver

if TYPE_CHECKING:
    from collections.abc import Callable

ROOT: Final = Path(__file__).resolve().parents[1]
RUST_ADAPTER: Final = ROOT / "adapters" / "rust" / "target" / "release" / "ssm-rollback-adapter"
PYTHON_ADAPTER: Final = [sys.executable, "-m", "ssm_rollback_spec.harness.adapter"]
# The limit: a peer that does no work but answer each line at once.
NATIVE_ECHO: Final = ["sed", "-u", 's/.*/{"ok":null}/']
_PYTHON_ECHO_CODE: Final = """
import sys
for _ in sys.stdin.buffer:
    sys.stdout.buffer.write(b'{"ok":null}\\n')
    sys.stdout.buffer.flush()
"""
PYTHON_ECHO: Final = [sys.executable, "-c", _PYTHON_ECHO_CODE]
STATELESS: Final = {
    "op": "ring_bytes",
    "num_ssm_layers": 36,
    "row_bytes": 24832,
    "k_ceiling": 4,
    "mtp_state_slots": 2,
}
TRACE: Final = {"op": "trace", "events": [{"op": "get"}, {"op": "set", "mode": "replay"}]}


def requests_per_second(argv: list[str], count: int) -> float:
    """Lock-step requests per second through one long-lived process."""
    with SubprocessDriver(argv) as driver:
        for _ in range(50):
            driver.request(STATELESS)
        started = time.perf_counter()
        for _ in range(count):
            driver.request(STATELESS)
        return count / (time.perf_counter() - started)


def _seconds(action: Callable[[], object], /) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def start_costs(argv: list[str], count: int) -> tuple[float, float]:
    """Median seconds of a bare start and exit, and of one trace in a fresh process.

    The two alternate, sample by sample, so both see the same machine.
    """
    driver = SubprocessDriver(argv)

    def bare() -> None:
        subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=True)

    def trace() -> None:
        driver.request(TRACE)

    samples = [(_seconds(bare), _seconds(trace)) for _ in range(count)]
    return (
        statistics.median(sample[0] for sample in samples),
        statistics.median(sample[1] for sample in samples),
    )


def suite_seconds(impl_cmd: str | None) -> float:
    """Wall time of the property suite under the ci profile."""
    command = [sys.executable, "-m", "pytest", "tests/properties", "-q", "-p", "no:cacheprovider"]
    if impl_cmd is not None:
        command.append(f"--impl-cmd={impl_cmd}")
    env = {**os.environ, "HYPOTHESIS_PROFILE": "ci"}
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> int:
    """Run every measurement and print (or write) the Markdown report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--fresh", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-suite", action="store_true", help="skip the suite wall times")
    parser.add_argument("--write", metavar="PATH", help="write the results as Markdown")
    arguments = parser.parse_args()
    if not RUST_ADAPTER.exists():
        subprocess.run(
            ["cargo", "build", "--release", "--offline", "--quiet"],  # noqa: S607
            cwd=RUST_ADAPTER.parents[2],
            check=True,
        )
    if shutil.which("sed") is None:
        parser.error("sed is needed for the native echo")
    machine = (
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}"
    )
    command = (
        f"Command: `python benchmarks/protocol_bench.py --requests {arguments.requests} "
        f"--fresh {arguments.fresh} --rounds {arguments.rounds}`"
    )
    lines = [
        machine,
        command,
        "",
        "### Stateless requests through the protocol (lock-step, one long-lived process)",
        "",
        "| peer | requests/s | share of the echo limit |",
        "| --- | ---: | ---: |",
    ]
    peers = {
        "native echo": NATIVE_ECHO,
        "Python echo": PYTHON_ECHO,
        "Rust adapter": [str(RUST_ADAPTER)],
        "Python adapter": PYTHON_ADAPTER,
    }
    # Rounds interleave the peers, so a burst of load elsewhere on the machine
    # hits all of them alike; each figure is the median of its rounds.
    rounds: dict[str, list[float]] = {name: [] for name in peers}
    for _ in range(arguments.rounds):
        for name, argv in peers.items():
            rounds[name].append(requests_per_second(argv, arguments.requests))
    rate = {name: statistics.median(values) for name, values in rounds.items()}
    limit = max(rate["native echo"], rate["Python echo"])
    lines += [
        f"| {name} | {rate[name]:,.0f} | {rate[name] / limit:.0%} |"
        for name in ("native echo", "Python echo", "Rust adapter", "Python adapter")
    ]
    lines += [
        "",
        "The limit is the faster echo: a peer that answers each line at once and does",
        "no work, over the same pipes and the same driver.",
        "",
        "### One trace in a fresh process, against a bare start and exit (median)",
        "",
        "| adapter | bare start + exit | fresh-process trace | ratio |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, argv in (("Rust", [str(RUST_ADAPTER)]), ("Python", PYTHON_ADAPTER)):
        bare, fresh = start_costs(argv, arguments.fresh)
        lines.append(
            f"| {name} | {bare * 1000:.1f} ms | {fresh * 1000:.1f} ms | {fresh / bare:.2f} |"
        )
    if not arguments.no_suite:
        lines += [
            "",
            "### Whole property suite, `ci` profile (wall time)",
            "",
            "| implementation | seconds |",
            "| --- | ---: |",
            f"| in-process reference | {suite_seconds(None):.1f} |",
            f"| Rust adapter | {suite_seconds(str(RUST_ADAPTER)):.1f} |",
            f"| Python adapter | {suite_seconds(' '.join(PYTHON_ADAPTER)):.1f} |",
        ]
    report = "\n".join(lines) + "\n"
    print(report)
    if arguments.write:
        Path(arguments.write).write_text(report, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
