# SPDX-License-Identifier: MIT OR Apache-2.0
"""Measure what the planners tier costs: its venv, its install, and each planner's run time.

Makes the tier's venv from scratch in a temporary folder with
``tests/planners/install.sh`` (``PLANNERS_VENV``), or with ``--venv`` takes
an existing one, and sums the bytes of every file in it. Then the SGLang
part on its own: the SGLang-only pins of ``tests/planners/requirements.txt``
downloaded with ``pip download --no-deps`` (timed, their wheels' bytes
summed) and installed again into that venv from those wheels alone
(``--force-reinstall --no-index``), which is what adding them to a venv
that has the rest costs. Last, each planner's tests run against the venv
(``PLANNERS_PYTHON``), vLLM's then SGLang's. Prints a Markdown table for
BENCHMARKS.md.

    python benchmarks/planners_cost.py [--keep | --venv PATH]
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
_REQUIREMENTS: Final = _ROOT / "tests" / "planners" / "requirements.txt"
#: The packages the tier installs for SGLang's planner alone (the rest are vLLM's).
_SGLANG_ONLY: Final = frozenset({"sglang"})


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


def _sglang_pins() -> list[str]:
    """The SGLang-only lines of the tier's requirements, e.g. ``sglang==0.5.23``.

    Raises:
        SystemExit: when the requirements pin none of them.
    """
    lines = _REQUIREMENTS.read_text(encoding="utf-8").splitlines()
    pins = [line for line in lines if line.split("==", maxsplit=1)[0] in _SGLANG_ONLY]
    if not pins:
        raise SystemExit(f"{_REQUIREMENTS} pins none of {sorted(_SGLANG_ONLY)}")
    return pins


def main() -> int:
    """Make (or take) the tier's venv, measure it and the SGLang pins, run each planner."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    given = parser.add_mutually_exclusive_group()
    given.add_argument("--keep", action="store_true", help="keep the fresh venv afterwards")
    given.add_argument("--venv", type=Path, help="measure this existing tier venv instead")
    arguments = parser.parse_args()
    pins = _sglang_pins()
    work = Path(tempfile.mkdtemp(prefix="planners-cost-"))
    venv = arguments.venv.resolve() if arguments.venv else work / "venv"
    python = str(venv / "bin" / "python")
    env = {**os.environ, "PLANNERS_VENV": str(venv), "PLANNERS_PYTHON": python}
    rows = []
    try:
        if not arguments.venv:
            seconds, code, tail = _timed([str(_ROOT / "tests" / "planners" / "install.sh")], env)
            rows.append(("`tests/planners/install.sh` (fresh venv)", seconds, code, tail))
        size = _size(venv)
        wheels = work / "wheels"
        seconds, code, tail = _timed(
            [python, "-m", "pip", "download", "-q", "--no-deps", "-d", str(wheels), *pins], env
        )
        rows.append((f"`pip download --no-deps {' '.join(pins)}`", seconds, code, tail))
        downloaded = _size(wheels) if wheels.is_dir() else 0
        seconds, code, tail = _timed(
            [python, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall",
             "--no-index", "--find-links", str(wheels), *pins],
            env,
        )  # fmt: skip
        rows.append(("the same, installed into the venv (`--no-index`)", seconds, code, tail))
        for planner in ("vllm", "sglang"):
            test = f"tests/planners/test_{planner}_planner.py"
            seconds, code, tail = _timed(
                [sys.executable, "-m", "pytest", "-m", "planners", "-p", "no:randomly", "-q", test],
                env,
            )
            rows.append((f"`python -m pytest -m planners {test}`", seconds, code, tail))
    finally:
        if not arguments.keep:
            shutil.rmtree(work, ignore_errors=True)
    sys.stdout.write(
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores,"
        f" Python {platform.python_version()}\n"
        f"- Venv: {size:,} bytes ({size / 2**30:.2f} GiB)\n"
        f"- SGLang's wheels: {downloaded:,} bytes ({downloaded / 2**20:.1f} MiB)\n\n"
        "| step | seconds | exit | last line |\n| --- | ---: | ---: | --- |\n"
    )
    for step, seconds, code, tail in rows:
        sys.stdout.write(f"| {step} | {seconds:.1f} | {code} | {tail} |\n")
    return 0 if all(code == 0 for _, _, code, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
