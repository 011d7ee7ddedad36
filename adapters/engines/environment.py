# SPDX-License-Identifier: MIT OR Apache-2.0
"""The kernels tier's own virtual environment: torch 2.13.0 (CPU), triton 3.9.0 and 3.8.0, numpy.

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

Which Triton each engine runs. vLLM and FLA run the venv's own, triton
3.9.0. SGLang runs the Triton its own pins bring: sglang 0.5.23 requires
``torch==2.14.1`` (its wheel's ``METADATA``), whose wheel requires
``triton~=3.8.0; platform_system == "Linux" and python_version < "3.15"``
(``torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl``, ``METADATA``), and
the package index holds one release of that range, 3.8.0. Triton 3.9.0
removed block pointers from the language, and SGLang's extend (its FLA chunk
rule) addresses every tile with one (``sglang/extend.py``). So the venv also
holds triton 3.8.0, installed alone (``--no-deps --target``) in the folder
:func:`sglang_triton` names, inside the venv; SGLang's adapter puts that
folder first on its path before anything imports Triton
(:func:`use_sglang_triton`). One venv, one torch: SGLang's kernels take
torch only as tensors and their pointers, which torch 2.13.0 gives alike.

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

__all__ = [
    "REQUIREMENTS",
    "SGLANG_TRITON",
    "VENV_ENV",
    "KernelsVenvError",
    "main",
    "sglang_triton",
    "use_sglang_triton",
    "venv_path",
]

#: The environment variable that moves the venv.
VENV_ENV: Final = "SSM_ROLLBACK_KERNELS_VENV"
#: The file a venv this module filled holds its requirements in (in its ``sys.prefix``).
_MARKER: Final = "requirements.txt"
#: What the venv holds besides the package, exactly.
REQUIREMENTS: Final = (
    "torch==2.13.0",
    "triton==3.9.0",
    "numpy",
    "packaging",
    "einops",
    "setuptools>=68",
)
#: SGLang's Triton (the module's docstring): the release its ``torch==2.14.1`` pin resolves to.
SGLANG_TRITON: Final = "triton==3.8.0"
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


def sglang_triton(venv_home: Path | None = None, /) -> Path:
    """The folder holding :data:`SGLANG_TRITON` in the venv ``venv_home`` (default: this one).

    Inside the venv the default is the running interpreter's own venv
    (``sys.prefix``), wherever the engine cache was moved to.
    """
    home = Path(sys.prefix) if venv_home is None else venv_home
    return home / SGLANG_TRITON.replace("==", "-")


def use_sglang_triton() -> None:
    """Put SGLang's Triton first on this process's path; before anything imports Triton.

    Outside a venv this module made (no marker in ``sys.prefix``: the everyday
    suite's Python, which only asks the adapter to describe itself and to
    refuse), no kernel runs, and nothing is put on the path.

    Raises:
        KernelsVenvError: Triton is already imported, or the kernels venv lacks the folder.
    """
    folder = sglang_triton()
    if "triton" in sys.modules:
        raise KernelsVenvError(f"triton is already imported; SGLang's {SGLANG_TRITON} comes first")
    if not (folder / "triton" / "__init__.py").exists():
        if not (Path(sys.prefix) / _MARKER).exists():
            return
        raise KernelsVenvError(
            f"no {SGLANG_TRITON} in {folder}: run python -m adapters.engines.environment"
        )
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))


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
    marker = home / _MARKER
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
    sglang = sglang_triton(home)
    marker = sglang / "requirement.txt"
    if not (marker.exists() and marker.read_text(encoding="utf-8") == SGLANG_TRITON + "\n"):
        # Triton alone (its wheel has no dependencies SGLang's kernels need), beside the venv's.
        _pip(
            python,
            "install",
            "--no-deps",
            "--no-compile",
            "--upgrade",
            "--target",
            str(sglang),
            SGLANG_TRITON,
        )
        marker.write_text(SGLANG_TRITON + "\n", encoding="utf-8")
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
