# SPDX-License-Identifier: MIT OR Apache-2.0
"""The model operation (RB-REPLAY-14) on the fake model: right rollbacks pass, wrong ones fail.

check's drawn rounds and ``vectors run``'s round scripts
(``model_rounds.json``) both judge it. The fake
(``tests/fakes/model_adapter.py``) is one float64 GDN layer between a fixed
embedding and output projection; its wrong rollbacks restore another
sequence's state, keep one token too many, or restore a stale checkpoint.
Each runs through the same operation, on the same model, as a runtime's
adapter would. The built wheel, installed in a fresh venv and run from
another folder (tests/installed.py), judges the fake the same way.
"""

from __future__ import annotations

import json
import shlex
import sys
from typing import TYPE_CHECKING, Any, Final

import pytest

from tests.child import ROOT, run_module
from tests.fakes.model_adapter import WRONG

if TYPE_CHECKING:
    from pathlib import Path

    from tests.installed import Installed

_PROPERTY: Final = (
    "test_model.py::test_a_rolled_back_sequence_decodes_as_the_kept_tokens_decoded_plainly"
)
_ADAPTER: Final = f"{sys.executable} -m tests.fakes.model_adapter"


def _check(tmp_path: Path, command: str, /) -> tuple[dict[str, Any], str]:
    report = tmp_path / "report.json"
    finished = run_module(
        "ssm_rollback_spec.tools.cli", "check", "--clause", "RB-REPLAY-14", "--impl-cmd", command,
        "--json", str(report), "--export-failures", str(tmp_path / "exported"), timeout=600,
    )  # fmt: skip
    assert finished.returncode in {0, 1}, finished.stdout[-3000:] + finished.stderr
    document: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    return document, finished.stdout


def _outcome(document: dict[str, Any], /) -> str:
    outcomes: dict[str, str] = {row["property"]: row["outcome"] for row in document["properties"]}
    assert set(outcomes) == {_PROPERTY}
    return outcomes[_PROPERTY]


@pytest.mark.slow
def test_check_passes_a_model_that_rolls_back_right(tmp_path: Path) -> None:
    document, _ = _check(tmp_path, _ADAPTER)
    assert _outcome(document) == "passed"


@pytest.mark.slow
@pytest.mark.parametrize("wrong", WRONG)
def test_check_rejects_each_wrong_rollback(tmp_path: Path, wrong: str) -> None:
    document, stdout = _check(tmp_path, f"{_ADAPTER} {wrong}")
    assert _outcome(document) == "failed"
    # Judged by the logits against a plain decode, with a line to send again.
    assert "a plain decode of" in stdout
    assert 'reproduce: printf \'%s\\n\' \'{"op":"model"' in stdout
    # A script is judged against the adapter's own plain decode, which no
    # list of allowed replies can say: nothing is exported as a protocol vector.
    exported = json.loads((tmp_path / "exported" / "exported.json").read_text(encoding="utf-8"))
    assert exported["cases"] == []


def _vectors(tmp_path: Path, command: str, /) -> tuple[int, dict[str, Any]]:
    report = tmp_path / "vectors.json"
    finished = run_module(
        "ssm_rollback_spec.tools.cli", "vectors", "run", "--clause", "RB-REPLAY-14",
        "--impl-cmd", command, "--json", str(report), timeout=600,
    )  # fmt: skip
    assert "Traceback" not in finished.stdout + finished.stderr
    document: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    return finished.returncode, document


@pytest.mark.slow
def test_vectors_run_passes_the_round_scripts_on_a_model_that_rolls_back_right(
    tmp_path: Path,
) -> None:
    status, document = _vectors(tmp_path, _ADAPTER)
    assert status == 0
    # Every round script fits the fake (16 tokens, 3 slots, a snapshot depth of 4).
    assert document["counts"]["passed"] == len(document["cases"]) == 28
    assert document["clauses"] == {"RB-REPLAY-14": "passed"}


@pytest.mark.slow
@pytest.mark.parametrize("wrong", WRONG)
def test_vectors_run_rejects_each_wrong_rollback_with_the_round_scripts(
    tmp_path: Path, wrong: str
) -> None:
    status, document = _vectors(tmp_path, f"{_ADAPTER} {wrong}")
    assert status == 1
    assert document["clauses"] == {"RB-REPLAY-14": "failed"}
    failed = [case for case in document["cases"] if case["outcome"] == "failed"]
    assert failed
    # Judged by the same token decoded plainly in the same reply.
    assert all(
        "the same kept token decoded plainly as plain-" in case["detail"]
        or "was refused" in case["detail"]
        for case in failed
    )


def _from_the_clone(*wrong: str) -> str:
    """The fake's ``--impl-cmd`` for a command run elsewhere: it starts in the clone."""
    return shlex.join(
        ["env", "-C", str(ROOT), sys.executable, "-m", "tests.fakes.model_adapter", *wrong]
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("wrong", "outcome"),
    [((), "passed"), (("one-too-many",), "failed")],
    ids=["right", "one-too-many"],
)
def test_the_installed_wheels_check_passes_the_right_fake_and_rejects_a_wrong_one(
    installed: Installed, tmp_path: Path, wrong: tuple[str, ...], outcome: str
) -> None:
    # One wrong rollback, the quickest to shrink (a failing check shrinks for
    # minutes); vectors run below rejects each of them from the wheel.
    report = tmp_path / "report.json"
    finished = installed.run(
        "check", "--clause", "RB-REPLAY-14", "--profile", "interpreter",
        "--impl-cmd", _from_the_clone(*wrong), "--json", str(report),
    )  # fmt: skip
    assert finished.returncode == (0 if outcome == "passed" else 1), finished.stderr[-3000:]
    assert _outcome(json.loads(report.read_text(encoding="utf-8"))) == outcome
    if outcome == "failed":
        assert "a plain decode of" in finished.stdout


@pytest.mark.slow
@pytest.mark.parametrize("wrong", [(), *((how,) for how in WRONG)], ids=["right", *WRONG])
def test_the_installed_wheels_round_scripts_pass_the_right_fake_and_reject_each_wrong_one(
    installed: Installed, tmp_path: Path, wrong: tuple[str, ...]
) -> None:
    report = tmp_path / "vectors.json"
    finished = installed.run(
        "vectors", "run", "--clause", "RB-REPLAY-14", "--impl-cmd", _from_the_clone(*wrong),
        "--json", str(report),
    )  # fmt: skip
    assert "Traceback" not in finished.stdout + finished.stderr
    document: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    counts = document["counts"]
    if not wrong:
        assert finished.returncode == 0, finished.stdout[-3000:]
        assert counts["passed"] == len(document["cases"]) == 28
        return
    assert finished.returncode == 1
    assert document["clauses"] == {"RB-REPLAY-14": "failed"}
    assert counts["failed"] > 0
