# SPDX-License-Identifier: MIT OR Apache-2.0
"""A race counts only when two of its calls overlapped; one never seen is not a pass.

The slow tier runs ``check`` and ``vectors run`` against the wrong adapter's
racy cell twice: its racers released together (the race shows, and fails)
and run one after another (the control: no race is run, so RB-PUB-4 is NOT
OBSERVED); and against an adapter that gives no spans (NOT OBSERVED too).
The everyday tier judges ``vectors run``'s races through a driver whose
replies are written here, so that each verdict is certain.
"""

from __future__ import annotations

import json
import re
import sys
from typing import TYPE_CHECKING, Final

import junitparser
import pytest

from ssm_rollback_spec import corpus
from ssm_rollback_spec.harness import protocol
from ssm_rollback_spec.harness.race_evidence import (
    MalformedSpansError,
    RaceNotSeenError,
    RaceOutcome,
    RaceTally,
    judge_races,
    overlapped,
    reply_spans,
)
from ssm_rollback_spec.tools.outcomes import Row, clause_summary, counts, write_junit
from tests.child import ROOT, run_module
from tests.fakes import FAKES

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Mapping, Sequence
    from pathlib import Path

WRONG_ADAPTER: Final = str(FAKES / "wrong_adapter.py")
BUDGET: Final = (
    "test_published_mode.py::test_a_budget_of_races_in_fresh_processes_each_have_one_winner"
)
CELLS: Final = "test_published_mode.py::test_fresh_cells_raced_in_one_process_each_have_one_winner"
WHERE: Final = "(docs/protocol-race-evidence.md)"
OFFER_CELLS: Final = "offer race_cells, which races fresh cells thousands of times in one process"
RELEASE: Final = "release the racers together from a spinning barrier"
VECTORS: Final = ROOT / "vectors"
#: The shipped races a racy cell could lose: more than one winner is allowed.
CONTESTED: Final = {
    "race-two-writers",
    "race-writer-and-reader",
    "race-mixed-eight",
    "race-mixed-sixteen",
}


def test_spans_overlap_only_when_each_call_started_before_the_other_ended() -> None:
    assert overlapped([(0, 10), (5, 20)])
    assert overlapped([(5, 20), (0, 10)])
    assert overlapped([(0, 100), (40, 50)])
    assert overlapped([(0, 1), (30, 40), (35, 36)])
    assert not overlapped([(0, 10), (10, 20)])
    assert not overlapped([(0, 10), (11, 20), (21, 21)])
    assert not overlapped([(7, 7), (7, 7)])
    assert not overlapped([(3, 9)])
    assert not overlapped([])


def test_a_run_of_races_none_seen_says_why_and_what_to_do() -> None:
    unseen = RaceTally("races", "race", suggest_cells=True)
    for _ in range(20):
        unseen.add([(0, 5), (6, 9)])
    assert unseen.not_observed() == (
        "not observed: in none of 20 races did two calls overlap, and none lost; release the "
        f"racers together from a spinning barrier, or {OFFER_CELLS} {WHERE}"
    )
    silent = RaceTally("races", "race", suggest_cells=True)
    silent.add(None)
    silent.add(None)
    assert silent.not_observed() == (
        "not observed: none of 2 races gave its calls' spans, so none is known to have "
        f"overlapped, and none lost; give each racing call's span, or {OFFER_CELLS} {WHERE}"
    )
    one = RaceTally("races", "race")
    one.add(None)
    assert one.not_observed() == (
        "not observed: none of 1 race gave its calls' spans, so none is known to have "
        f"overlapped, and none lost; give each racing call's span {WHERE}"
    )
    partly = RaceTally("rounds of fresh cells", "round of fresh cells")
    partly.add([(0, 5), (6, 9)])
    partly.add(None)
    assert partly.not_observed() == (
        "not observed: of 2 rounds of fresh cells, the 1 that gave their calls' spans had no "
        "two calls overlap and the rest gave none, and none lost; give each racing call's span "
        f"and release the racers together from a spinning barrier {WHERE}"
    )
    partly.add([(0, 5), (4, 9)])
    assert partly.not_observed() is None
    assert (partly.races, partly.with_spans, partly.overlapping) == (3, 2, 1)
    partly.add([(0, 5), (4, 9)])
    assert (partly.races, partly.with_spans, partly.overlapping) == (4, 3, 2)


