# SPDX-License-Identifier: MIT OR Apache-2.0
"""verdict: PASS only with drafts accepted; the lines, the reproducer and the report."""

from __future__ import annotations

import json
import shlex
from typing import Final

from ssm_rollback_spec import SPEC_VERSION
from ssm_rollback_spec.results.reports import parse_report
from ssm_rollback_spec.serving.client import Generation, Served, Server
from ssm_rollback_spec.serving.dialects import DIALECTS
from ssm_rollback_spec.serving.errors import ServerFailedError
from ssm_rollback_spec.serving.run import Noise, Observed, Run, judge_requests
from ssm_rollback_spec.serving.shrink import Shrunk
from ssm_rollback_spec.serving.verdict import (
    Verdict,
    VerdictKind,
    curl_line,
    decide,
    lines,
    report_document,
    reproducer_lines,
)
from ssm_rollback_spec.serving.workload import Request, Workload

_SAME: Final = Generation(("1", "2"), ({"1": -0.1, "3": -2.0}, {"2": -0.1, "4": -3.0}))
_TIE: Final = Generation(("1", "2"), ({"1": -0.1}, {"2": -0.5, "4": -0.5}))
_TIE_TARGET: Final = Generation(("1", "4"), ({"1": -0.1}, {"2": -0.5, "4": -0.5}))
_WRONG: Final = Generation(("1", "4"), ({"1": -0.1, "3": -2.0}, {"4": -0.1, "2": -3.0}))
_REQUEST: Final = Request(prompt=[5, 6, 5], max_tokens=2)


def _run(
    pairs: list[tuple[Generation, Generation]],
    *,
    accepted: float | None = 5.0,
    drafted: float | None = 8.0,
    failure: ServerFailedError | None = None,
    noise: Noise | None = None,
) -> Run:
    indices = range(len(pairs))
    reference = Observed(
        batched={i: ref for i, (ref, _) in enumerate(pairs)},
        alone={i: ref for i, (ref, _) in enumerate(pairs)},
    )
    target = Observed(
        batched={i: tgt for i, (_, tgt) in enumerate(pairs)},
        alone={i: tgt for i, (_, tgt) in enumerate(pairs)},
        counted={0: (3.0, 2.0)},
        drafted=drafted,
        accepted=accepted,
        counted_from="the responses",
        failure=failure,
    )
    if noise is None:
        noise = Noise(
            {"reference alone against in a batch": 0.0},
            {"target alone against in a batch": 0.5},
            3.0,
        )
    return Run(
        model="m",
        dialect="vllm",
        workload=Workload(tuple(_REQUEST for _ in indices), (tuple(indices),)),
        reference=reference,
        target=target,
        noise=noise,
        results=tuple(judge_requests(reference, target, noise.bound)),
    )


def _server(role: str, port: int) -> Server:
    server = Server(role, f"--{role}", f"http://127.0.0.1:{port}", timeout=1)
    server.adopt(Served(("m",), "vllm", {}), "m", DIALECTS["vllm"])
    return server


def test_a_target_that_agrees_and_accepted_drafts_passes() -> None:
    verdict = decide(_run([(_SAME, _SAME), (_TIE, _TIE_TARGET)]))
    assert verdict == Verdict(
        VerdictKind.PASS,
        "1 of 2 requests generate the same with speculation (1 inconclusive near ties)",
    )


def test_a_target_that_accepted_no_drafts_is_not_observed_never_pass() -> None:
    verdict = decide(_run([(_SAME, _SAME)], accepted=0.0, drafted=12.0))
    assert verdict == Verdict(
        VerdictKind.NOT_OBSERVED,
        "the target accepted no drafts (12 drafted): "
        "nothing was rolled back past an accepted draft",
    )


def test_a_target_whose_counters_cannot_be_read_is_not_observed() -> None:
    verdict = decide(_run([(_SAME, _SAME)], accepted=None, drafted=None))
    assert verdict == Verdict(
        VerdictKind.NOT_OBSERVED,
        "the target's acceptance counters cannot be read (dialect vllm): "
        "no run can show that it rolled back",
    )


def test_a_run_of_near_ties_alone_is_not_observed() -> None:
    verdict = decide(_run([(_TIE, _TIE_TARGET), (_TIE, _TIE_TARGET)]))
    assert verdict == Verdict(VerdictKind.NOT_OBSERVED, "every request ended in a near tie")


def test_a_request_generated_otherwise_fails_even_with_no_draft_accepted() -> None:
    verdict = decide(_run([(_SAME, _SAME), (_SAME, _WRONG)], accepted=0.0))
    assert verdict == Verdict(
        VerdictKind.FAIL, "1 of 2 requests generate otherwise with speculation"
    )


def test_a_target_server_that_failed_is_a_fail_naming_it() -> None:
    failure = ServerFailedError("target", "answered HTTP 500 to request 1: boom")
    verdict = decide(_run([(_SAME, _SAME)], failure=failure))
    assert verdict == Verdict(
        VerdictKind.FAIL, "the target server answered HTTP 500 to request 1: boom"
    )


