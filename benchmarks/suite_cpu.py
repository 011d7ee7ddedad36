# SPDX-License-Identifier: MIT OR Apache-2.0
"""Where the everyday suite's CPU goes: each test's, by file, and the floor it puts under the run.

Runs ``python -m pytest -n auto`` in this clone with this module as a
plugin, which takes, around each test, the CPU seconds of the worker and of
every child it waited for (``getrusage``: an adapter, a ``check`` run, a
build), and prints the run's wall time, the CPU of the whole run (the
controller, the workers' collection and every test), the sum over tests,
the files that took most, and the floor: the whole run's CPU over the
cores. No scheduling brings the run under its floor; only less work does.

    python benchmarks/suite_cpu.py [--files N] [pytest arguments ...]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pytest

if TYPE_CHECKING:
    from collections.abc import Generator

__all__ = ["main", "pytest_runtest_protocol", "pytest_sessionfinish"]

_ROOT: Final = Path(__file__).resolve().parents[1]
#: Where each worker writes its tests' figures: ``{this}.{worker}.json``.
_OUT: Final = "SUITE_CPU_OUT"
#: Each test's node ID, wall seconds and CPU seconds, in this process.
_measured: list[tuple[str, float, float]] = []


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    waited = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    """Time ``item``'s setup, call and teardown, on the wall and in CPU."""
    start, cpu = time.monotonic(), _cpu()
    try:
        return (yield)
    finally:
        _measured.append((item.nodeid, time.monotonic() - start, _cpu() - cpu))


def pytest_sessionfinish() -> None:
    """Write this process's figures where the script reads them."""
    out = os.environ.get(_OUT)
    if out and _measured:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        Path(f"{out}.{worker}.json").write_text(json.dumps(_measured), encoding="utf-8")


def main() -> int:
    """Run the suite once under the plugin and print where its CPU went."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=12, help="how many files to list")
    arguments, extra = parser.parse_known_args()
    with tempfile.TemporaryDirectory() as scratch:
        out = str(Path(scratch) / "cpu")
        env = {
            **os.environ,
            _OUT: out,
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(Path(__file__).parent), os.environ.get("PYTHONPATH")])
            ),
        }
        start, before = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-n", "auto", "-q", "-p", "suite_cpu", *extra],
            cwd=_ROOT,
            env=env,
            check=False,
        )
        wall = time.monotonic() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        whole = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        rows = [
            row for path in Path(scratch).glob("cpu.*.json")
            for row in json.loads(path.read_text(encoding="utf-8"))
        ]  # fmt: skip
    cores = os.cpu_count() or 1
    tests = sum(cpu for _, _, cpu in rows)
    by_file: Counter[str] = Counter()
    for node, _, cpu in rows:
        by_file[node.split("::")[0]] += cpu
    print(f"\n{len(rows)} tests, pytest exit {done.returncode}, {cores} cores")
    print(f"wall {wall:.1f} s; CPU of the whole run {whole:.1f} s, of the tests {tests:.1f} s")
    print(f"floor (the whole run's CPU over {cores} cores): {whole / cores:.1f} s")
    print("\n| file | CPU (s) |\n| --- | ---: |")
    for path, cpu in by_file.most_common(arguments.files):
        print(f"| `{path}` | {cpu:.1f} |")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