ONE_LOCK: Final = (
    "the package's Python adapter races threads under one interpreter lock, so two calls "
    "overlap only when the interpreter switches threads inside one, which few of its races "
    "see: the interpreter's limit, not an adapter's to fix, so --require-race is not for it"
)


def test_races_of_the_package_s_python_adapter_none_seen_say_why_and_advise_nothing() -> None:
    unseen = RaceTally("sends of this race", "send of this race", one_interpreter_lock=True)
    unseen.add([(0, 5), (6, 9)])
    assert unseen.not_observed() == (
        "not observed: in none of 1 send of this race did two calls overlap, and none lost; "
        f"{ONE_LOCK} {WHERE}"
    )
    unseen.add([(0, 5), (4, 9)])
    assert unseen.not_observed() is None


def test_vectors_run_on_the_package_s_python_adapter_tells_no_one_to_fix_it() -> None:
    finished = run_module(
        "ssm_rollback_spec.tools.cli", "vectors", "run", "--clause", "RB-PUB-4",
        "--impl-cmd", f"{sys.executable} -m ssm_rollback_spec.harness.adapter", "--require-race",
        timeout=600,
    )  # fmt: skip
    assert "Traceback" not in finished.stdout + finished.stderr
    lines = finished.stdout.splitlines()
    failed = [
        lines[i + 1].strip() for i, line in enumerate(lines) if line.startswith("FAIL  race-")
    ]
    assert finished.returncode == (1 if failed else 0)
    assert RELEASE not in finished.stdout
    for detail in failed:
        assert re.fullmatch(
            "--require-race: not observed: in none of [0-9]+ sends? of this race did two calls "
            f"overlap, and none lost; {re.escape(ONE_LOCK)} {re.escape(WHERE)}",
            detail,
        ), detail


def test_spans_of_the_wrong_shape_are_named_and_none_given_is_none() -> None:
    assert reply_spans({"ok": ["replay"]}, calls=1) is None
    assert reply_spans({"ok": ["replay"], "spans": [[1, 2]]}, calls=1) == [[(1, 2)]]
    assert reply_spans({"ok": [[]], "spans": [[]]}, calls=0, rounds=1) == [[]]
    span_shape = "must be [START, END], integers in [0, 18446744073709551615] with START <= END"
    wrong: list[tuple[dict[str, object], int, int | None, str]] = [
        (
            {"spans": [[1, 2]]},
            2,
            None,
            "spans must be a list of 2 spans, one per event, got [[1, 2]]",
        ),
        ({"spans": [[2, 1]]}, 1, None, f"spans[0] {span_shape}, got [2, 1]"),
        ({"spans": [[1, True]]}, 1, None, f"spans[0] {span_shape}, got [1, true]"),
        ({"spans": [[1, 2]]}, 1, 2, "spans must be a list of 2 rounds, got [[1, 2]]"),
        ({"spans": [[[1, 2]], [1]]}, 1, 2, f"spans[1][0] {span_shape}, got 1"),
        (
            {"spans": [[[1, 2]], []]},
            1,
            2,
            "spans[1] must be a list of 1 spans, one per event, got []",
        ),
    ]
    for reply, calls, rounds, message in wrong:
        with pytest.raises(MalformedSpansError) as raised:
            reply_spans(reply, calls=calls, rounds=rounds)
        assert str(raised.value) == message


