# SPDX-License-Identifier: MIT OR Apache-2.0
"""Measure how far each engine's batch is from its own sequences run alone (RB-REPLAY-13).

Run from the repository root, after ``python -m adapters.engines.environment``
(which prints the kernels venv's Python)::

    python benchmarks/batch_alone.py KERNELS_PYTHON

For vLLM in both cache modes and SGLang on both its paths, ``vectors run
--clause RB-REPLAY-13`` over ``vectors/replay/batch_alone.json``: each case's
largest distance between an entry in the batch and the same entry alone
(relative to the field's largest value; 0 is bit for bit), and the run's wall
time. Prints one Markdown table; BENCHMARKS.md ("A batch against its
sequences alone") keeps a run of it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[1]
#: (engine, its batch flags) for each path judged.
_PATHS: Final = (
    ("vllm", ("--cache-mode", "none")),
    ("vllm", ("--cache-mode", "align")),
    ("sglang", ("--cache-mode", "snapshot")),
    ("sglang", ("--cache-mode", "replayssm")),
)


def _run(python: str, engine: str, flags: tuple[str, ...], report: Path, /) -> float:
    adapter = " ".join([python, "-m", f"adapters.engines.{engine}", *flags])
    command = [sys.executable, "-m", "ssm_rollback_spec.tools.cli", "vectors", "run"]
    command += ["--impl-cmd", adapter, "--impl-timeout", "900", "--clause", "RB-REPLAY-13"]
    command += ["--json", str(report)]
    start = time.perf_counter()
    subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    return time.perf_counter() - start


def main() -> int:
    """Measure, print the table; 0, or 1 with one line when a run wrote no report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("python", help="the kernels venv's Python")
    arguments = parser.parse_args()
    print("| engine, flags | case | outcome | largest distance | run (s) |")
    print("| --- | --- | --- | ---: | ---: |")
    with tempfile.TemporaryDirectory() as folder:
        for engine, flags in _PATHS:
            report = Path(folder) / f"{engine}{'-'.join(flags)}.json"
            seconds = _run(arguments.python, engine, flags, report)
            if not report.exists():
                sys.stderr.write(f"batch_alone.py: {engine} {' '.join(flags)} wrote no report\n")
                return 1
            for case in json.loads(report.read_text(encoding="utf-8"))["cases"]:
                if case["outcome"] == "skipped":
                    continue
                distance = case.get("distance")
                shown = "" if distance is None else f"{distance:.3g}"
                print(
                    f"| {engine} {' '.join(flags)} | {case['id']} | {case['outcome']} "
                    f"| {shown} | {seconds:.0f} |"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
