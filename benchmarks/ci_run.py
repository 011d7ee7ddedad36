# SPDX-License-Identifier: MIT OR Apache-2.0
"""Time ``.ci/run`` as CI runs it, command by command, from a clean clone.

Run from the repository root::

    python benchmarks/ci_run.py [--cold] [--work DIR] [--rev REV]

Clones ``REV`` (``HEAD`` by default) of this repository into ``--work`` (a
new temporary folder by default), makes a new venv beside it with nothing
installed, and runs ``bash -x .ci/run`` in the clone with that venv's
``python`` first on ``PATH``. With ``--cold``, ``HOME`` is an empty folder
under ``--work``, so pip's download cache and every cache of the project's
(``~/.cache/ssm-rollback-spec/``: the planners', kernels' and e2e venvs, the
engine wheels, llama.cpp's build) start empty, while ``RUSTUP_HOME`` and
``CARGO_HOME`` keep naming the machine's Rust toolchain; without it, ``HOME`` is yours
and the caches are as they are. Each command of the trace is stamped as it
is printed, and the script prints one Markdown table: every command that
took a second or more, its seconds, and the whole, with the load average
before and after (on a shared host the seconds are an upper bound). The
run's whole output is kept in ``--work`` as ``ci-run.log``.
BENCHMARKS.md ("``.ci/run`` from a clean clone") keeps its runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[1]
#: How wide a command is shown in the table.
_SHOWN: Final = 90
_GIT: Final = shutil.which("git") or "/usr/bin/git"
_BASH: Final = shutil.which("bash") or "/bin/bash"


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def _prepare(work: Path, rev: str, /, *, cold: bool) -> dict[str, str]:
    """Clone ``rev`` into ``work/clone`` and make ``work/venv``; the run's environment."""
    subprocess.run([_GIT, "clone", "-q", str(ROOT), str(work / "clone")], check=True)
    subprocess.run([_GIT, "-C", str(work / "clone"), "checkout", "-q", rev], check=True)
    subprocess.run([sys.executable, "-m", "venv", str(work / "venv")], check=True)
    env = {**os.environ, "PATH": f"{work / 'venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("VIRTUAL_ENV", None)
    if cold:
        # The toolchains are the machine's, not caches: rustup finds them by HOME.
        home = Path.home()
        env.setdefault("RUSTUP_HOME", str(home / ".rustup"))
        env.setdefault("CARGO_HOME", str(home / ".cargo"))
        (work / "home").mkdir()
        env["HOME"] = str(work / "home")
    return env


def _run(work: Path, env: dict[str, str], /) -> tuple[int, list[tuple[str, float]]]:
    """``bash -x .ci/run``'s status and each top-level command with its seconds."""
    stamps: list[tuple[str, float]] = []
    with (work / "ci-run.log").open("w", encoding="utf-8") as log:
        process = subprocess.Popen(
            [_BASH, "-x", ".ci/run"],
            cwd=work / "clone",
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert process.stdout is not None
        for line in process.stdout:
            log.write(line)
            # One "+" is .ci/run's own command; deeper ones are its substitutions.
            if line.startswith("+ "):
                stamps.append((line[2:].strip(), time.perf_counter()))
        status = process.wait()
    end = time.perf_counter()
    timed = [
        (command, (stamps[index + 1][1] if index + 1 < len(stamps) else end) - started)
        for index, (command, started) in enumerate(stamps)
    ]
    return status, timed


def main() -> None:
    """Clone, run ``.ci/run`` and print its commands' seconds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold", action="store_true", help="HOME empty: every cache empty")
    parser.add_argument("--work", type=Path, help="an empty folder (default: a new one)")
    parser.add_argument("--rev", default="HEAD", help="what to clone (default HEAD)")
    arguments = parser.parse_args()
    work = arguments.work or Path(tempfile.mkdtemp(prefix="ci-run-"))
    if work.exists() and (not work.is_dir() or any(work.iterdir())):
        sys.exit(f"ci_run.py: --work {work} is not an empty folder")
    work.mkdir(parents=True, exist_ok=True)
    try:
        env = _prepare(work, arguments.rev, cold=arguments.cold)
    except subprocess.CalledProcessError as error:
        sys.exit(f"ci_run.py: {' '.join(map(str, error.cmd))} failed (exit {error.returncode})")
    before = _load()
    start = time.perf_counter()
    status, timed = _run(work, env)
    whole = time.perf_counter() - start
    print(f"| `.ci/run` command ({'empty caches' if arguments.cold else 'caches as found'}) | s |")
    print("| --- | ---: |")
    for command, seconds in timed:
        if seconds >= 1:
            shown = command if len(command) <= _SHOWN else command[: _SHOWN - 3] + "..."
            print(f"| `{shown}` | {seconds:,.0f} |")
    print(f"| **the whole** (exit {status}) | **{whole:,.0f}** |")
    print(f"\nload average before {before}, after {_load()}; log: {work / 'ci-run.log'}")
    sys.exit(status)


if __name__ == "__main__":
    main()