def test_spans_are_asked_only_of_races_and_only_with_true_or_false() -> None:
    race = {"op": "race", "events": [{"op": "get"}]}
    assert protocol.decode_request(json.dumps({**race, "spans": True}))["spans"] is True
    assert "spans" not in protocol.decode_request(json.dumps({**race, "spans": False}))
    assert "spans" not in protocol.decode_request(json.dumps(race))
    # A field a trace does not use is ignored, whatever it holds.
    trace = {"op": "trace", "events": [], "spans": 1}
    assert protocol.decode_request(json.dumps(trace)) == {"op": "trace", "events": []}
    with pytest.raises(protocol.ProtocolError) as raised:
        protocol.decode_request(json.dumps({**race, "op": "race_cells", "rounds": 1, "spans": 1}))
    assert str(raised.value) == "field 'spans' must be true or false, got 1"
    assert raised.value.kind is protocol.ErrorKind.BAD_REQUEST


def test_a_reply_may_carry_spans_beside_ok_only() -> None:
    assert protocol.decode_reply('{"ok":[],"spans":[]}') == {"ok": [], "spans": []}
    for line in ('{"error":{"kind":"bad-request","message":""},"spans":[]}', '{"spans":[]}'):
        with pytest.raises(protocol.MalformedReplyError):
            protocol.decode_reply(line)


def test_a_race_not_observed_outranks_a_pass_and_is_a_skip_in_junit(tmp_path: Path) -> None:
    reason = "not observed: in none of 20 races did two calls overlap"
    rows = [
        Row("passes", ["RB-PUB-1", "RB-PUB-4"], "passed"),
        Row("unseen", ["RB-PUB-4"], "not-observed", reason),
        Row("skips", ["RB-CELL-1"], "skipped", "no cell"),
    ]
    assert clause_summary(rows) == {
        "RB-CELL-1": "skipped",
        "RB-PUB-1": "passed",
        "RB-PUB-4": "not-observed",
    }
    deviating = Row("known", ["RB-PUB-4"], "deviation", "deviates knowingly")
    assert clause_summary([*rows, deviating])["RB-PUB-4"] == "deviation"
    assert counts(rows)["not-observed"] == 1
    target = tmp_path / "report.xml"
    write_junit(str(target), "suite", rows)
    [suite] = list(junitparser.JUnitXml.fromfile(str(target)))
    assert (suite.skipped, suite.failures, suite.errors) == (2, 0, 0)
    [unseen] = [case for case in suite if case.name == "unseen [RB-PUB-4]"]
    [skipped] = unseen.result
    assert isinstance(skipped, junitparser.Skipped)
    assert skipped.message == reason


# --- check against the wrong adapter's racy cell (slow: fresh processes) ----


def _check(mistake: str, tmp_path: Path, /, *arguments: str) -> subprocess.CompletedProcess[str]:
    return run_module(
        "ssm_rollback_spec.tools.cli", "check",
        "--impl-cmd", f"{sys.executable} -S {WRONG_ADAPTER} {mistake}",
        "--json", str(tmp_path / "check.json"), "--junit-xml", str(tmp_path / "check.xml"),
        *arguments, timeout=600, env={"PYTHONPATH": str(ROOT)},
    )  # fmt: skip


def _reason(stdout: str, name: str, /) -> str:
    lines = stdout.splitlines()
    return lines[lines.index(f"NOT OBSERVED  {name}  [RB-PUB-4]") + 1].strip()


