# SPDX-License-Identifier: MIT OR Apache-2.0
"""The suite's plugin: ``--unshrunk``, a property known to fail reported at its first failure.

``check`` passes each clause and property its ``--deviations`` list names:
a known failure's shrinking through an adapter that loads a model, or runs
kernels on an interpreter, takes Hypothesis's whole five minutes a run.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from tests.child import run_module

if TYPE_CHECKING:
    from pathlib import Path

#: A ``@given`` property and one that builds its settings as it runs (as the
#: model's state machine does), each failing from 1000 up, which shrinks to 1000.
_PROPERTIES: Final = """
import pytest
from hypothesis import given, settings, strategies as st


@pytest.mark.clause("RB-SIZE-1")
@given(st.integers(0, 10**9))
def test_given(n):
    assert n < 1000


@pytest.mark.clause("RB-SIZE-2")
def test_settings_at_run_time():
    @settings(settings())
    @given(st.integers(0, 10**9))
    def inner(n):
        assert n < 1000

    inner()
"""


def _falsified(tmp_path: Path, /, *unshrunk: str) -> list[str]:
    """Each failing example's ``n``, in order, from a run given ``--unshrunk`` for each name."""
    (tmp_path / "test_known.py").write_text(_PROPERTIES, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    finished = run_module(
        "pytest",
        str(tmp_path),
        f"-c={tmp_path / 'pytest.ini'}",
        f"--rootdir={tmp_path}",
        "-p",
        "ssm_rollback_spec.harness.pytest_plugin",
        "-p",
        "no:cacheprovider",
        *(f"--unshrunk={name}" for name in unshrunk),
    )
    assert "2 failed" in finished.stdout, finished.stdout[-3000:] + finished.stderr
    # Only the tracebacks' lines: pytest on CI (CI set) repeats each failure's
    # whole message in its short summary as well.
    return re.findall(r"^E\s+n=(\d+),$", finished.stdout, flags=re.MULTILINE)


def test_named_properties_are_reported_at_their_first_failing_example(tmp_path: Path) -> None:
    shrunk = _falsified(tmp_path)
    assert shrunk == ["1000", "1000"]
    unshrunk = _falsified(tmp_path, "test_known.py::test_given", "RB-SIZE-2")
    assert len(unshrunk) == 2
    assert "1000" not in unshrunk


def test_only_the_named_property_goes_unshrunk(tmp_path: Path) -> None:
    found = _falsified(tmp_path, "RB-SIZE-1")
    assert found[1] == "1000"
    assert found[0] != "1000"
