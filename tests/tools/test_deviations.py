# SPDX-License-Identifier: MIT OR Apache-2.0
"""Known deviations: the list's shape, what each entry covers, and the entries gone stale."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final

import pytest

from ssm_rollback_spec.tools.deviations import (
    Deviation,
    DeviationList,
    DeviationsError,
    Judged,
    Target,
    apply_deviations,
    read_deviations,
)
from ssm_rollback_spec.tools.errors import CliError
from ssm_rollback_spec.tools.outcomes import Row

if TYPE_CHECKING:
    from pathlib import Path

SHAPE: Final = 'must be {"deviations": [{"clause" | "property" | "case": NAME, "reason": TEXT}]}'
BOTH: Final = (Target.CLAUSE, Target.PROPERTY, Target.CASE)


def _file(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "deviations.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def _problem(tmp_path: Path, *entries: object) -> str:
    with pytest.raises(DeviationsError) as raised:
        read_deviations(_file(tmp_path, {"deviations": list(entries)}))
    return str(raised.value)


def test_a_list_reads_each_entry_with_its_target_reason_and_link(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        {
            "deviations": [
                {"clause": "RB-SIZE-3", "reason": "wraps"},
                {"case": "ring-k0", "reason": "later", "link": "https://example.org/i/1"},
                {"property": "test_cell.py::test_x", "reason": "why"},
            ]
        },
    )
    read = read_deviations(path)
    assert read == [
        Deviation(Target.CLAUSE, "RB-SIZE-3", "wraps"),
        Deviation(Target.CASE, "ring-k0", "later", "https://example.org/i/1"),
        Deviation(Target.PROPERTY, "test_cell.py::test_x", "why"),
    ]
    assert [str(entry) for entry in read] == [
        "clause RB-SIZE-3",
        "case ring-k0",
        "property test_cell.py::test_x",
    ]
    assert read[1].record() == {
        "entry": "case ring-k0",
        "reason": "later",
        "link": "https://example.org/i/1",
    }


@pytest.mark.parametrize("document", [[], {"deviations": {}}, {"deviations": [], "more": 1}])
def test_a_document_of_another_shape_is_refused_with_the_shape(
    tmp_path: Path, document: object
) -> None:
    with pytest.raises(DeviationsError) as raised:
        read_deviations(_file(tmp_path, document))
    assert str(raised.value) == SHAPE


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("RB-SIZE-3", "deviations[0] must be an object"),
        (
            {"clause": "RB-SIZE-3", "case": "x", "reason": "r"},
            'deviations[0] must name one of "clause", "property" or "case"',
        ),
        (
            {"case": "x", "reason": "r", "note": "n"},
            'deviations[0] must name one of "clause", "property" or "case"',
        ),
        ({"case": "", "reason": "r"}, "deviations[0]: the case must be a non-empty string"),
        ({"case": "x", "reason": "  "}, "deviations[0] (case x) must give a reason"),
        (
            {"clause": "RB-NOPE-1", "reason": "r"},
            "deviations[0]: SPEC.md has no clause 'RB-NOPE-1'",
        ),
        (
            {"case": "x", "reason": "r", "link": "ftp://example.org"},
            "deviations[0] (case x): the link must be an http(s) URL",
        ),
    ],
)
def test_a_bad_entry_is_named_by_its_index_and_what_is_wrong(
    tmp_path: Path, entry: object, problem: str
) -> None:
    assert _problem(tmp_path, entry) == problem


def test_an_entry_listed_twice_is_refused(tmp_path: Path) -> None:
    twice = {"case": "ring-k0", "reason": "r"}
    assert _problem(tmp_path, twice, {"case": "other", "reason": "r"}, twice) == (
        "listed more than once: case ring-k0"
    )


def test_a_clause_entry_covers_every_failed_item_citing_it() -> None:
    entry = Deviation(Target.CLAUSE, "RB-SIZE-3", "wraps")
    items = [
        Judged("a", ["RB-SIZE-3"], "failed"),
        Judged("b", ["RB-SIZE-2", "RB-SIZE-3"], "failed"),
        Judged("c", ["RB-SIZE-2"], "failed"),
        Judged("d", ["RB-SIZE-3"], "passed"),
    ]
    deviating, conforming = apply_deviations([entry], items, reads=BOTH)
    assert deviating == {"a": entry, "b": entry}
    assert conforming == []


def test_an_entry_whose_items_all_pass_is_stale() -> None:
    entry = Deviation(Target.CASE, "ring-k0", "later")
    deviating, conforming = apply_deviations(
        [entry], [Judged("ring-k0", ["RB-SIZE-2"], "passed")], reads=BOTH
    )
    assert (deviating, conforming) == ({}, [entry])


def test_an_entry_over_items_that_did_not_run_is_neither_covering_nor_stale() -> None:
    entry = Deviation(Target.CASE, "ring-k0", "later")
    judged = [Judged("ring-k0", ["RB-SIZE-2"], "skipped")]
    assert apply_deviations([entry], judged, reads=BOTH) == ({}, [])


def test_the_first_entry_covering_an_item_is_the_one_it_is_known_by() -> None:
    by_clause = Deviation(Target.CLAUSE, "RB-SIZE-2", "first")
    by_case = Deviation(Target.CASE, "ring-k0", "second")
    deviating, _ = apply_deviations(
        [by_clause, by_case], [Judged("ring-k0", ["RB-SIZE-2"], "failed")], reads=BOTH
    )
    assert deviating == {"ring-k0": by_clause}


def test_an_entry_matching_nothing_fails_unless_a_selection_left_it_out() -> None:
    entry = Deviation(Target.CASE, "gone", "r")
    items = [Judged("ring-k0", ["RB-SIZE-2"], "failed")]
    with pytest.raises(DeviationsError) as raised:
        apply_deviations([entry], items, reads=BOTH)
    assert str(raised.value) == "case gone matches nothing this run checks"
    assert apply_deviations([entry], items, reads=BOTH, selected=["RB-SIZE-2"]) == ({}, [])


def test_entries_of_a_target_the_command_does_not_read_are_set_aside() -> None:
    entry = Deviation(Target.PROPERTY, "test_cell.py::test_x", "r")
    items = [Judged("test_cell.py::test_x", ["RB-PUB-1"], "failed")]
    assert apply_deviations([entry], items, reads=(Target.CLAUSE, Target.CASE)) == ({}, [])


def test_the_option_names_its_file_in_every_refusal(tmp_path: Path) -> None:
    assert DeviationList.from_option(None) == DeviationList(None, ())
    missing = tmp_path / "missing.json"
    with pytest.raises(CliError) as raised:
        DeviationList.from_option(str(missing))
    assert str(raised.value) == f"--deviations {missing}: No such file or directory"
    listed = DeviationList.from_option(
        str(_file(tmp_path, {"deviations": [{"case": "gone", "reason": "r"}]}))
    )
    with pytest.raises(CliError) as raised:
        listed.mark([Row("ring-k0", ["RB-SIZE-2"], "passed")], reads=BOTH)
    assert str(raised.value) == (
        f"--deviations {listed.option}: case gone matches nothing this run checks"
    )


def test_marking_turns_a_covered_failure_into_a_deviation_with_its_reason_first() -> None:
    entry = Deviation(Target.CASE, "ring-k0", "release builds wrap")
    rows = [
        Row("ring-k0", ["RB-SIZE-2"], "failed", "request ...\nreplied ..."),
        Row("ring-k1", ["RB-SIZE-2"], "failed", "other"),
    ]
    marked, conforming = DeviationList("d.json", [entry]).mark(rows, reads=BOTH)
    assert conforming == []
    assert marked[0].outcome == "deviation"
    assert marked[0].known == entry
    assert marked[0].detail == (
        "deviates knowingly (case ring-k0): release builds wrap\nrequest ...\nreplied ..."
    )
    assert marked[1] == rows[1]