@pytest.mark.slow
def test_races_whose_calls_never_overlap_are_not_observed_never_a_pass(tmp_path: Path) -> None:
    finished = _check(
        "serial-racers", tmp_path, "-k", "budget or fresh_cells", "--race-budget", "0.5"
    )
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr
    races = re.search(r"in none of (\d+) races", finished.stdout)
    rounds = re.search(r"in none of (\d+) rounds of fresh cells", finished.stdout)
    assert races, finished.stdout
    assert rounds, finished.stdout
    assert _reason(finished.stdout, BUDGET) == (
        f"not observed: in none of {races[1]} races did two calls overlap, and none lost; "
        f"release the racers together from a spinning barrier, or {OFFER_CELLS} {WHERE}"
    )
    assert _reason(finished.stdout, CELLS) == (
        f"not observed: in none of {rounds[1]} rounds of fresh cells did two calls overlap, and "
        f"none lost; release the racers together from a spinning barrier {WHERE}"
    )
    assert "\nNOT OBSERVED  RB-PUB-4\n" in finished.stdout
    assert finished.stdout.endswith(
        "0 passed, 0 skipped, 2 not-observed, 0 deviation, 0 not-run, 0 failed\n"
    )
    document = json.loads((tmp_path / "check.json").read_text(encoding="utf-8"))
    assert document["clauses"] == {"RB-PUB-4": "not-observed"}
    assert document["counts"]["not-observed"] == 2
    assert document["failed"] == []
    [suite] = list(junitparser.JUnitXml.fromfile(str(tmp_path / "check.xml")))
    assert (suite.tests, suite.skipped, suite.failures) == (2, 2, 0)


@pytest.mark.slow
def test_require_race_fails_a_race_not_observed(tmp_path: Path) -> None:
    finished = _check(
        "serial-racers", tmp_path, "-k", "budget", "--race-budget", "0.2", "--require-race"
    )
    assert finished.returncode == 1, finished.stdout[-3000:] + finished.stderr
    races = re.search(r"in none of (\d+) races", finished.stdout)
    assert races, finished.stdout
    lines = finished.stdout.splitlines()
    failure = lines[lines.index(f"FAIL  {BUDGET}  [RB-PUB-4]") + 1].strip()
    assert failure == (
        f"--require-race: not observed: in none of {races[1]} races did two calls overlap, and "
        f"none lost; release the racers together from a spinning barrier, or {OFFER_CELLS} {WHERE}"
    )
    document = json.loads((tmp_path / "check.json").read_text(encoding="utf-8"))
    assert document["clauses"] == {"RB-PUB-4": "failed"}


@pytest.mark.slow
def test_an_adapter_that_gives_no_spans_is_not_observed_unless_caught(tmp_path: Path) -> None:
    finished = _check("no-spans", tmp_path, "-k", "budget", "--race-budget", "0.2")
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr
    races = re.search(r"none of (\d+) races gave", finished.stdout)
    assert races, finished.stdout
    assert _reason(finished.stdout, BUDGET) == (
        f"not observed: none of {races[1]} races gave its calls' spans, so none is known to have "
        f"overlapped, and none lost; give each racing call's span, or {OFFER_CELLS} {WHERE}"
    )


@pytest.mark.slow
def test_a_racy_cell_whose_calls_overlap_fails(tmp_path: Path) -> None:
    # The same cell as the control's, its racers released together.
    finished = _check("racy-window", tmp_path, "-k", "budget", "--race-budget", "0.2")
    assert finished.returncode == 1, finished.stdout[-3000:] + finished.stderr
    assert f"FAIL  {BUDGET}  [RB-PUB-4]" in finished.stdout
    assert "the reply is not one the model allows" in finished.stdout
    document = json.loads((tmp_path / "check.json").read_text(encoding="utf-8"))
    assert document["clauses"] == {"RB-PUB-4": "failed"}


def test_the_reference_adapter_gives_each_racing_calls_span_only_when_asked() -> None:
    from ssm_rollback_spec.harness.adapter import respond  # noqa: PLC0415
    from ssm_rollback_spec.harness.python_impl import fresh_module  # noqa: PLC0415

    def answer(request: dict[str, object], /) -> dict[str, object]:
        # As the wire carries it: a span goes out as a JSON list.
        reply = respond(fresh_module("ssm_rollback_spec.rollback"), json.dumps(request))
        decoded: dict[str, object] = json.loads(json.dumps(reply))
        return decoded

    events = [{"op": "set", "mode": "replay"}, {"op": "get"}]
    for extra, rounds in (({"op": "race"}, None), ({"op": "race_cells", "rounds": 3}, 3)):
        request = {**extra, "events": events}
        assert set(answer(request)) == {"ok"}
        asked = answer({**request, "spans": True})
        assert set(asked) == {"ok", "spans"}
        spans = reply_spans(asked, calls=len(events), rounds=rounds)
        assert spans is not None
        assert len(spans) == (rounds or 1)
        # Read around each call on a monotonic clock: every call took time.
        assert all(start < end for round_ in spans for start, end in round_)


