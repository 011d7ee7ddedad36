# SPDX-License-Identifier: MIT OR Apache-2.0
"""SPEC.md and the suite cite each other both ways, and agree on the version."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import pytest

from ssm_rollback_spec import SPEC_VERSION, first_write_wins, model, rollback
from ssm_rollback_spec.harness.clauses import CLAUSES
from ssm_rollback_spec.harness.pytest_plugin import pytest_collection_modifyitems
from tests import traceability

ROOT: Final = Path(__file__).resolve().parents[2]
# Clauses about Python types and the Python cell: a JSON vector cannot carry them.
PYTHON_API_ONLY: Final = {
    "RB-CELL-1",
    "RB-CELL-2",
    "RB-CELL-3",
    "RB-CELL-4",
    "RB-PY-1",
    "RB-PY-2",
    "RB-PY-3",
}


def test_clause_ids_are_unique_and_well_formed() -> None:
    clauses = traceability.spec_clauses()
    assert len(clauses) == len(set(clauses))
    assert len(clauses) >= 20


def test_every_clause_is_checked_by_a_property() -> None:
    checked = {c for clauses in traceability.property_clauses().values() for c in clauses}
    unchecked = [c for c in traceability.spec_clauses() if c not in checked]
    assert not unchecked, f"clauses no property checks: {unchecked}"


def test_every_property_names_only_clauses_that_exist() -> None:
    known = set(traceability.spec_clauses())
    for name, clauses in traceability.property_clauses().items():
        assert clauses, f"{name} names no clause"
        assert set(clauses) <= known, f"{name} names unknown clauses {set(clauses) - known}"


def _is_replay_draft(clause: str, /) -> bool:
    # The draft replay model (spec/replay/): no protocol operation carries it,
    # so its cases live in vectors/replay/ instead.
    return clause.startswith("RB-REPLAY-")


def test_every_clause_a_fixed_case_can_express_has_vectors() -> None:
    with_vectors = set(traceability.vector_clauses())
    for clause in traceability.spec_clauses():
        if clause in PYTHON_API_ONLY or _is_replay_draft(clause):
            assert clause not in with_vectors
        else:
            assert clause in with_vectors, f"{clause} has no vector case"
    assert with_vectors <= set(traceability.spec_clauses())


def test_every_draft_replay_clause_has_replay_vectors_and_no_other_clause_does() -> None:
    with_replay_vectors = set(traceability.replay_vector_clauses())
    for clause in traceability.spec_clauses():
        drafted = _is_replay_draft(clause)
        # RB-PROTO-4 too: the refusals (refusals.json) are the protocol's bad-request rules.
        assert (clause in with_replay_vectors) is (drafted or clause == "RB-PROTO-4"), clause
    assert with_replay_vectors <= set(traceability.spec_clauses())


def test_every_row_of_the_module_map_names_things_that_exist() -> None:
    spec_text = (ROOT / "SPEC.md").read_text(encoding="utf-8")
    section = spec_text.split("## Map of the runtime module", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert len(rows) == 8
    known = set(traceability.spec_clauses())
    for row in rows:
        _, python_name, model_name, clauses = (cell.strip() for cell in row.strip("|").split("|"))
        assert hasattr(rollback, python_name.strip("`")), python_name
        assert hasattr(model, model_name.strip("`")), model_name
        assert set(clauses.split(", ")) <= known, clauses
    assert rollback.FirstWriteWins is first_write_wins.FirstWriteWins  # type: ignore[attr-defined]


def test_the_traceability_section_is_current() -> None:
    assert traceability.current() == traceability.render(), (
        "SPEC.md's Traceability section is stale: run python -m tests.traceability"
    )


def test_the_package_protocol_page_and_spec_name_one_version() -> None:
    spec = (ROOT / "SPEC.md").read_text(encoding="utf-8")
    assert re.search(r"^Version: \*\*([0-9.]+)\*\*$", spec, re.MULTILINE)[1] == SPEC_VERSION  # type: ignore[index]
    protocol = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
    assert (
        f"SPEC.md\nversion {SPEC_VERSION}" in protocol
        or f"SPEC.md version {SPEC_VERSION}" in protocol
    )


class _FakeItem:
    """Just what the collection hook reads of a collected property."""

    def __init__(self, nodeid: str, *clauses: str) -> None:
        self.nodeid = nodeid
        self.fixturenames = ["impl"]
        self.user_properties: list[tuple[str, object]] = []
        self.extra_keyword_matches: set[str] = set()
        self._marks = [pytest.mark.clause(*clauses).mark] if clauses else []

    def iter_markers(self, name: str) -> list[pytest.Mark]:
        return [mark for mark in self._marks if mark.name == name]


class _FakeConfig:
    """A configuration with no ``--clause`` selection and no ``--unshrunk`` property."""

    def getoption(self, name: str) -> list[str]:
        assert name in {"--clause", "--unshrunk"}
        return []


def _collect(*items: _FakeItem) -> None:
    pytest_collection_modifyitems(_FakeConfig(), list(items))  # type: ignore[arg-type]


def test_collection_refuses_an_unknown_clause_id() -> None:
    item = _FakeItem("test_x.py::test_y", "RB-SIZE-2", "RB-NOPE-9")
    with pytest.raises(pytest.UsageError, match=r"cites unknown clauses \['RB-NOPE-9'\]"):
        _collect(item)


def test_collection_refuses_a_property_that_cites_no_clause() -> None:
    item = _FakeItem("test_x.py::test_y")
    with pytest.raises(pytest.UsageError, match=r"cites no SPEC\.md clause"):
        _collect(item)


def test_collection_records_the_clauses_for_the_report_and_for_k() -> None:
    item = _FakeItem("test_x.py::test_y", "RB-SIZE-2")
    _collect(item)
    assert item.user_properties == [("clause", "RB-SIZE-2")]
    assert item.extra_keyword_matches == {"RB-SIZE-2"}


def test_the_shipped_clause_table_is_spec_md_in_order() -> None:
    assert traceability.spec_clauses() == list(CLAUSES)