def test_the_lines_give_the_verdict_first_then_the_bound_counters_and_each_failure() -> None:
    run = _run([(_SAME, _SAME), (_SAME, _WRONG), (_TIE, _TIE_TARGET)])
    found = lines(run, decide(run), None, ["reproducer line"])
    assert found[0] == "serve-check: FAIL: 1 of 3 requests generate otherwise with speculation"
    assert found[2] == (
        "noise bound: 0 (exact: the engine is bit-stable here) = 3 x the largest of: "
        "reference alone against in a batch 0"
    )
    assert found[3] == (
        "not in the bound, since a rollback is involved: target alone against in a batch 0.5"
    )
    assert found[4] == "target drafts: 8 drafted, 5 accepted (the responses)"
    assert found[5] == "inconclusive near ties: 1"
    assert found[6] == (
        "FAIL request 1 (in its batch): logprobs drift past the bound at position 1: "
        "|difference| 2.9 > 0; first differs at position 1: reference 2 (margin 2.9), "
        "target 4; counters alone: unknown"
    )
    assert found[7] == (
        "NEAR TIE request 2 (in its batch): first differs at position 1: reference 2 "
        "(margin 0), target 4"
    )
    assert found[-1] == "reproducer line"


def test_a_curl_line_asks_the_server_as_the_run_did() -> None:
    server = _server("target", 8001)
    line = curl_line(server, _REQUEST, 5)
    words = shlex.split(line)
    assert words[:3] == ["curl", "-s", "http://127.0.0.1:8001/v1/completions"]
    assert json.loads(words[-1]) == server.body(_REQUEST, 5)


def test_the_reproducer_is_a_prompts_file_and_a_curl_line_for_each_server() -> None:
    reference, target = _server("reference", 8000), _server("target", 8001)
    found = reproducer_lines(reference, target, (_REQUEST,), 5)
    assert found[:2] == [
        "requests (a --prompts file; sent at once):",
        '  {"prompt": [5, 6, 5], "max_tokens": 2, "batch": 0}',
    ]
    assert found[2] == f"request 0, reference: {curl_line(reference, _REQUEST, 5)}"
    assert found[3] == f"request 0, target: {curl_line(target, _REQUEST, 5)}"
    assert len(found) == 4


def test_the_json_report_is_read_back_as_a_serve_check_report() -> None:
    run = _run([(_SAME, _SAME), (_SAME, _WRONG), (_TIE, _TIE_TARGET)])
    verdict = decide(run)
    document = report_document(run, verdict, _server("target", 8001), "0.32.0", ["r"])
    assert document["verdict"] == "FAIL"
    report = parse_report(json.loads(json.dumps(document)))
    assert report.command == "serve-check"
    assert (report.name, report.release, report.spec_version) == (
        "vllm served (m)",
        "0.32.0",
        SPEC_VERSION,
    )
    assert [(r.name, r.outcome) for r in report.results] == [
        ("request-0", "passed"),
        ("request-1", "failed"),
        ("request-2", "not-observed"),
    ]
    assert report.results[2].detail.startswith("not observed: a near tie within the noise bound; ")
    assert all(r.clauses == ("RB-REPLAY-14",) for r in report.results)


def test_a_not_observed_runs_agreeing_requests_are_reported_not_observed_with_the_reason() -> None:
    run = _run([(_SAME, _SAME)], accepted=0.0)
    verdict = decide(run)
    report = parse_report(report_document(run, verdict, _server("target", 8001), "", []))
    assert [(r.outcome, r.detail) for r in report.results] == [
        ("not-observed", f"not observed: {verdict.reason}")
    ]


def test_a_target_server_failure_is_a_failed_case_of_its_own_in_the_report() -> None:
    failure = ServerFailedError("target", "did not answer request 0 within 1 s")
    run = _run([(_SAME, _SAME)], failure=failure)
    report = parse_report(report_document(run, decide(run), _server("target", 8001), "", []))
    assert (report.results[-1].name, report.results[-1].outcome, report.results[-1].detail) == (
        "target-server",
        "failed",
        "the target server did not answer request 0 within 1 s",
    )


def test_a_report_is_named_as_asked_and_otherwise_by_its_dialect_and_model() -> None:
    run = _run([(_SAME, _SAME)])
    verdict = decide(run)
    named = report_document(run, verdict, _server("target", 8001), "", [], name="engine X, ngram")
    plain = report_document(run, verdict, _server("target", 8001), "", [])
    assert parse_report(named).name == "engine X, ngram"
    assert parse_report(plain).name == f"{run.dialect} served ({run.model})"


def test_one_accepted_draft_is_enough_to_pass() -> None:
    verdict = decide(_run([(_SAME, _SAME)], accepted=1.0, drafted=4.0))
    assert verdict.kind is VerdictKind.PASS
    assert verdict.reason == (
        "1 of 1 requests generate the same with speculation (0 inconclusive near ties)"
    )


