# SPDX-License-Identifier: MIT OR Apache-2.0
"""How often a default ``check`` catches a narrow compiled race, and what it costs.

Run from the repository root, with cargo and a C compiler::

    python benchmarks/race_power.py [--runs 20]

It builds four adapters: the Rust reference; the Rust racy build without
``race_cells`` (``--features racy-cell,no-race-cells``: a newcomer's
check-then-set, no lock, no sleep, and only the mandatory ``race``);
``adapters/c-racy`` (the same mistake in C, also ``race`` only); and the
Rust racy build with ``race_cells``. It runs the
default ``check`` against each racy one ``--runs`` times and reports how many
runs failed, on which properties, and what the race budget costs against
the reference.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[1]
CRATE: Final = ROOT / "adapters" / "rust"
REFERENCE: Final = CRATE / "target" / "release" / "ssm-rollback-adapter"
RACE_ONLY: Final = CRATE / "target" / "racy-race-only" / "release" / "ssm-rollback-adapter"
WITH_CELLS: Final = CRATE / "target" / "racy" / "release" / "ssm-rollback-adapter"
C_SOURCE: Final = ROOT / "adapters" / "c-racy" / "adapter.c"
C_RACY: Final = ROOT / "adapters" / "c-racy" / "target" / "c-racy-adapter"


def _build() -> None:
    manifest = ["--manifest-path", str(CRATE / "Cargo.toml")]
    common = ["cargo", "build", "--release", "--offline", "--quiet", *manifest]
    subprocess.run(common, check=True)
    racy = ["--features", "racy-cell,no-race-cells"]
    subprocess.run(
        [*common, *racy, "--target-dir", str(CRATE / "target" / "racy-race-only")], check=True
    )
    C_RACY.parent.mkdir(exist_ok=True)
    compile_c = ["cc", "-O2", "-pthread", "-o", str(C_RACY), str(C_SOURCE)]
    subprocess.run(compile_c, check=True)


def _check(adapter: Path, report: Path, /, *extra: str) -> tuple[int, float, dict[str, object]]:
    env = {**os.environ, "HYPOTHESIS_PROFILE": "ci"}
    command = [
        sys.executable,
        "-m",
        "ssm_rollback_spec.tools.cli",
        "check",
        "--impl-cmd",
        str(adapter),
        *extra,
    ]
    started = time.perf_counter()
    finished = subprocess.run(
        [*command, "--json", str(report)], cwd=ROOT, env=env, capture_output=True, check=False
    )
    elapsed = time.perf_counter() - started
    document: dict[str, object] = json.loads(report.read_text(encoding="utf-8"))
    return finished.returncode, elapsed, document


def _runs(adapter: Path, runs: int, report: Path, /) -> None:
    caught = 0
    walls = []
    failing: dict[str, int] = {}
    for _ in range(runs):
        status, elapsed, document = _check(adapter, report)
        walls.append(elapsed)
        failed = document["failed"]
        assert isinstance(failed, list)
        caught += status == 1 and bool(failed)
        for name in failed:
            failing[str(name)] = failing.get(str(name), 0) + 1
    print(f"{adapter.relative_to(ROOT)}: caught in {caught} of {runs} default check runs")
    for name, count in sorted(failing.items()):
        print(f"  failed {count}x: {name}")
    print(f"  median wall time {statistics.median(walls):.1f} s")


def main() -> int:
    """Build, run, and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument(
        "--only", choices=("rust-race-only", "c-racy", "rust-with-cells"), action="append"
    )
    arguments = parser.parse_args()
    _build()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    # Other tenants' load decides how often two racers hold both cores at once.
    print("load average at the start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        chosen = {"rust-race-only": RACE_ONLY, "c-racy": C_RACY, "rust-with-cells": WITH_CELLS}
        for name, adapter in chosen.items():
            if not arguments.only or name in arguments.only:
                _runs(adapter, arguments.runs, report)
        status, with_budget, _ = _check(REFERENCE, report)
        assert status == 0, "the reference adapter must pass"
        status, without, _ = _check(REFERENCE, report, "--race-budget", "0")
        assert status == 0, "the reference adapter must pass"
    print(f"reference Rust adapter: {with_budget:.1f} s, {without:.1f} s with --race-budget 0")
    print("load average at the end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
