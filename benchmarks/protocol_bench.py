# SPDX-License-Identifier: MIT OR Apache-2.0
"""Measure the protocol path, fresh-process traces and whole-suite wall time.

Run from the repository root::

    python benchmarks/protocol_bench.py [--requests N] [--fresh N] [--write BENCHMARKS.md]

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

from spec.subprocess_driver import SubprocessDriver

if TYPE_CHECKING:
    from collections.abc import Callable

ROOT: Final = Path(__file__).resolve().parents[1]
RUST_ADAPTER: Final = ROOT / "adapters" / "rust" / "target" / "release" / "ssm-rollback-adapter"
PYTHON_ADAPTER: Final = [sys.executable, "-m", "spec.adapter"]
# The limit: a peer that does no work but answer each line at once.
NATIVE_ECHO: Final = ["sed", "-u", 's/.*/{"ok":null}/']
_PYTHON_ECHO_CODE: Final = """
import sys
for _ in sys.stdin.buffer:
    sys.stdout.buffer.write(b'{"ok":null}\\n')
    sys.stdout.buffer.flush()
"""
PYTHON_ECHO: Final = [sys.executable, "-c", _PYTHON_ECHO_CODE]
STATELESS: Final = {"op": "ring_bytes", "num_ssm_layers": 36, "row_bytes": 24832}
STATELESS_FULL: Final = {**STATELESS, "k_ceiling": 4, "mtp_state_slots": 2}
TRACE: Final = {"op": "trace", "events": [{"op": "get"}, {"op": "set", "mode": "replay"}]}


def requests_per_second(argv: list[str], count: int) -> float:
    """Lock-step requests per second through one long-lived process."""
    with SubprocessDriver(argv) as driver:
        for _ in range(50):
            driver.request(STATELESS_FULL)
        started = time.perf_counter()
        for _ in range(count):
            driver.request(STATELESS_FULL)
        return count / (time.perf_counter() - started)


def _median_seconds(action: Callable[[], object], count: int) -> float:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def fresh_trace_seconds(argv: list[str], count: int) -> float:
    """Median seconds of one trace in a fresh adapter process, start to exit."""
    driver = SubprocessDriver(argv)
    return _median_seconds(lambda: driver.request(TRACE), count)


def bare_start_seconds(argv: list[str], count: int) -> float:
    """Median seconds to start the same adapter and see it exit at end of input."""

    def start_and_exit() -> None:
        subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=True)

    return _median_seconds(start_and_exit, count)


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
    parser.add_argument("--fresh", type=int, default=40)
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
        f"--fresh {arguments.fresh}`"
    )
    lines = [
        machine,
        command,
        "",
        "### Stateless requests through the protocol (lock-step, one long-lived process)",
        "",
        "| peer | requests/s | share of its echo limit |",
        "| --- | ---: | ---: |",
    ]
    native_echo = requests_per_second(NATIVE_ECHO, arguments.requests)
    python_echo = requests_per_second(PYTHON_ECHO, arguments.requests)
    rust = requests_per_second([str(RUST_ADAPTER)], arguments.requests)
    python = requests_per_second(PYTHON_ADAPTER, arguments.requests)
    lines += [
        f"| echo, native (`sed -u`) | {native_echo:,.0f} | 100% |",
        f"| Rust adapter | {rust:,.0f} | {rust / native_echo:.0%} of native echo |",
        f"| echo, Python | {python_echo:,.0f} | 100% |",
        f"| Python adapter | {python:,.0f} | {python / python_echo:.0%} of Python echo |",
        "",
        "### One trace in a fresh process, against a bare start and exit (median)",
        "",
        "| adapter | bare start + exit | fresh-process trace | ratio |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, argv in (("Rust", [str(RUST_ADAPTER)]), ("Python", PYTHON_ADAPTER)):
        bare = bare_start_seconds(argv, arguments.fresh)
        fresh = fresh_trace_seconds(argv, arguments.fresh)
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
