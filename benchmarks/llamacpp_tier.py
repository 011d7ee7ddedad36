# SPDX-License-Identifier: MIT OR Apache-2.0
"""Measure the llamacpp tier's cost: llama.cpp's cold build, the adapters and models, the run.

Run from the repository root::

    python benchmarks/llamacpp_tier.py [--work DIR] [--sdist FILE]

Everything starts cold in ``--work`` (a new temporary folder by default), used
as build.py's cache (``SSM_ROLLBACK_LLAMA_CPP_CACHE``): the sdist downloaded
(or, with ``--sdist``, a ``llama_cpp_python-<version>.tar.gz`` already
downloaded copied in, and the download not timed), unpacked, configured and
built (``build.py`` cold: ggml and llama, then the two adapters and the two
models); then the adapters and models alone again (their outputs removed, the
libraries kept); then ``build.py`` warm (everything found); then ``python -m
pytest -m llamacpp tests/llamacpp`` on that cache. Every step runs under
``nice -n 10``, as build.py's own. Before the tier, ``build.py --own-test``
builds llama.cpp's own rollback test (the common library and the test, in the
same tree) cold, then again warm, and the test is run once on the tier's
Qwen3.5 model. Prints one Markdown table with the load average before and
after: on a shared host the seconds are an upper bound. BENCHMARKS.md ("The
llamacpp tier") keeps a run of it.

``--own-test-only`` times only those own-test steps, on a cache where
``build.py`` has already built the libraries (``--work``, or the default
cache); the first such run there is the cold one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[1]
BUILD: Final = ROOT / "adapters" / "llama-cpp" / "build.py"
PINNED: Final = "0.3.36"
_NICE: Final = ("nice", "-n", "10")


def _timed(command: list[str], env: dict[str, str], /) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [*_NICE, *command], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        tail = (done.stderr.strip() or done.stdout.strip())[-400:]
        sys.exit(f"llamacpp_tier.py: {' '.join(command)} failed: {tail}")
    return seconds


def _own_test(env: dict[str, str], /) -> list[str]:
    """Time build.py --own-test (cold on a new tree), again (warm), and one run of the test."""
    cold = _timed([sys.executable, str(BUILD), "--own-test"], env)
    start = time.perf_counter()
    found = subprocess.run(
        [*_NICE, sys.executable, str(BUILD), "--own-test"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    warm = time.perf_counter() - start
    binary = json.loads(found.stdout)["binary"]
    model = json.loads(
        subprocess.run(
            [sys.executable, str(BUILD)], env=env, capture_output=True, text=True, check=True
        ).stdout
    )["model"]
    run = _timed([binary, "-m", model, "-t", "1"], env)
    return [
        (
            "| build.py --own-test with the libraries built: llama.cpp's common library and "
            f"test-recurrent-state-rollback (cold the first time in this tree) | {cold:.0f} |"
        ),
        f"| build.py --own-test warm: everything cached | {warm:.1f} |",
        f"| test-recurrent-state-rollback on the tier's Qwen3.5 model, one thread | {run:.1f} |",
    ]


def _load() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def main() -> int:
    """Measure, print the table; 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, help="an empty folder for the cache")
    parser.add_argument("--sdist", type=Path, help="a downloaded sdist to copy in (no download)")
    parser.add_argument(
        "--own-test-only",
        action="store_true",
        help="time only build.py --own-test and its run, on a cache with the libraries built",
    )
    arguments = parser.parse_args()
    if arguments.own_test_only:
        env = dict(os.environ)
        if arguments.work:
            env["SSM_ROLLBACK_LLAMA_CPP_CACHE"] = str(arguments.work)
        before = _load()
        rows = _own_test(env)
        print(
            f"machine: {platform.machine()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}"
        )
        print(f"load average before: {before}; after: {_load()}\n")
        print("| step | seconds |\n| --- | ---: |")
        print("\n".join(rows))
        return 0
    work = arguments.work or Path(tempfile.mkdtemp(prefix="llamacpp-tier-"))
    folder = work / PINNED
    folder.mkdir(parents=True, exist_ok=True)
    if arguments.sdist:
        shutil.copy(arguments.sdist, folder / arguments.sdist.name)
    env = {**os.environ, "SSM_ROLLBACK_LLAMA_CPP_CACHE": str(work)}
    before = _load()
    cold = _timed([sys.executable, str(BUILD)], env)
    for made in ("bin", "models"):
        shutil.rmtree(folder / made)
    (folder / "built.json").unlink()
    adapters = _timed([sys.executable, str(BUILD)], env)
    warm = _timed([sys.executable, str(BUILD)], env)
    own_test = _own_test(env)
    tier = _timed(
        [sys.executable, "-m", "pytest", "-m", "llamacpp", "tests/llamacpp", "-n", "0", "-q"],
        env,
    )
    after = _load()
    download = "not timed (--sdist)" if arguments.sdist else "in the cold build"
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print(f"load average before: {before}; after: {after}\n")
    print("| step | seconds |\n| --- | ---: |")
    print(
        f"| build.py cold: sdist download ({download}), unpack, configure, ggml and llama, "
        f"adapters, models | {cold:.0f} |"
    )
    print(
        f"| build.py with the libraries built: both adapters compiled, both models written "
        f"| {adapters:.1f} |"
    )
    print(f"| build.py warm: everything cached | {warm:.1f} |")
    print("\n".join(own_test))
    print(f"| `python -m pytest -m llamacpp tests/llamacpp -n 0` | {tier:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