def test_spans_at_the_clocks_edges_and_of_no_length_are_well_formed() -> None:
    most = 2**64 - 1
    assert reply_spans({"spans": [[0, most], [most, most], [5, 5]]}, calls=3) == [
        [(0, most), (most, most), (5, 5)]
    ]
    span_shape = f"must be [START, END], integers in [0, {most}] with START <= END"
    for shown in ("[-1, 2]", f"[1, {most + 1}]", "[3]", "[1, 2, 3]", '"1-2"', "[1.0, 2]"):
        with pytest.raises(MalformedSpansError) as raised:
            reply_spans({"spans": [json.loads(shown)]}, calls=1)
        assert str(raised.value) == f"spans[0] {span_shape}, got {shown}"
    with pytest.raises(MalformedSpansError) as raised:
        reply_spans({"spans": {"0": [1, 2]}}, calls=1, rounds=1)
    assert str(raised.value) == 'spans must be a list of 1 rounds, got {"0": [1, 2]}'


def test_a_race_required_but_not_seen_fails_rb_pub_4_naming_the_flag() -> None:
    error = RaceNotSeenError("not observed: in none of 3 races did two calls overlap")
    assert isinstance(error, AssertionError)
    assert str(error) == "--require-race: not observed: in none of 3 races did two calls overlap"
    assert error.clauses == ("RB-PUB-4",)


def test_one_verdict_on_races_for_both_commands() -> None:
    seen = RaceTally("races", "race")
    seen.add([(0, 5), (4, 9)])
    unseen = RaceTally("races", "race")
    unseen.add([(0, 5), (6, 9)])
    reason = unseen.not_observed()
    assert reason is not None
    for required in (False, True):
        verdict = judge_races(seen, required=required)
        assert (verdict.outcome, verdict.detail, verdict.failure) == (RaceOutcome.SEEN, "", None)
    plain = judge_races(unseen, required=False)
    assert (plain.outcome, plain.detail, plain.failure) == (RaceOutcome.NOT_OBSERVED, reason, None)
    strict = judge_races(unseen, required=True)
    assert strict.outcome is RaceOutcome.NOT_SEEN_REQUIRED
    assert isinstance(strict.failure, RaceNotSeenError)
    assert strict.detail == str(strict.failure) == f"--require-race: {reason}"
    # The names the reports give.
    assert [o.value for o in RaceOutcome] == ["passed", "not-observed", "failed"]


# --- vectors run's races, through a driver whose replies are written here ----

_TWO_WRITERS: Final = [{"op": "set", "mode": "replay"}, {"op": "set", "mode": "snapshot"}]


class _RaceDriver:
    """Replies to each race as its ``answer`` says; the sends it got, as sent."""

    def __init__(self, *answers: dict[str, object]) -> None:
        # The last answer repeats.
        self.answers = list(answers)
        self.sent: list[tuple[dict[str, object], str | None]] = []

    def request_many(
        self, requests: Sequence[Mapping[str, object]], lines: Sequence[str | None] = ()
    ) -> list[dict[str, object]]:
        assert not requests
        assert not lines
        return []

    def request(
        self, request: Mapping[str, object], *, line: str | None = None
    ) -> dict[str, object]:
        self.sent.append((dict(request), line))
        return self.answers.pop(0) if len(self.answers) > 1 else dict(self.answers[0])


