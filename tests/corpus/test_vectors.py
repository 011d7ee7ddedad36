# SPDX-License-Identifier: MIT OR Apache-2.0
"""The committed vectors: valid, regenerated identically, and they tell right from wrong."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import jsonschema
import pytest

from ssm_rollback_spec import SPEC_VERSION, corpus
from ssm_rollback_spec.corpus.replay_offer import FIRST_OFFER, NOT_A_FIRST_PIPELINE
from ssm_rollback_spec.harness.oracle import allowed_replies
from ssm_rollback_spec.harness.protocol import MAX_DEPTH, PROTOCOL_VERSION, loads_bounded
from ssm_rollback_spec.harness.protocol import encode as protocol_encode
from tests.child import run_module
from tests.fakes.wrong import WRONG, Family, import_path

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Mapping, Sequence

ROOT: Final = Path(__file__).resolve().parents[2]
VECTORS: Final = ROOT / "vectors"
# Wrong implementations that fixed cases cannot be relied on to catch, and why.
NOT_CAUGHT_BY_FIXED_CASES: Final = {
    "RacyCheckThenSet": "a race is lost only when a thread switch lands in its window; "
    "the properties repeat races until it does, a fixed case runs each race once",
}

#: The clause family whose cases stand for each property module, so that a
#: wrong implementation runs only the cases of what it breaks.
FAMILY_CLAUSES: Final = {
    Family.PARSE: "RB-PARSE",
    Family.PUBLISHED_MODE: "RB-PUB",
    Family.SIZES: "RB-SIZE",
    Family.VERIFY: "RB-VERIFY",
}


def _files() -> list[Path]:
    return sorted(path for path in VECTORS.glob("*.json") if path.name != "schema.json")


def test_every_file_validates_against_the_schema() -> None:
    schema = json.loads((VECTORS / "schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    assert _files()
    for path in _files():
        errors = list(validator.iter_errors(json.loads(path.read_text(encoding="utf-8"))))
        assert not errors, f"{path.name}: {errors[0].message}"


def test_the_committed_corpus_is_exactly_a_fresh_generation() -> None:
    generated = corpus.generate()
    # The schema is written with the cases, from the one shipped beside the code.
    assert sorted(generated) == sorted(path.name for path in VECTORS.glob("*.json"))
    for name, text in generated.items():
        committed = (VECTORS / name).read_text(encoding="ascii")
        assert committed == text, f"vectors/{name} differs: run ssm-rollback-spec vectors generate"


def test_generation_is_deterministic() -> None:
    assert corpus.generate() == corpus.generate()


def test_the_manifest_pins_every_file_and_names_the_versions() -> None:
    manifest = json.loads((VECTORS / "manifest.json").read_text(encoding="ascii"))
    assert manifest["spec_version"] == SPEC_VERSION
    assert manifest["protocol_version"] == PROTOCOL_VERSION
    cases = corpus.load_cases(VECTORS)
    assert sum(entry["cases"] for entry in manifest["files"]) == len(cases)


def test_a_tampered_file_is_refused(tmp_path: Path) -> None:
    for path in VECTORS.glob("*.json"):
        (tmp_path / path.name).write_bytes(path.read_bytes())
    parse = tmp_path / "parse.json"
    parse.write_text(parse.read_text(encoding="ascii").replace("SNAPSHOT", "snapshot"), "ascii")
    expected = re.escape("parse.json: SHA-256 differs from manifest.json")
    with pytest.raises(corpus.VectorError, match=expected):
        corpus.load_cases(tmp_path)


#: Cases that allow more than the model: the protocol leaves the reader a choice.
READER_MAY_CHOOSE: Final = {
    # RFC 8259, section 8.1: a reader MAY ignore a byte order mark.
    "protocol-byte-order-mark-read-or-refused": [
        {"ok": "replay"},
        {"error": {"kind": "bad-request"}},
    ],
}


def test_every_case_expects_what_the_model_allows() -> None:
    for case in corpus.load_cases(VECTORS):
        expected = READER_MAY_CHOOSE.get(case["id"], allowed_replies(case["request"]))
        assert case["expected"] == expected, case["id"]


def test_a_case_with_a_line_decodes_to_its_request() -> None:
    lined = [case for case in corpus.load_cases(VECTORS) if "line" in case]
    assert {case["id"] for case in lined} >= {
        "protocol-bad-integer-exponent",
        "protocol-bad-integer-minus-zero",
        "protocol-duplicate-key-last-counts",
        "protocol-byte-order-mark-read-or-refused",
    }
    for case in lined:
        decoded = loads_bounded(case["line"].removeprefix("\ufeff"), MAX_DEPTH)
        assert isinstance(decoded, dict)
        assert protocol_encode(decoded) == protocol_encode(case["request"]), case["id"]


def test_the_required_boundaries_are_covered() -> None:
    requests: dict[str, dict[str, Any]] = {
        case["id"]: case["request"]
        for case in corpus.load_cases(VECTORS)
        if "RB-PROTO-4" not in case["clauses"]
    }
    rings = [r for r in requests.values() if r.get("op") == "ring_bytes"]
    assert {r["k_ceiling"] for r in rings} >= {0, 1, 2}
    products = {
        r["mtp_state_slots"] * max(r["k_ceiling"] - 1, 0) * r["num_ssm_layers"] * r["row_bytes"]
        for r in rings
    }
    assert {2**64 - 1, 2**64} <= products
    assert any(
        0 in (r["num_ssm_layers"], r["row_bytes"]) and r["k_ceiling"] == 2**64 - 1 for r in rings
    )
    traces = [r["events"] for r in requests.values() if r.get("op") == "trace"]
    assert any(t and t[0] == {"op": "get"} for t in traces), "a read before any write"
    assert any(len(t) > 2 and t[0]["op"] == "set" and {"op": "get"} in t[1:-1] for t in traces), (
        "a read between writes"
    )
    assert any(t and t[-1] == {"op": "get"} and t[0]["op"] == "set" for t in traces), "after"


class _ShortDriver:
    """A driver that answers one case fewer than it was sent."""

    def request_many(
        self, requests: Sequence[Mapping[str, object]], lines: Sequence[str | None] = ()
    ) -> list[dict[str, object]]:
        assert len(lines) == len(requests)
        replies: list[dict[str, object]] = [{"ok": "snapshot"} for _ in requests]
        return replies[:-1]

    def request(
        self, request: Mapping[str, object], *, line: str | None = None
    ) -> dict[str, object]:
        raise AssertionError(request, line)


def test_a_case_that_gets_no_result_is_an_error() -> None:
    cases = [case for case in corpus.load_cases(VECTORS) if case["id"].startswith("parse-")]
    with pytest.raises(corpus.VectorError) as raised:
        corpus.run_cases(_ShortDriver(), cases)  # type: ignore[arg-type]
    assert str(raised.value) == f"cases that got no result: {cases[-1]['id']}"


def _run(*arguments: str) -> subprocess.CompletedProcess[str]:
    return run_module("ssm_rollback_spec.tools.cli", "vectors", "run", *arguments, timeout=600)


def _json_report(tmp_path: Path, *arguments: str) -> tuple[int, dict[str, Any]]:
    report = tmp_path / "report.json"
    finished = _run(*arguments, "--json", str(report))
    assert "Traceback" not in finished.stdout + finished.stderr
    return finished.returncode, json.loads(report.read_text(encoding="utf-8"))


def test_the_python_adapter_passes_every_case_and_does_not_offer_replay(tmp_path: Path) -> None:
    status, report = _json_report(tmp_path)
    assert status == 0
    replay = corpus.load_replay_cases(VECTORS / "replay")
    scripts = corpus.load_model_cases(VECTORS / "replay")
    cases = corpus.load_cases(VECTORS)
    # Whether the reference's racers overlap is the host's doing: a contested
    # race it did not see is not observed, never a pass (docs/protocol.md).
    unseen = [case for case in report["cases"] if case["outcome"] == "not-observed"]
    contested = {case["id"] for case in cases if corpus.is_contested_race(case)}
    assert {case["id"] for case in unseen} <= contested
    assert all(case["detail"].startswith("not observed: ") for case in unseen)
    assert report["counts"] == {
        "passed": len(cases) - len(unseen),
        "failed": 0,
        "not-run": 0,
        "deviation": 0,
        "not-observed": len(unseen),
        "skipped": len(replay) + len(scripts),
    }
    skipped = [case for case in report["cases"] if case["outcome"] == "skipped"]
    assert [case["id"] for case in skipped] == [
        *(case.case_id for case in replay),
        *(case.case_id for case in scripts),
    ]
    # Its describe has no replay member, so it is sent protocol 2's first
    # pipelines alone, and no form of batch entry it does not list; a case not
    # sent says why, and one sent is answered unknown-op (docs/protocol.md).
    sent = {"replay": corpus.NOT_OFFERED, "replay_batch": corpus.BATCH_NOT_OFFERED}
    expected = [
        corpus.not_offered(case, FIRST_OFFER) or sent[str(case.request["op"])] for case in replay
    ]
    # Its describe names no model, so no round script is sent.
    expected += [corpus.MODEL_NOT_DESCRIBED] * len(scripts)
    assert [case["detail"] for case in skipped] == expected
    later = {case.pipeline for case in replay} - FIRST_OFFER.pipelines
    assert later
    assert {NOT_A_FIRST_PIPELINE.format(name) for name in later} <= set(expected)


def test_the_rust_adapter_passes_every_case(tmp_path: Path, rust_adapter: str) -> None:
    status, report = _json_report(tmp_path, "--impl-cmd", rust_adapter)
    assert status == 0, report
    assert report["counts"]["failed"] == 0


def test_a_failing_case_names_only_the_clause_it_tells_apart(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    adapter = (
        f"{sys.executable} -m ssm_rollback_spec.harness.adapter "
        f"--impl-module {import_path('LastWriteWins')}"
    )
    finished = _run("--impl-cmd", adapter, "--json", str(report))
    assert finished.returncode == 1
    failed = {
        c
        for c, o in json.loads(report.read_text(encoding="utf-8"))["clauses"].items()
        if o == "failed"
    }
    # Later writes win: the first-write rule, the pinning read and the race
    # break; the process model (RB-PUB-3, RB-PROTO-5) does not.
    assert failed == {"RB-PUB-1", "RB-PUB-2", "RB-PUB-4"}


def _first_failed(report: Path, /) -> dict[str, Any]:
    cases = json.loads(report.read_text(encoding="utf-8"))["cases"]
    return next(case for case in cases if case["outcome"] == "failed")


def _last_write_wins() -> str:
    return (
        f"{sys.executable} -m ssm_rollback_spec.harness.adapter "
        f"--impl-module {import_path('LastWriteWins')}"
    )


def test_exitfirst_stops_at_the_first_failed_case_and_reports_the_rest_not_run(
    tmp_path: Path,
) -> None:
    everything, stopped = tmp_path / "all.json", tmp_path / "x.json"
    _run("--impl-cmd", _last_write_wins(), "--json", str(everything))
    finished = _run("--impl-cmd", _last_write_wins(), "--exitfirst", "--json", str(stopped))
    assert finished.returncode == 1
    cases = json.loads(stopped.read_text(encoding="utf-8"))["cases"]
    first = _first_failed(everything)
    at = [case["id"] for case in cases].index(first["id"])
    assert cases[at]["outcome"] == "failed"
    assert "failed" not in {case["outcome"] for case in cases[:at]}
    after = [case for case in cases[at + 1 :] if case["outcome"] != "skipped"]
    assert after
    assert {case["detail"] for case in after} == {corpus.STOPPED.format(first["id"])}


def test_exitfirst_goes_past_a_failure_the_deviations_list(tmp_path: Path) -> None:
    report = tmp_path / "x.json"
    first = _run("--impl-cmd", _last_write_wins(), "-x", "--json", str(report))
    assert first.returncode == 1
    failed = _first_failed(report)
    listed = tmp_path / "deviations.json"
    entry = {"case": failed["id"], "reason": "known"}
    listed.write_text(json.dumps({"deviations": [entry]}), encoding="utf-8")
    _run("--impl-cmd", _last_write_wins(), "-x", "--deviations", str(listed), "--json", str(report))
    cases = {case["id"]: case for case in json.loads(report.read_text("utf-8"))["cases"]}
    assert cases[failed["id"]]["outcome"] == "deviation"
    # The run went on to the next failure the list does not name, and stopped there.
    stopped = {case["detail"] for case in cases.values() if case["outcome"] == "not-run"}
    assert len(stopped) == 1
    assert stopped != {corpus.STOPPED.format(failed["id"])}


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    sorted(
        name
        for name, expected in WRONG.items()
        if not expected.python_only and name not in NOT_CAUGHT_BY_FIXED_CASES
    ),
)
def test_every_wrong_implementation_fails_the_vectors(name: str) -> None:
    adapter = (
        f"{sys.executable} -m ssm_rollback_spec.harness.adapter --impl-module {import_path(name)}"
    )
    clause = FAMILY_CLAUSES[WRONG[name].family]
    finished = _run("--impl-cmd", adapter, "--clause", clause)
    assert finished.returncode == 1, finished.stdout[-3000:] + finished.stderr[-2000:]
    assert f"FAIL  {clause}-" in finished.stdout
    assert "Traceback" not in finished.stdout + finished.stderr
