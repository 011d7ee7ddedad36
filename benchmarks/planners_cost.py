# SPDX-License-Identifier: MIT OR Apache-2.0
"""Measure what the planners tier costs: its venv's size, its install time and its run time.

Makes the tier's venv from scratch in a temporary folder with
``tests/planners/install.sh`` (``PLANNERS_VENV``), sums the bytes of every
file in it, then runs ``python -m pytest -m planners`` against it
(``PLANNERS_PYTHON``). Prints a Markdown table for BENCHMARKS.md.

    python benchmarks/planners_cost.py [--keep]
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

_ROOT: Final = Path(__file__).resolve().parents[1]
_STEP_SECONDS: Final = 3600


def _timed(command: list[str], env: dict[str, str], /) -> tuple[float, int, str]:
    start = time.perf_counter()
    done = subprocess.run(
        command,
        cwd=_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=_STEP_SECONDS,
        check=False,
    )
    tail = (done.stdout + done.stderr).strip().splitlines()[-1:] or [""]
    return time.perf_counter() - start, done.returncode, tail[0]


def _size(folder: Path, /) -> int:
    return sum(
        path.lstat().st_size for path in folder.rglob("*") if path.is_file() or path.is_symlink()
    )


def main() -> int:
    """Install the tier's venv afresh, measure it, run the tier; print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the venv afterwards")
    arguments = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="planners-cost-"))
    venv = work / "venv"
    env = {
        **os.environ,
        "PLANNERS_VENV": str(venv),
        "PLANNERS_PYTHON": str(venv / "bin" / "python"),
    }
    rows = []
    try:
        seconds, code, tail = _timed([str(_ROOT / "tests" / "planners" / "install.sh")], env)
        rows.append(("`tests/planners/install.sh` (fresh venv)", f"{seconds:.1f}", code, tail))
        size = _size(venv)
        seconds, code, tail = _timed(
            [sys.executable, "-m", "pytest", "-m", "planners", "-p", "no:randomly", "-q"], env
        )
        rows.append(("`python -m pytest -m planners`", f"{seconds:.1f}", code, tail))
    finally:
        if not arguments.keep:
            shutil.rmtree(work, ignore_errors=True)
    sys.stdout.write(
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores,"
        f" Python {platform.python_version()}\n"
        f"- Venv: {size:,} bytes ({size / 2**30:.2f} GiB)\n\n"
        "| step | seconds | exit | last line |\n| --- | ---: | ---: | --- |\n"
    )
    for step, seconds_text, code, tail in rows:
        sys.stdout.write(f"| {step} | {seconds_text} | {code} | {tail} |\n")
    return 0 if all(code == 0 for _, _, code, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
