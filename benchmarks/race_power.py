# SPDX-License-Identifier: MIT OR Apache-2.0
"""How often a default ``check`` catches a narrow compiled race, and what it costs.

Run from the repository root, with cargo and a C compiler::

    python benchmarks/race_power.py [--runs 20]

It builds four adapters: the Rust reference; the Rust racy build without
``race_cells`` (``--features racy-cell,no-race-cells``: a newcomer's
check-then-set, no lock, no sleep, and only the mandatory ``race``);
``tests/fakes/c-racy`` (the same mistake in C, also ``race`` only); and the
Rust racy build with ``race_cells``. It runs the
default ``check`` against each racy one ``--runs`` times and reports how many
runs failed, on which properties, and what the race budget costs against
the reference.

With ``--evidence``, it measures instead what the race properties conclude
(docs/protocol-race-evidence.md), quiet and under ``--load`` busy
processes of its own (4 by default): for the check-then-set behind ``race``
alone (the Rust race-only build and the C one) the share of runs that catch
it and the share reported NOT OBSERVED, and the same for the Rust build
behind ``race_cells``. Each run is ``check --clause RB-PUB-4 -k "budget or
fresh_cells"`` at the default race budget::

    python benchmarks/race_power.py --evidence --runs 5
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
C_SOURCE: Final = ROOT / "tests" / "fakes" / "c-racy" / "adapter.c"
C_RACY: Final = ROOT / "tests" / "fakes" / "c-racy" / "target" / "c-racy-adapter"


def _build() -> None:
    manifest = ["--manifest-path", str(CRATE / "Cargo.toml")]
    common = ["cargo", "build", "--release", "--offline", "--quiet", *manifest]
    subprocess.run(common, check=True)
    racy = ["--features", "racy-cell,no-race-cells"]
    subprocess.run(
        [*common, *racy, "--target-dir", str(CRATE / "target" / "racy-race-only")], check=True
    )
    with_cells = ["--features", "racy-cell", "--target-dir", str(CRATE / "target" / "racy")]
    subprocess.run([*common, *with_cells], check=True)
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


#: The race properties that judge evidence, and what each run reads of them.
_EVIDENCE_ARGUMENTS: Final = ("--clause", "RB-PUB-4", "-k", "budget or fresh_cells")
_BUDGET: Final = "test_a_budget_of_races_in_fresh_processes_each_have_one_winner"
_CELLS: Final = "test_fresh_cells_raced_in_one_process_each_have_one_winner"
_SPIN: Final = "while True: pass"


def _outcome(document: dict[str, object], name: str, /) -> str:
    properties = document["properties"]
    assert isinstance(properties, list)
    [row] = [row for row in properties if row["property"].endswith(name)]
    return str(row["outcome"])


def _evidence(adapter: Path, runs: int, report: Path, name: str, /) -> None:
    """Print how often the property ``name`` caught the racy ``adapter``, and saw no race."""
    outcomes: dict[str, int] = {}
    walls = []
    for _ in range(runs):
        _, elapsed, document = _check(adapter, report, *_EVIDENCE_ARGUMENTS)
        walls.append(elapsed)
        outcome = _outcome(document, name)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    shown = ", ".join(
        f"{label} {outcomes.get(outcome, 0)} of {runs}"
        for outcome, label in (
            ("failed", "caught"),
            ("not-observed", "not observed"),
            ("passed", "seen, not caught"),
        )
    )
    others = sorted(set(outcomes) - {"failed", "not-observed", "passed"})
    extra = f", other: {others}" if others else ""
    behind = "race_cells" if name == _CELLS else "race alone"
    print(f"  {adapter.relative_to(ROOT)} ({behind}): {shown}{extra};"
          f" median {statistics.median(walls):.1f} s a run")  # fmt: skip


def _evidence_table(runs: int, load: int, report: Path, /) -> None:
    builds = [(RACE_ONLY, _BUDGET), (C_RACY, _BUDGET), (WITH_CELLS, _CELLS)]
    # One pass with none of the benchmark's own load, then one with --load busy processes.
    for busy in dict.fromkeys((0, load)):
        spinners = [subprocess.Popen([sys.executable, "-c", _SPIN]) for _ in range(busy)]
        try:
            time.sleep(0.5 if busy else 0)
            print(f"{busy} busy processes of the benchmark's own; load average"
                  " {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))  # fmt: skip
            for adapter, name in builds:
                _evidence(adapter, runs, report, name)
        finally:
            for spinner in spinners:
                spinner.kill()
                spinner.wait()


def main() -> int:
    """Build, run, and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--evidence", action="store_true", help="what the race properties conclude")
    parser.add_argument("--load", type=int, default=4, help="busy processes for --evidence")
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
        if arguments.evidence:
            _evidence_table(arguments.runs, arguments.load, report)
            print("load average at the end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
            return 0
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
