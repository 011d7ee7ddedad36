# SPDX-License-Identifier: MIT OR Apache-2.0
"""Time the README's test command as a new contributor meets it: a fresh clone, a fresh venv.

The command is read from the measured commit's README.md, Quick start (its
second line), so the figure is for what that README says, and split at
``&&`` into phases, each timed on its own. The clone is of a committed
revision (HEAD unless ``--against`` names another too); the venv is empty
(``--without-pip`` is not used: the venv's own pip installs everything).
``--env NAME=VALUE`` sets a variable for every phase, for example
``NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512_ICL AVX512_SPR"``.

    python benchmarks/quick_start.py [--against REV] [--env NAME=VALUE ...] [--keep]

With ``--against REV``, REV is measured first and HEAD right after it, each
in a clone and a venv of its own: a pair from one run, as BENCHMARKS.md asks.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

_ROOT: Final = Path(__file__).resolve().parents[1]
_PHASE_SECONDS: Final = 1800


def _readme_test_command(text: str, /) -> str:
    quick_start = text.split("## Quick start", 1)[1]
    block = re.search(r"```sh\n(.*?)```", quick_start, re.DOTALL)
    if block is None:
        sys.exit("README.md has no Quick start block")
    commands = [line for line in block[1].splitlines() if line.strip()]
    return commands[1]


def _timed(command: str, cwd: Path, env: dict[str, str], /) -> tuple[float, int, str]:
    start = time.perf_counter()
    done = subprocess.run(
        [shutil.which("bash") or "/bin/bash", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=_PHASE_SECONDS,
        check=False,
    )
    tail = (done.stdout + done.stderr).strip().splitlines()[-1:] or [""]
    return time.perf_counter() - start, done.returncode, tail[0]


def _measure(revision: str, work: Path, extra: dict[str, str], /) -> tuple[float, bool]:
    """Clone ``revision``, make a venv, run each phase of its README's test command.

    Prints one table; returns the README command's seconds, installs included,
    and whether a phase failed.
    """
    clone, venv = work / "clone", work / "venv"
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PYTHON", "VIRTUAL_ENV", "SSM_ROLLBACK_", "HYPOTHESIS_"))
    }
    env.update(extra, VIRTUAL_ENV=str(venv), PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}")
    phases = [
        (
            "fresh clone",
            f"git clone -q {_ROOT} {clone} && git -C {clone} checkout -q {revision}",
            work,
        ),
        ("fresh venv", f"{sys.executable} -m venv {venv}", work),
    ]
    shown = subprocess.run(
        [shutil.which("git") or "git", "-C", str(_ROOT), "show", f"{revision}:README.md"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    phases += [
        (part.strip(), part.strip(), clone) for part in _readme_test_command(shown).split("&&")
    ]
    print(f"\n{revision}:\n| phase | seconds | exit |\n| --- | ---: | ---: |")
    total = readme = 0.0
    for index, (name, command, cwd) in enumerate(phases):
        seconds, code, tail = _timed(command, cwd, env)
        total += seconds
        readme += seconds if index >= 2 else 0.0
        print(f"| `{name}` | {seconds:.1f} | {code} |", flush=True)
        if code != 0:
            print(f"failed: {tail}")
            return readme, True
    print(f"| the README command, installs included | {readme:.1f} | |")
    print(f"| with the clone and the venv | {total:.1f} | |")
    return readme, False


def main() -> int:
    """Measure HEAD, or a pair: ``--against REV`` first, then HEAD, one right after the other."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--against", metavar="REV", help="measure REV first, in the same run")
    parser.add_argument("--keep", action="store_true", help="keep the clones and the venvs")
    arguments = parser.parse_args()
    extra = dict(item.split("=", 1) for item in arguments.env)
    work = Path(tempfile.mkdtemp(prefix="quick-start-"))
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print(f"settings: {extra or 'none'}")
    revisions = [*([arguments.against] if arguments.against else []), "HEAD"]
    figures = []
    for index, revision in enumerate(revisions):
        (work / str(index)).mkdir()
        seconds, failed = _measure(revision, work / str(index), extra)
        figures.append(f"{revision} {seconds:.1f} s")
        if failed:
            break
    print("\nthe README command, installs included: " + "; ".join(figures))
    if not arguments.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
