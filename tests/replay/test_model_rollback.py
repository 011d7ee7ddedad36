# SPDX-License-Identifier: MIT OR Apache-2.0
"""check's model property (RB-REPLAY-14) on the fake model: right rollbacks pass, wrong ones fail.

The fake (``tests/fakes/model_adapter.py``) is one float64 GDN layer between
a fixed embedding and output projection; its wrong rollbacks restore
another sequence's state, keep one token too many, or restore a stale
checkpoint. Each runs through the same operation, on the same model, as a
runtime's adapter would.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, Final

import pytest

from tests.child import run_module
from tests.fakes.model_adapter import WRONG

if TYPE_CHECKING:
    from pathlib import Path

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