def _race_case(**extra: object) -> corpus.Case:
    case = {
        "id": "race-two-writers",
        "clauses": ["RB-PUB-4"],
        "request": {"op": "race", "events": _TWO_WRITERS},
        "expected": [{"ok": ["replay", "replay"]}, {"ok": ["snapshot", "snapshot"]}],
    }
    return case | extra  # type: ignore[return-value]


def _run_race(
    driver: _RaceDriver, case: corpus.Case, /, *, required: bool = False
) -> corpus.CaseResult:
    [result] = corpus.run_cases(driver, [case], require_race=required)  # type: ignore[arg-type]
    return result


_SERIAL: Final = {"ok": ["replay", "replay"], "spans": [[0, 5], [6, 9]]}
_OVERLAPPING: Final = {"ok": ["replay", "replay"], "spans": [[0, 5], [4, 9]]}


def test_the_contested_races_of_the_shipped_corpus_are_those_a_racy_cell_could_lose() -> None:
    cases = corpus.load_cases(VECTORS)
    assert {case["id"] for case in cases if corpus.is_contested_race(case)} == CONTESTED
    # Races of one possible outcome are judged by their reply alone.
    others = {case["id"] for case in cases if case["request"].get("op") == "race"} - CONTESTED
    assert others == {
        "race-empty",
        "race-many-readers",
        "race-many-writers-one-mode",
        "race-256-events",
        "race-257-events",
        "protocol-bad-race-unknown-event",
    }


def test_vectors_run_passes_a_race_only_when_two_of_its_calls_overlapped() -> None:
    driver = _RaceDriver(_SERIAL, _SERIAL, _OVERLAPPING)
    result = _run_race(driver, _race_case())
    assert (result.outcome, result.detail) == ("passed", "")
    # Asked for spans, and sent again until two calls overlapped.
    asked = {"op": "race", "events": _TWO_WRITERS, "spans": True}
    assert driver.sent == [(asked, None)] * 3
    assert result.sent == protocol.encode(asked)


def test_vectors_run_reports_a_race_never_seen_as_not_observed() -> None:
    driver = _RaceDriver(_SERIAL)
    result = _run_race(driver, _race_case())
    # An instant driver gets all ten sends within the time bound.
    assert len(driver.sent) == 10
    assert (result.outcome, result.clauses) == ("not-observed", ["RB-PUB-4"])
    assert result.detail == (
        "not observed: in none of 10 sends of this race did two calls overlap, and none lost; "
        f"{RELEASE} {WHERE}"
    )
    required = _run_race(_RaceDriver(_SERIAL), _race_case(), required=True)
    assert (required.outcome, required.detail) == ("failed", f"--require-race: {result.detail}")


def test_vectors_run_sends_a_race_once_when_the_adapter_gives_no_spans() -> None:
    driver = _RaceDriver({"ok": ["snapshot", "snapshot"]})
    result = _run_race(driver, _race_case())
    assert len(driver.sent) == 1
    assert result.outcome == "not-observed"
    assert result.detail == (
        "not observed: none of 1 send of this race gave its calls' spans, so none is known to "
        f"have overlapped, and none lost; give each racing call's span {WHERE}"
    )


def test_vectors_run_fails_a_lost_race_whatever_its_spans() -> None:
    mixed = {"ok": ["replay", "snapshot"], "spans": [[0, 5], [6, 9]]}
    driver = _RaceDriver(_SERIAL, mixed)
    result = _run_race(driver, _race_case())
    sent = protocol.encode({"op": "race", "events": _TWO_WRITERS, "spans": True})
    assert (result.outcome, result.clauses, result.sent) == ("failed", ["RB-PUB-4"], sent)
    assert result.detail == (
        f"request {sent}\nreplied {protocol.encode(mixed)}\n"
        'expected {"ok":["replay","replay"]} or {"ok":["snapshot","snapshot"]}'
    )


