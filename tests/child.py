# SPDX-License-Identifier: MIT OR Apache-2.0
"""Run a Python module of this project in a child process, the way users do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

ROOT: Final = Path(__file__).resolve().parents[1]

# Hypothesis's storage for every child: the clone's .hypothesis/, where a
# child pytest started at the root keeps it anyway. A child `check` would
# otherwise make a scratch one for each run and compute Hypothesis's Unicode
# tables anew (which characters UTF-8 encodes: about half the time of a short
# check). The profiles the tests run keep no example database: only those
# tables are shared.
_HYPOTHESIS_STORAGE: Final = {"HYPOTHESIS_STORAGE_DIRECTORY": str(ROOT / ".hypothesis")}


def run_module(
    module: str,
    /,
    *arguments: str,
    timeout: float = 1800,
    profile: str = "ci",
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m module arguments...`` from the repository root, output captured.

    The child runs the reproducible Hypothesis profile by default and never
    inherits an implementation chosen for the parent's own run; ``env`` adds
    to its environment, and ``stdin`` is its input (none by default). Its
    Hypothesis storage is the clone's, as for a pytest run from the root.
    """
    env = {**_HYPOTHESIS_STORAGE, **os.environ, "HYPOTHESIS_PROFILE": profile, **(env or {})}
    for name in ("SSM_ROLLBACK_IMPL_CMD", "SSM_ROLLBACK_IMPL_MODULE"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", module, *arguments],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


RUST_CRATE: Final = ROOT / "adapters" / "rust"


#: Where the self-test's racy build goes, apart from the reference build.
RACY_TARGET: Final = RUST_CRATE / "target" / "racy"


def wrong_target(feature: str, /) -> Path:
    """The target directory of the Rust adapter's wrong build with ``feature``."""
    return RACY_TARGET if feature == "racy-cell" else RUST_CRATE / "target" / feature


def run_cargo(
    cargo: str, command: str, /, *, racy: bool = False, feature: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``cargo COMMAND --release --offline`` on the Rust adapter's crate.

    ``racy`` builds the self-test's wrong cell (``--features racy-cell``), and
    ``feature`` another wrong build (``replay-one-short``,
    ``replay-stale-rows``), each into a target directory of its own.
    """
    manifest = str(RUST_CRATE / "Cargo.toml")
    wrong = "racy-cell" if racy else feature
    racy_options = ["--features", wrong, "--target-dir", str(wrong_target(wrong))] if wrong else []
    return subprocess.run(
        [
            cargo,
            command,
            "--release",
            "--offline",
            "--quiet",
            "--manifest-path",
            manifest,
            *racy_options,
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def alive(pid: int, /) -> bool:
    """Whether process ``pid`` still runs (a zombie has exited all the same)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return status.exists() and status.read_text().split(") ")[-1][:1] != "Z"
