# SPDX-License-Identifier: MIT OR Apache-2.0
"""The kernels tier's own virtual environment: torch 2.13.0 (CPU), triton 3.9.0, numpy, the package.

``python -m adapters.engines.environment`` (from the repository root) makes
it the first time (under the cache folder, or ``$SSM_ROLLBACK_KERNELS_VENV``),
installs this clone's package into it again every time (so the adapters run
the code beside them), fetches every registered engine's wheel (``wheels.py``),
and prints the venv's Python, which runs the adapters. Standard library and
the package only: the tier's tests and ``benchmarks/kernels_tier.py`` run it
with the suite's own Python.

vLLM's ``replay_batch`` imports vLLM's own metadata builder and GDN layer,
which import its configuration (pydantic, transformers and the rest): the venv
also holds the pure-Python packages the planners tier imports vLLM's
configuration with, at the same pins (``tests/planners/requirements.txt``, less
the engines, torch, triton and numpy, which are the venv's own), installed
without resolving dependencies, so nothing pulls CUDA.

``torch==2.13.0`` is asked for exactly: on these machines that is a CPU build
from the package index; plain ``torch`` would pull about 3 GB of CUDA
packages. FLA's own dependency ``einops`` and ``packaging`` come along, as
its kernel modules import them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import Final

from . import wheels

__all__ = ["REQUIREMENTS", "VENV_ENV", "KernelsVenvError", "main", "venv_path"]

#: The environment variable that moves the venv.
VENV_ENV: Final = "SSM_ROLLBACK_KERNELS_VENV"
#: What the venv holds besides the package, exactly.
REQUIREMENTS: Final = (
    "torch==2.13.0",
    "triton==3.9.0",
    "numpy",
    "packaging",
    "einops",
    "setuptools>=68",
)
_ROOT: Final = Path(__file__).resolve().parents[2]
#: The pins vLLM's configuration code is imported with on a CPU (the planners tier's).
_VLLM_IMPORTS: Final = _ROOT / "tests" / "planners" / "requirements.txt"
#: Of those, the ones this venv does not take: the engines come from their wheels,
#: and torch, triton and numpy are pinned above.
_NOT_TAKEN: Final = ("vllm", "sglang", "torch", "triton", "numpy")


def _vllm_imports() -> list[str]:
    lines = _VLLM_IMPORTS.read_text(encoding="utf-8").splitlines()
    pins = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    return [pin for pin in pins if pin.split("==")[0].lower() not in _NOT_TAKEN]


class KernelsVenvError(RuntimeError):
    """The venv could not be made or filled."""


def venv_path() -> Path:
    """``$SSM_ROLLBACK_KERNELS_VENV``, or ``venv`` under the engines' cache folder."""
    chosen = os.environ.get(VENV_ENV)
    return (
        Path(chosen)
        if chosen
        else wheels.cache_root() / f"venv-py{sys.version_info[0]}{sys.version_info[1]}"
    )


def _pip(python: Path, *arguments: str) -> None:
    done = subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", "-q", *arguments],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise KernelsVenvError(f"pip {' '.join(arguments[:2])} ... failed: {last}")


def prepare() -> Path:
    """The venv's Python, the venv made and filled if it is not, this clone's package installed."""
    home = venv_path()
    python = home / "bin" / "python"
    marker = home / "requirements.txt"
    wanted = "\n".join(REQUIREMENTS) + "\n"
    if not (python.exists() and marker.exists() and marker.read_text(encoding="utf-8") == wanted):
        venv.EnvBuilder(with_pip=True, clear=True).create(home)
        # Not compiled here: the adapters import a small part of torch, and a
        # tier run with PYTHONPYCACHEPREFIX set (tests/conftest.py) would not
        # read what pip compiled; Python compiles and keeps what is imported.
        _pip(python, "install", "--no-compile", *REQUIREMENTS)
        marker.write_text(wanted, encoding="utf-8")
    imports = home / "vllm-imports.txt"
    pins = "\n".join(_vllm_imports()) + "\n"
    if not (imports.exists() and imports.read_text(encoding="utf-8") == pins):
        _pip(python, "install", "--no-deps", "--no-compile", *_vllm_imports())
        imports.write_text(pins, encoding="utf-8")
    _pip(python, "install", "--no-deps", "--no-build-isolation", "--force-reinstall", str(_ROOT))
    # The wheels are fetched by the venv's pip, for the venv's Python.
    done = subprocess.run(
        [str(python), "-m", "adapters.engines.wheels"],
        capture_output=True,
        text=True,
        check=False,
        cwd=_ROOT,
    )
    if done.returncode != 0:
        raise KernelsVenvError(done.stderr.strip() or "adapters.engines.wheels failed")
    return python


def main() -> int:
    """Print the venv's Python; 1 with one line on a failure."""
    try:
        python = prepare()
    except KernelsVenvError as error:
        sys.stderr.write(f"adapters.engines.environment: {error}\n")
        return 1
    sys.stdout.write(f"{python}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