def test_vectors_run_blames_spans_of_the_wrong_shape_on_rb_proto_3() -> None:
    wrong = {"ok": ["replay", "replay"], "spans": [[5, 0], [6, 9]]}
    result = _run_race(_RaceDriver(wrong), _race_case())
    assert (result.outcome, result.clauses) == ("failed", ["RB-PROTO-3"])
    assert result.detail.splitlines()[-1] == (
        'expected no "spans", or [START, END] per call (docs/protocol-race-evidence.md): '
        "spans[0] must be [START, END], integers in [0, 18446744073709551615] with "
        "START <= END, got [5, 0]"
    )


def test_vectors_run_sends_a_race_with_an_exact_line_as_it_is() -> None:
    line = '{"events":[{"op":"set","mode":"replay"},{"op":"set","mode":"snapshot"}],"op":"race"}'
    driver = _RaceDriver({"ok": ["replay", "replay"]})
    result = _run_race(driver, _race_case(line=line))
    # Not asked for spans, so none is known to have overlapped.
    assert driver.sent == [({"op": "race", "events": _TWO_WRITERS}, line)]
    assert result.outcome == "not-observed"
    assert result.sent == line


# --- vectors run against the wrong adapter's racy cell (slow: fresh processes)


def _vectors(
    mistake: str, tmp_path: Path, /, *arguments: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, object]]:
    finished = run_module(
        "ssm_rollback_spec.tools.cli", "vectors", "run", "--clause", "RB-PUB-4",
        "--impl-cmd", f"{sys.executable} -S {WRONG_ADAPTER} {mistake}",
        "--json", str(tmp_path / "vectors.json"), "--junit-xml", str(tmp_path / "vectors.xml"),
        *arguments, timeout=600, env={"PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert "Traceback" not in finished.stdout + finished.stderr
    document: dict[str, object] = json.loads((tmp_path / "vectors.json").read_text("utf-8"))
    return finished, document


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mistake", "why"),
    [
        ("serial-racers", "did two calls overlap, and none lost; " + RELEASE),
        ("no-spans", "gave its calls' spans, so none is known to have overlapped"),
    ],
)
def test_vectors_run_reports_races_it_never_saw_as_not_observed(
    tmp_path: Path, mistake: str, why: str
) -> None:
    finished, document = _vectors(mistake, tmp_path)
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr
    assert document["clauses"] == {"RB-PROTO-2": "passed", "RB-PUB-4": "not-observed"}
    cases = document["cases"]
    assert isinstance(cases, list)
    unseen = {case["id"]: case["detail"] for case in cases if case["outcome"] == "not-observed"}
    assert set(unseen) == CONTESTED
    assert all(detail.startswith("not observed: ") and why in detail for detail in unseen.values())
    [suite] = list(junitparser.JUnitXml.fromfile(str(tmp_path / "vectors.xml")))
    assert (suite.tests, suite.skipped, suite.failures) == (len(cases), len(CONTESTED), 0)
    assert "\nNOT OBSERVED  RB-PUB-4\n" in finished.stdout


@pytest.mark.slow
def test_vectors_run_require_race_fails_a_race_it_never_saw(tmp_path: Path) -> None:
    finished, document = _vectors("serial-racers", tmp_path, "--require-race")
    assert finished.returncode == 1, finished.stdout[-3000:] + finished.stderr
    assert document["clauses"] == {"RB-PROTO-2": "passed", "RB-PUB-4": "failed"}
    lines = finished.stdout.splitlines()
    failure = lines[lines.index("FAIL  race-two-writers  [RB-PUB-4]") + 1].strip()
    assert failure.startswith("--require-race: not observed: in none of "), failure


@pytest.mark.slow
def test_vectors_run_fails_a_racy_cell_whose_calls_overlap(tmp_path: Path) -> None:
    finished, document = _vectors("racy-window", tmp_path)
    assert finished.returncode == 1, finished.stdout[-3000:] + finished.stderr
    assert document["clauses"] == {"RB-PROTO-2": "passed", "RB-PUB-4": "failed"}
    assert "FAIL  race-two-writers  [RB-PUB-4]" in finished.stdout
