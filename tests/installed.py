# SPDX-License-Identifier: MIT OR Apache-2.0
"""The built wheel, installed once in a fresh venv, for the tests that run it as users do.

Every module that uses the ``installed`` fixture is marked with the
:data:`GROUP` xdist group, so under ``-n`` one worker builds and installs
the wheel once for all of them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from typing import TYPE_CHECKING, Final

from tests.child import ROOT

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

__all__ = ["GROUP", "Installed", "clean_environment", "install_wheel"]

#: The xdist group of every test that uses the installed wheel.
GROUP: Final = "installed-wheel"


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

    def run(self, *arguments: str) -> subprocess.CompletedProcess[str]:
        """The installed command, run from a folder that is not a clone."""
        return subprocess.run(
            [str(self.command), *arguments],
            cwd=self.elsewhere,
            env=clean_environment(),
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


def install_wheel(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """Build the wheel from the clone and install it with its ``check`` extra in a fresh venv."""
    dist = tmp_path_factory.mktemp("dist")
    build = [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)]
    built = _checked(build)
    # What the build prints is part of what a user sees: no warnings in it.
    assert "warning" not in built.lower(), built
    [wheel] = dist.glob("ssm_rollback_spec-*.whl")
    root = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=True, clear=True).create(root)
    pip = [str(root / "bin" / "python"), "-m", "pip", "install", "-q"]
    _checked([*pip, f"{wheel}[check]"])
    return Installed(root, wheel, tmp_path_factory.mktemp("elsewhere"))