_HINT: Final = (
    "hint: no server calibrated the bound: if the engine's verify path rounds otherwise "
    "than its decode path, judge again with --calibrate URL (the engine speculating "
    "with a drafter that never drafts); a failure that stays is no rounding"
)
_CALIBRATED: Final = "never-drafting target against reference"


def test_a_failure_is_shown_with_the_targets_counters_for_that_request_alone() -> None:
    run = _run([(_SAME, _WRONG), (_SAME, _WRONG)])
    found = lines(run, decide(run), None, [])
    failures = [line for line in found if line.startswith("FAIL request")]
    assert [line.rsplit("; ", 1)[1] for line in failures] == [
        "alone, the target drafted 3 and accepted 2",
        "counters alone: unknown",
    ]


def test_every_source_of_the_bound_is_listed_and_a_bound_above_zero_is_not_exact() -> None:
    noise = Noise(
        {"reference alone against in a batch": 0.25, _CALIBRATED: 0.5},
        {"target alone against in a batch": 0.5, "target against reference": 0.125},
        2.0,
    )
    run = _run([(_SAME, _SAME)], noise=noise)
    found = lines(run, decide(run), None, [])
    assert found[2:4] == [
        (
            "noise bound: 1 = 2 x the largest of: reference alone against in a batch 0.25, "
            f"{_CALIBRATED} 0.5"
        ),
        (
            "not in the bound, since a rollback is involved: target alone against in a batch "
            "0.5, target against reference 0.125"
        ),
    ]


def test_the_calibration_hint_follows_a_failure_of_an_uncalibrated_run_alone() -> None:
    failed = _run([(_SAME, _WRONG)])
    assert _HINT in lines(failed, decide(failed), None, [])
    passed = _run([(_SAME, _SAME)])
    assert _HINT not in lines(passed, decide(passed), None, [])
    calibrated = Noise({_CALIBRATED: 0.0}, {}, 3.0)
    failed_calibrated = _run([(_SAME, _WRONG)], noise=calibrated)
    assert _HINT not in lines(failed_calibrated, decide(failed_calibrated), None, [])
    broken = _run([(_SAME, _SAME)], failure=ServerFailedError("target", "answered HTTP 500"))
    assert _HINT not in lines(broken, decide(broken), None, [])


def test_a_shrunk_set_is_shown_before_the_reproducer() -> None:
    run = _run([(_SAME, _WRONG)])
    shrunk = Shrunk((_REQUEST, _REQUEST), focus=1, tries=7, index=0)
    found = lines(run, decide(run), shrunk, ["reproducer line"])
    assert found[-2:] == [
        "shrunk in 7 tries to 2 request(s); request 1 of them fails",
        "reproducer line",
    ]


def test_a_curl_lines_body_is_the_servers_body_in_compact_json() -> None:
    server = _server("target", 8001)
    body = shlex.split(curl_line(server, _REQUEST, 5))[-1]
    assert body == json.dumps(server.body(_REQUEST, 5), separators=(",", ":"))


def test_the_json_report_holds_every_figure_of_the_run() -> None:
    failure = ServerFailedError("target", "answered HTTP 500 to request 1: boom")
    run = _run([(_SAME, _SAME), (_SAME, _WRONG)], failure=failure)
    verdict = decide(run)
    document = report_document(run, verdict, _server("target", 8001), "0.32.0", ["r"])
    cases = document["cases"]
    assert [(case["distance"], case["bound"]) for case in cases] == [
        (0.0, 0.0),
        (run.results[1].worst[1].drift, 0.0),
        (0.0, 0.0),
    ]
    assert cases[1]["distance"] > 0
    assert {key: value for key, value in document.items() if key != "cases"} == {
        "command": "serve-check",
        "implementation": "http://127.0.0.1:8001",
        "describe": {"name": "vllm served (m)", "release": "0.32.0"},
        "spec_version": SPEC_VERSION,
        "verdict": "FAIL",
        "reason": "the target server answered HTTP 500 to request 1: boom",
        "bound": 0.0,
        "noise": {"reference alone against in a batch": 0.0},
        "reported": {"target alone against in a batch": 0.5},
        "drafted": 8.0,
        "accepted": 5.0,
        "reproducer": ["r"],
    }


def test_a_target_server_failures_case_is_judged_within_the_runs_bound() -> None:
    noise = Noise({"reference alone against in a batch": 0.25}, {}, 2.0)
    failure = ServerFailedError("target", "answered HTTP 500")
    run = _run([(_SAME, _SAME)], failure=failure, noise=noise)
    document = report_document(run, decide(run), _server("target", 8001), "", [])
    assert document["cases"][-1] == {
        "id": "target-server",
        "clauses": ["RB-REPLAY-14"],
        "outcome": "failed",
        "detail": "the target server answered HTTP 500",
        "distance": 0.0,
        "bound": 0.5,
    }
