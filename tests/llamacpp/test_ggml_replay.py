# SPDX-License-Identifier: MIT OR Apache-2.0
"""ggml's GDN ops judged by the replay corpus: the ggml-f32 pipeline's cases, and the control.

adapters/llama-cpp/ggml_adapter.py answers ``replay`` with ggml's own CPU ops
at the release's commit (ggml_replay.cpp), rolling back to the snapshot of
the last accepted token as llama.cpp does. The model's ``ggml-f32`` pipeline
(spec/replay/layer.py) was measured against it: every value of every case is
the model's, bit for bit, so the tier asserts that and not only the bound.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING, Any, Final

import pytest

from ssm_rollback_spec import corpus
from tests.child import ROOT
from tests.llamacpp import results
from tests.results.test_results import check_report_gives_the_generators_columns

if TYPE_CHECKING:
    from pathlib import Path

    from tests.llamacpp.engine import Built

pytestmark = pytest.mark.llamacpp

PIPELINE: Final = "ggml-f32"
_EXACT: Final = "exact: every value the model's"


def _vectors_run(tmp_path: Path, /, *flags: str) -> tuple[int, dict[str, Any]]:
    report = tmp_path / "report.json"
    status = results.run_report(*flags, report=report)
    return status, json.loads(report.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def ggml_report(llamacpp: Built) -> tuple[int, dict[str, Any]]:
    """The real build's run, its report kept in build/results/llama.cpp/ for the results page.

    The records' columns are written beside it as reports, for the HTML page
    .ci/run's report step builds from that folder.
    """
    del llamacpp  # built first
    status = results.run_report()
    results.place_committed_report()
    return status, json.loads(results.REPORT.read_text(encoding="utf-8"))


def _mine() -> set[str]:
    cases = corpus.load_replay_cases(ROOT / "vectors" / "replay")
    return {case.case_id for case in cases if case.pipeline == PIPELINE}


def test_ggml_gives_every_value_of_its_pipelines_replay_cases(
    llamacpp: Built, ggml_report: tuple[int, dict[str, Any]]
) -> None:
    status, report = ggml_report
    mine = _mine()
    outcomes = {case["id"]: case for case in report["cases"]}
    assert mine, f"the replay corpus has no case of {PIPELINE}"
    assert status == 0, report["cases"]
    # Single windows of 2 and 4 tokens and a decode of 16 rounds.
    assert {case_id.split("-")[1] for case_id in mine} == {"rebuild", "rounds"}
    for case_id in mine:
        assert outcomes[case_id]["outcome"] == "passed"
        assert outcomes[case_id]["detail"] == _EXACT, outcomes[case_id]
    others = {case["outcome"] for case_id, case in outcomes.items() if case_id not in mine}
    assert others == {"skipped"}
    assert report["describe"]["release"] == (
        f"llama-cpp-python=={llamacpp['version']} (llama.cpp {llamacpp['commit']})"
    )


def test_the_committed_results_page_has_the_column_this_runs_report_gives(
    ggml_report: tuple[int, dict[str, Any]],
) -> None:
    del ggml_report  # written to build/results/llama.cpp/
    committed = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    assert results.page_column(committed) == results.column(), (
        "docs/results.md's llama.cpp column is out of date: python -m tests.llamacpp.results"
    )


def test_report_over_the_tiers_folder_gives_the_committed_pages_llama_cpp_columns(
    ggml_report: tuple[int, dict[str, Any]], tmp_path: Path
) -> None:
    # .ci/run's report step reads every report in build/results/llama.cpp/: with the
    # records' reports, its HTML page has the columns docs/results.md has.
    del ggml_report  # written to build/results/llama.cpp/, the records beside it
    found = sorted(results.REPORTS.glob("*.json"))
    assert {results.REPORT, *results.TIER_REPORTS} <= set(found)
    check_report_gives_the_generators_columns(tmp_path, results.REPORT, found)


def test_the_ggml_adapters_off_by_one_control_fails(
    ggml_report: tuple[int, dict[str, Any]], tmp_path: Path
) -> None:
    del ggml_report  # the real build's, for the page below
    status, report = _vectors_run(tmp_path, "--control", "off-by-one")
    # The columns are spliced where report puts them: the control's page with
    # the real build's column, and the prebuilt release's that its record gives
    # beside it, is the page of both reports.
    control = tmp_path / "report.json"
    spliced = results.with_column(results.markdown(control), results.column())
    assert results.with_column(spliced, results.prebuilt_column()) == results.markdown(
        results.REPORT, control
    )
    mine = _mine()
    failed = {case["id"] for case in report["cases"] if case["outcome"] == "failed"}
    assert status == 1
    # Every case of a partial accept with room for one more token fails; a
    # ring of one row (K = 2) has no other count to take.
    assert failed == {case_id for case_id in mine if not case_id.endswith("-k2-a1")}


@pytest.mark.parametrize(
    ("program", "prog"),
    [
        ("build.py", "adapters/llama-cpp/build.py"),
        ("ggml_adapter.py", "python adapters/llama-cpp/ggml_adapter.py"),
    ],
)
def test_a_version_that_is_not_a_release_number_is_refused_in_one_line(
    program: str, prog: str
) -> None:
    # The value names a folder of the cache, so nothing but X.Y.Z is taken.
    finished = subprocess.run(
        [sys.executable, str(ROOT / "adapters" / "llama-cpp" / program), "--version", "../x"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert finished.returncode == 2
    assert finished.stderr.splitlines()[-1] == (
        f"{prog}: error: --version '../x' is not a release number such as 0.3.36"
    )


@pytest.mark.usefixtures("llamacpp")
def test_a_shape_ggml_cannot_take_is_refused_naming_it() -> None:
    # ggml_gated_delta_net's state is S_v x S_v: key and value heads of one size.
    one, two = "0x1p+0", "0x1p-1"
    dims = {
        "num_key_heads": 1,
        "key_head_dim": 1,
        "num_value_heads": 1,
        "value_head_dim": 2,
        "conv_kernel": 2,
    }
    row = {"qkv": [one] * 4, "g": [two], "beta": [two], "a": [one], "b": [one]}
    request = {
        "op": "replay",
        "pipeline": PIPELINE,
        "layout": "pre-conv",
        "dims": dims,
        "conv_weight": [[one, one]] * 4,
        "a_log": [one],
        "dt_bias": [one],
        "checkpoint": {"conv": [[one]] * 4, "h": [[[one, one]]]},
        "rounds": [{"rows": [row], "accepted": 1}],
    }
    finished = subprocess.run(
        [sys.executable, str(results.ADAPTER)],
        input=json.dumps(request) + "\n",
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert json.loads(finished.stdout) == {
        "error": {
            "kind": "bad-request",
            "message": "ggml_gated_delta_net needs key_head_dim == value_head_dim, got 1 and 2",
        }
    }
