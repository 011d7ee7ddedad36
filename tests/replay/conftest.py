# SPDX-License-Identifier: MIT OR Apache-2.0
"""What the replay tests share: one ``vectors generate`` a run, read by every test that needs it."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import pytest

from tests.child import run_module
from tests.once import once_per_run

if TYPE_CHECKING:
    from pathlib import Path


class Generated(NamedTuple):
    """Where ``vectors generate --out`` wrote both corpora, and what it printed."""

    out: Path
    stdout: str


def _generate(folder: Path, /) -> None:
    finished = run_module(
        "ssm_rollback_spec.tools.cli", "vectors", "generate", "--out", str(folder / "out")
    )
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    (folder / "stdout.txt").write_text(finished.stdout, encoding="utf-8")


@pytest.fixture(scope="session")
def generated_vectors(tmp_path_factory: pytest.TempPathFactory) -> Generated:
    """The command's fresh generation, made once a run whichever worker asks first.

    The replay corpus takes seconds of numpy to draw; the tests only read what
    the command wrote, so one generation serves them all.
    """
    folder = once_per_run(tmp_path_factory, "vectors-generate", _generate)
    return Generated(folder / "out", (folder / "stdout.txt").read_text(encoding="utf-8"))
