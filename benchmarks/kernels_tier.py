# SPDX-License-Identifier: MIT OR Apache-2.0
"""Measure the kernels tier's cost: the wheels' download, the venv's install, the run.

Run from the repository root, with the Python of a venv that has the package
installed (``python -m adapters.engines.wheels`` reads the engines' releases
from it)::

    python benchmarks/kernels_tier.py [--work DIR]

Everything starts cold, in ``--work`` (a new temporary folder by default): the
registered engines' wheels downloaded into an empty cache, the tier's venv made from
nothing (torch 2.13.0 CPU, triton 3.9.0, numpy, einops, packaging, the
package), then made again warm (what every later run pays: the package
reinstalled), then ``python -m pytest -m kernels -n auto tests/kernels`` on
that venv and cache, as ``.ci/run`` runs it (the older releases the real-bugs
tests drive are downloaded by those tests, into the same empty cache), then
its engine mutants, ``python -m pytest -m engine_mutants -n auto
tests/kernels``, the step after it, both with the tier's kernel memo
(``adapters/engines/kernel_memo.py``) in ``--work``, so that it starts empty
as in a clean clone. Prints one Markdown table; BENCHMARKS.md
("The kernels tier") keeps a run of it.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[1]
#: The variable naming the tier's kernel memo (adapters/engines/kernel_memo.py's
#: MEMO_VARIABLE; this script runs as a file, outside the package).
MEMO_VARIABLE: Final = "SSM_ROLLBACK_KERNEL_MEMO"


def _timed(command: list[str], env: dict[str, str], /) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0 and "pytest" not in command:
        sys.exit(f"kernels_tier.py: {' '.join(command)} failed: {done.stderr.strip()[-400:]}")
    last = (done.stdout.strip().splitlines() or [""])[-1]
    return seconds, last


def _megabytes(folder: Path, /) -> float:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) / 1e6


def environment(work: Path, /) -> dict[str, str]:
    """The tier's environment: its engine cache, its venv and its kernel memo in ``work``.

    The memo's folder is one the run makes, so that the tier starts without a
    memo, as a clean clone's first run does.
    """
    return {
        **os.environ,
        "SSM_ROLLBACK_ENGINE_CACHE": str(work / "cache"),
        "SSM_ROLLBACK_KERNELS_VENV": str(work / "venv"),
        MEMO_VARIABLE: str(work / "kernel-memo"),
    }


def main() -> int:
    """Measure, print the table; 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, help="an empty folder for the cache and the venv")
    arguments = parser.parse_args()
    work = arguments.work or Path(tempfile.mkdtemp(prefix="kernels-tier-"))
    env = environment(work)
    cache, venv = Path(env["SSM_ROLLBACK_ENGINE_CACHE"]), Path(env["SSM_ROLLBACK_KERNELS_VENV"])
    download, _ = _timed([sys.executable, "-m", "adapters.engines.wheels"], env)
    wheels_mb = _megabytes(cache / "wheels")
    cold, _ = _timed([sys.executable, "-m", "adapters.engines.environment"], env)
    venv_mb = _megabytes(venv)
    warm, _ = _timed([sys.executable, "-m", "adapters.engines.environment"], env)
    tier, outcome = _timed(
        [sys.executable, "-m", "pytest", "-m", "kernels", "-n", "auto", "tests/kernels"], env
    )
    mutants, mutated = _timed(
        [sys.executable, "-m", "pytest", "-m", "engine_mutants", "-n", "auto", "tests/kernels"],
        env,
    )
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print("| step | seconds | size |")
    print("| --- | --- | --- |")
    print(f"| download the three engine wheels | {download:.0f} | {wheels_mb:.0f} MB |")
    print(f"| make the venv, cold | {cold:.0f} | {venv_mb:.0f} MB |")
    print(f"| refresh the venv, warm (the package reinstalled) | {warm:.0f} | |")
    print(f"| `python -m pytest -m kernels -n auto tests/kernels` | {tier:.0f} | {outcome} |")
    step = "`python -m pytest -m engine_mutants -n auto tests/kernels`"
    print(f"| {step} | {mutants:.0f} | {mutated} |")
    total = download + cold + tier + mutants
    print(f"| the whole, from an empty cache | {total:.0f} | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
