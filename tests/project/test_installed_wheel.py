# SPDX-License-Identifier: MIT OR Apache-2.0
"""What users install works without the repository: the wheel, in a fresh venv, elsewhere."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

from ssm_rollback_spec import corpus
from ssm_rollback_spec.corpus.replay_offer import FIRST_OFFER
from tests.child import ROOT, run_module

if TYPE_CHECKING:
    from tests.installed import Installed

SUITE: Final = ROOT / "tests" / "properties"
CORPUS: Final = ROOT / "vectors"


def _json(path: Path, /) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def test_the_wheel_carries_the_suite_and_the_corpus(installed: Installed) -> None:
    finished = installed.run("vectors", "where")
    assert finished.returncode == 0, finished.stderr
    first, replay = finished.stdout.splitlines()
    shipped = Path(first)
    assert shipped.is_relative_to(installed.root)
    assert Path(replay) == shipped / "replay"
    for folder, copy in ((CORPUS, shipped), (CORPUS / "replay", Path(replay))):
        assert sorted(p.name for p in copy.glob("*.json")) == sorted(
            p.name for p in folder.glob("*.json")
        )
        for path in folder.glob("*.json"):
            assert (copy / path.name).read_bytes() == path.read_bytes(), path.name
    suite = shipped.parent / "suite"
    assert sorted(p.name for p in suite.glob("*.py")) == sorted(p.name for p in SUITE.glob("*.py"))


def test_the_wheel_carries_every_schema_the_package_has(installed: Installed) -> None:
    finished = installed.run("vectors", "where")
    assert finished.returncode == 0, finished.stderr
    package = Path(finished.stdout.splitlines()[0]).parent
    schemas = sorted((ROOT / "spec").glob("**/schemas/*.json"))
    assert schemas, "the package has no schema"
    missing = [
        str(path.relative_to(ROOT / "spec"))
        for path in schemas
        if not (package / path.relative_to(ROOT / "spec")).is_file()
        or (package / path.relative_to(ROOT / "spec")).read_bytes() != path.read_bytes()
    ]
    assert missing == []


def test_the_wheel_installs_its_own_name_and_not_spec(installed: Installed) -> None:
    probe = (
        "import importlib.util, ssm_rollback_spec, ssm_rollback_spec.corpus\n"
        "print(importlib.util.find_spec('spec'))\n"
        "print(ssm_rollback_spec.__file__)\n"
    )
    finished = subprocess.run(
        [str(installed.python), "-c", probe],
        cwd=installed.elsewhere,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    found_spec, package = finished.stdout.splitlines()
    assert found_spec == "None"
    assert Path(package).is_relative_to(installed.root)
    # Nothing installed imports the folder's name: every module of the
    # package reaches its siblings relatively or by the installed name.
    site = Path(package).parent
    offenders = [
        str(path.relative_to(site))
        for path in sorted(site.rglob("*.py"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.lstrip().startswith(("from spec.", "from spec import", "import spec"))
    ]
    assert offenders == []


def _outcomes(report: dict[str, Any], /) -> dict[str, str]:
    return {result["property"]: result["outcome"] for result in report["properties"]}


def test_check_passes_installed_with_the_same_results_as_from_the_clone(
    installed: Installed, tmp_path: Path
) -> None:
    # Few examples: what is judged here is that the wheel carries every
    # property and each runs installed; the reference's run at full strength
    # is tests/tools/test_cli.py's.
    finished = installed.run(
        "check", "--profile", "interpreter", "--json", str(tmp_path / "installed.json")
    )
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr
    installed_report = _json(tmp_path / "installed.json")
    # The opt-in replay properties skip: the reference has no replay kernel.
    outcomes = {c: o for c, o in installed_report["clauses"].items() if "REPLAY" not in c}
    assert set(outcomes.values()) == {"passed"}
    # The same properties as the clone's suite (tests/tools/test_cli.py runs it there
    # and sees each pass): the wheel carries all of them, and nothing else.
    collected = run_module("pytest", "--collect-only", "-q", "-p", "no:cacheprovider", str(SUITE))
    assert collected.returncode == 0, collected.stdout[-3000:]
    cloned = {
        line.removeprefix("tests/properties/")
        for line in collected.stdout.splitlines()
        if line.startswith("tests/properties/")
    }
    assert set(_outcomes(installed_report)) == cloned


def test_the_installed_python_adapter_passes_the_parse_cases(
    installed: Installed, tmp_path: Path
) -> None:
    """The installed command runs the installed Python adapter and judges it, one family's cases.

    The everyday stand-in for the whole corpus through it (below, with the
    long runs): the same adapter and runner, installed, on the cases of RB-PARSE.
    """
    report = tmp_path / "report.json"
    finished = installed.run(
        "vectors", "run", "--impl-cmd", installed.adapter(), "--clause", "RB-PARSE",
        "--json", str(report),
    )  # fmt: skip
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr
    cases = _json(report)["cases"]
    parse = [
        case["id"]
        for path in sorted(CORPUS.glob("*.json"))
        for case in _json(path).get("cases", [])
        if any(clause.startswith("RB-PARSE") for clause in case["clauses"])
    ]
    assert parse
    assert sorted(case["id"] for case in cases) == sorted(parse)
    assert {case["outcome"] for case in cases} == {"passed"}


@pytest.mark.slow
def test_vectors_run_passes_installed(installed: Installed, tmp_path: Path) -> None:
    """The whole shipped corpus through the installed Python adapter.

    With the long runs, to keep the everyday suite short: the corpus through the Python adapter is
    judged every day from the clone (tests/corpus/test_vectors.py,
    test_the_python_adapter_passes_every_case_and_does_not_offer_replay), the
    installed runner over the whole corpus on the Rust adapter
    (test_vectors_run_installed_runs_the_replay_cases_on_the_rust_adapter), and
    the installed Python adapter on the parse cases
    (test_the_installed_python_adapter_passes_the_parse_cases).
    """
    report = tmp_path / "report.json"
    finished = installed.run(
        "vectors", "run", "--impl-cmd", installed.adapter(), "--json", str(report)
    )
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr
    counts = _json(report)["counts"]
    # A contested race the host never ran at once is not observed, never a pass.
    unseen = [case for case in _json(report)["cases"] if case["outcome"] == "not-observed"]
    assert all(case["id"].startswith("race-") for case in unseen)
    assert counts["passed"] + len(unseen) == sum(
        len(_json(path)["cases"]) for path in CORPUS.glob("*.json") if "cases" in _json(path)
    )
    assert counts["failed"] == counts["not-run"] == 0
    # The Python adapter does not offer replay, as the clone's own run shows case
    # by case (tests/corpus/test_vectors.py): installed, every replay case and
    # round script is skipped, each with the reason that rule gives it.
    replay = corpus.load_replay_cases(CORPUS / "replay")
    scripts = corpus.load_model_cases(CORPUS / "replay")
    sent = {"replay": corpus.NOT_OFFERED, "replay_batch": corpus.BATCH_NOT_OFFERED}
    expected = [
        corpus.not_offered(case, FIRST_OFFER) or sent[str(case.request["op"])] for case in replay
    ] + [corpus.MODEL_NOT_DESCRIBED] * len(scripts)
    skipped = [case for case in _json(report)["cases"] if case["outcome"] == "skipped"]
    assert counts["skipped"] == len(skipped) == len(replay) + len(scripts)
    assert [case["detail"] for case in skipped] == expected


def test_vectors_run_installed_runs_the_replay_cases_on_the_rust_adapter(
    installed: Installed, tmp_path: Path, rust_adapter: str
) -> None:
    report = tmp_path / "report.json"
    finished = installed.run("vectors", "run", "--impl-cmd", rust_adapter, "--json", str(report))
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr
    cases = _json(report)["cases"]
    replay = [case for case in cases if case["id"].startswith("replay-")]
    assert len(replay) == 167
    # The 70 refusals are float64 requests, all sent (it refuses prompt chunks too).
    # Its describe lists float64 and transformers-bf16: the 39 engine cases (vLLM's,
    # SGLang's and FLA's 15 windows and decodes, ggml's 5, vLLM's and SGLang's 13
    # batches and 6 batches run alone) are not offered, nor are the 8 batches with
    # prompt chunks (4 judged by the model, 4 run alone): it does not list the form.
    skipped = [case for case in replay if case["outcome"] == "skipped"]
    assert len(skipped) == 47
    assert all(case["detail"].startswith("not offered: ") for case in skipped)
    # Its races are sent again until seen: a race not seen after ten is the host's doing.
    outcomes = {case["id"]: case["outcome"] for case in cases if case not in skipped}
    assert {o for i, o in outcomes.items() if not i.startswith("race-")} == {"passed"}
    assert set(outcomes.values()) <= {"passed", "not-observed"}


@pytest.mark.slow
def test_vectors_run_installed_fails_a_wrong_rust_replay(
    installed: Installed, tmp_path: Path, wrong_replay_rust_adapter: tuple[str, str]
) -> None:
    """The installed runner fails each wrong replay build of the Rust adapter.

    With the long runs: the everyday suite runs the same builds through the
    clone's runner (tests/replay/test_replay_rust.py,
    ``test_each_wrong_rust_replay_build_fails_the_replay_cases``), and the
    installed runner's replay cases on the right build (above).
    """
    _, adapter = wrong_replay_rust_adapter
    report = tmp_path / "report.json"
    finished = installed.run("vectors", "run", "--impl-cmd", adapter, "--json", str(report))
    assert finished.returncode == 1, finished.stdout[-3000:] + finished.stderr
    failed = {case["id"] for case in _json(report)["cases"] if case["outcome"] == "failed"}
    assert failed
    assert all(case_id.startswith("replay-") for case_id in failed)


def test_check_installed_runs_the_replay_properties_on_the_rust_adapter(
    installed: Installed, tmp_path: Path, rust_adapter: str
) -> None:
    report = tmp_path / "report.json"
    finished = installed.run(
        "check", "--impl-cmd", rust_adapter, "--clause", "RB-REPLAY", "--json", str(report)
    )
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr
    outcomes = _outcomes(_json(report))
    # The Rust adapter's tiny model (docs/engines.md, "The Rust adapter's tiny model").
    model = "test_model.py::test_a_rolled_back_sequence_decodes_as_the_kept_tokens_decoded_plainly"
    assert outcomes.pop(model) == "passed"
    assert outcomes
    assert set(outcomes) == {p for p in outcomes if p.startswith("test_replay.py::")}
    assert set(outcomes.values()) == {"passed"}
    # Each keeps the distance it measured and its bound: the Rust adapter's
    # replay is the model's arithmetic but for exp, its platform's libm and not
    # the model's correctly rounded one, so every distance is 0 or a last bit
    # (the pool of 4,096 slots, whose batch runs the most exp calls: 7e-17).
    measured = {
        p["property"]: (p["distance"], p["bound"])
        for p in _json(report)["properties"]
        if p["property"] != model
    }
    assert set(measured) == set(outcomes)
    assert max(distance for distance, _ in measured.values()) <= 1e-15
    # Its rolled-back logits are its plain decode's bit for bit, within its bound of 0.
    by_model = [
        (p["distance"], p["bound"]) for p in _json(report)["properties"] if p["property"] == model
    ]
    assert by_model == [(0.0, 0.0)]
    # 0: the batches run alone (RB-REPLAY-13), judged bit for bit.
    assert {bound for _, bound in measured.values()} <= {1e-12, 1e-06, 0.0}
    # The results page gives check's distances as it gives the vectors'.
    page = installed.run("report", str(report))
    assert page.returncode == 0, page.stderr
    [row] = [line for line in page.stdout.splitlines() if line.startswith("| [RB-REPLAY-2]")]
    # RB-REPLAY-2 is one property's alone.
    [(_, bound)] = [pair for name, pair in measured.items() if "rows_past_the_accepted" in name]
    assert row.endswith(f"| **PASS**<br>exact (bound {bound:g}) |"), row
