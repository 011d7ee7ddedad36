# SPDX-License-Identifier: MIT OR Apache-2.0
"""The built wheel, installed once in a fresh venv, for the tests that run it as users do.

Under ``-n`` the first worker to need it builds and installs the wheel, under
a file lock in the run's shared temporary folder; the other workers wait for
it and reuse it, so the tests that use it spread over every worker.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from typing import TYPE_CHECKING, Final

from tests.child import ROOT
from tests.once import once_per_run

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

__all__ = ["Installed", "clean_environment", "install_wheel"]

#: The folder, in the run's shared temporary folder, that holds the wheel and its venv.
_SHARED: Final = "installed-wheel"


def clean_environment() -> dict[str, str]:
    """This process's environment less what would make the wheel's run depend on the clone's."""
    return {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PYTHON", "SSM_ROLLBACK_", "VIRTUAL_ENV", "HYPOTHESIS_", "PYTEST_"))
        and name != "CI"
    }


class Installed:
    """A fresh virtual environment holding only the built wheel and its ``check`` extra."""

    def __init__(self, root: Path, wheel: Path, elsewhere: Path) -> None:
        self.root = root
        self.wheel = wheel
        self.elsewhere = elsewhere
        self.bin = root / "bin"
        self.python = self.bin / "python"
        self.command = self.bin / "ssm-rollback-spec"
        #: Hypothesis's storage for the installed command's runs, shared by the
        #: run's workers: ``check`` would otherwise make a scratch one each time
        #: and compute Hypothesis's Unicode tables anew (about half of a short
        #: check). Its profiles here keep no example database: only the tables.
        self.hypothesis_storage = {"HYPOTHESIS_STORAGE_DIRECTORY": str(root.parent / "hypothesis")}

    def run(self, *arguments: str) -> subprocess.CompletedProcess[str]:
        """The installed command, run from a folder that is not a clone."""
        return subprocess.run(
            [str(self.command), *arguments],
            cwd=self.elsewhere,
            env=clean_environment() | self.hypothesis_storage,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )

    def adapter(self) -> str:
        """The installed Python adapter's command."""
        return f"{self.python} -m ssm_rollback_spec.harness.adapter"


def _checked(command: list[str], /) -> str:
    finished = subprocess.run(
        command,
        cwd=ROOT,
        env=clean_environment(),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    return finished.stdout + finished.stderr


def _build_and_install(folder: Path, /) -> None:
    dist = folder / "dist"
    build = [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)]
    built = _checked(build)
    # What the build prints is part of what a user sees: no warnings in it.
    assert "warning" not in built.lower(), built
    [wheel] = dist.glob("ssm_rollback_spec-*.whl")
    root = folder / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(root)
    pip = [str(root / "bin" / "python"), "-m", "pip", "install", "-q"]
    _checked([*pip, f"{wheel}[check]"])


def install_wheel(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """Build the wheel from the clone and install it with its ``check`` extra in a fresh venv.

    Once per run: the first caller builds it under a lock; later callers, in
    any worker, wait for the lock and reuse what it made.
    """
    folder = once_per_run(tmp_path_factory, _SHARED, _build_and_install)
    [wheel] = (folder / "dist").glob("ssm_rollback_spec-*.whl")
    return Installed(folder / "venv", wheel, tmp_path_factory.mktemp("elsewhere"))
