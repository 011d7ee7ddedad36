# SPDX-License-Identifier: MIT OR Apache-2.0
"""How often a default ``check`` catches a narrow compiled race, and what it costs.

Run from the repository root, with cargo::

    python benchmarks/race_power.py [--runs 20]

It builds the Rust adapter twice (the reference, and ``--features racy-cell``:
a newcomer's check-then-set, no lock, no sleep), runs the default ``check``
against the racy one ``--runs`` times, and reports how many runs failed, on
which properties, and how long the race properties took against the
reference adapter.
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
RACY: Final = CRATE / "target" / "racy" / "release" / "ssm-rollback-adapter"
RACE_PROPERTY: Final = (
    "test_published_mode.py::test_fresh_cells_raced_in_one_process_each_have_one_winner"
)


def _build() -> None:
    manifest = ["--manifest-path", str(CRATE / "Cargo.toml")]
    common = ["cargo", "build", "--release", "--offline", "--quiet", *manifest]
    subprocess.run(common, check=True)
    racy = ["--features", "racy-cell", "--target-dir", str(CRATE / "target" / "racy")]
    subprocess.run([*common, *racy], check=True)


def _check(adapter: Path, report: Path, /) -> tuple[int, float, dict[str, object]]:
    env = {**os.environ, "HYPOTHESIS_PROFILE": "ci"}
    command = [sys.executable, "-m", "spec.tools.cli", "check", "--impl-cmd", str(adapter)]
    started = time.perf_counter()
    finished = subprocess.run(
        [*command, "--json", str(report)], cwd=ROOT, env=env, capture_output=True, check=False
    )
    elapsed = time.perf_counter() - started
    document: dict[str, object] = json.loads(report.read_text(encoding="utf-8"))
    return finished.returncode, elapsed, document


def _seconds_of(document: dict[str, object], name: str, /) -> float:
    for row in document["properties"]:  # type: ignore[attr-defined]
        if row["property"] == name:
            return float(row["seconds"])
    raise KeyError(name)


def main() -> int:
    """Build, run, and print the figures as a Markdown fragment."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    arguments = parser.parse_args()
    _build()
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        status, reference_seconds, document = _check(REFERENCE, report)
        assert status == 0, "the reference adapter must pass"
        race_seconds = _seconds_of(document, RACE_PROPERTY)
        caught = 0
        walls = []
        failing: dict[str, int] = {}
        for _ in range(arguments.runs):
            status, elapsed, document = _check(RACY, report)
            walls.append(elapsed)
            failed = document["failed"]
            assert isinstance(failed, list)
            caught += status == 1 and bool(failed)
            for name in failed:
                failing[str(name)] = failing.get(str(name), 0) + 1
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print(f"racy compiled adapter caught in {caught} of {arguments.runs} default check runs")
    for name, count in sorted(failing.items()):
        print(f"  failed {count}x: {name}")
    print(f"default check against the racy adapter: median {statistics.median(walls):.1f} s")
    print(f"default check against the reference Rust adapter: {reference_seconds:.1f} s")
    print(f"of which the race_cells property: {race_seconds:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
