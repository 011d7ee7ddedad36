# SPDX-License-Identifier: MIT OR Apache-2.0
"""vLLM's own GDN bookkeeping over the corpus's batches (adapters/engines/vllm/batch.py).

The vLLM adapter answers ``replay_batch`` with vLLM 0.33.0's
``GDNAttentionMetadataBuilder.build`` and its GDN layer's ``_forward_core``,
in both of vLLM's cache modes: each ``vllm-bf16`` batch case passes, and the
control build, one off in the accepted count vLLM is handed, fails them,
naming RB-REPLAY-12 and giving a ``reproduce:`` line. ``--version`` names the
release ``describe`` reports, and a malformed one is one line. Each real bug of
docs/engines.md's table fails in the release that shipped it and passes in the
one that fixed it (#48132 with ``--runner v2``, Model Runner V2's own counts),
and a step in which no row drafts, classified by each release's runner's own
``use_spec_decode`` (#55504/#56531), fails 0.31.0 and passes 0.32.0 and 0.33.0.
With blocks of 4 tokens (``--block-size 4``) every batch crosses blocks, and
the runner's own align copies between them keep both judges passing; blocks
smaller than any request are refused where those copies are not run.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import pytest

from ssm_rollback_spec.harness.replay_wire import BatchForm, batch_forms
from tests.child import ROOT
from tests.kernels import engines, results

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.kernels

BATCHES: Final = ROOT / "vectors" / "replay" / "batch.json"
ALONE: Final = ROOT / "vectors" / "replay" / "batch_alone.json"
#: batch_alone.json's bound for vllm-bf16, which holds for its rerouted entries alone.
_ALONE_BOUND: Final = json.loads(ALONE.read_text("utf-8"))["tolerance"]["vllm-bf16"]["kernel"]


def _vllm_cases(*, hits: bool) -> set[str]:
    cases = json.loads(BATCHES.read_text(encoding="utf-8"))["cases"]
    return {
        f"replay-batch-{case['id']}"
        for case in cases
        if case["pipeline"] == "vllm-bf16" and (BatchForm.PREFIX_HITS in batch_forms(case)) == hits
    }


def _vllm_batch_cases() -> set[str]:
    """vLLM's batch cases that every mode of its adapter is sent."""
    return _vllm_cases(hits=False)


def _prefix_hit_cases() -> set[str]:
    """vLLM's batch cases of the form ``prefix-hits``, sent where its adapter lists it."""
    return _vllm_cases(hits=True)


#: vLLM's default cache mode, the adapter's without ``--cache-mode``: its
#: batch cases are in the tier's shared runs (the results page's, the control's).
DEFAULT_MODE: Final = "align"


def _run(
    tmp_path: Path, python: str, /, *flags: str, corpus: tuple[str, ...] = ()
) -> tuple[int, dict[str, Any], str]:
    report = tmp_path / "report.json"
    return engines.vectors_run(report, python, "vllm", *flags, clause="RB-REPLAY-12", corpus=corpus)


def _batch_outcomes(report: dict[str, Any], /) -> dict[str, str]:
    """Each vllm-bf16 batch case's outcome in ``report``."""
    return {
        case["id"]: case["outcome"] for case in report["cases"] if case["id"] in _vllm_batch_cases()
    }


@pytest.mark.parametrize("mode", [DEFAULT_MODE, "none"])
def test_vllms_own_builder_and_layer_pass_the_batch_cases(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, kernels_python: str, mode: str
) -> None:
    # Both judges: the model's (batch.json) and vLLM's own, each sequence alone
    # (batch_alone.json), in each cache mode.
    if mode == DEFAULT_MODE:
        status, report = results.shared_report(tmp_path_factory, kernels_python, "vllm", "vectors")
    else:
        status, report, _ = _run(
            tmp_path, kernels_python, "--cache-mode", mode, corpus=("--clause", "RB-REPLAY-13")
        )
    assert status == 0, report["cases"]
    assert _batch_outcomes(report) == dict.fromkeys(_vllm_batch_cases(), "passed")
    alone = {case["id"]: case for case in report["cases"] if case["id"] in _alone_cases()}
    assert {case_id: case["outcome"] for case_id, case in alone.items()} == dict.fromkeys(
        _alone_cases(), "passed"
    )
    # Bit for bit but the rerouted entries (a one-token prompt chunk beside
    # verifies, and what starts from it), which the two prompt cases hold and
    # the prefill case does not: there vLLM's batch is not its run alone.
    distances = {
        case_id.split("-vllm-bf16-")[1]: case["distance"] for case_id, case in alone.items()
    }
    assert distances.pop("first-verify-after-prefill") == 0
    assert all(0 < distance <= _ALONE_BOUND for distance in distances.values()), distances
    # Blocks of 4,096 tokens, or no blocks: no prefix is cached, so no hit is offered.
    hits = _prefix_hit_cases()
    skipped = {case["id"]: case["detail"] for case in report["cases"] if case["id"] in hits}
    unlisted = "not offered: the adapter's describe does not list batch form prefix-hits"
    assert skipped == dict.fromkeys(hits, unlisted)


@pytest.mark.parametrize("mode", [DEFAULT_MODE, "none"])
def test_the_off_by_one_control_fails_the_batch_cases_naming_the_clause(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, kernels_python: str, mode: str
) -> None:
    if mode == DEFAULT_MODE:
        status, report, shown = engines.control_run(tmp_path_factory, kernels_python, "vllm")
    else:
        flags = ("--cache-mode", mode, "--control", "off-by-one")
        status, report, shown = _run(tmp_path, kernels_python, *flags)
    assert status == 1
    assert _batch_outcomes(report) == dict.fromkeys(_vllm_batch_cases(), "failed")
    assert "FAIL  RB-REPLAY-12" in shown
    assert "reproduce: " in shown


@dataclass(frozen=True)
class _RealBug:
    """A real rollback bug, as docs/engines.md's table gives it."""

    shipped: str
    fixed: str
    #: The adapter's flags beside ``--version``: the cache mode, and the runner where it matters.
    flags: tuple[str, ...]
    smallest: str
    #: The fix is judged on every vllm-bf16 batch, or, where an older bug is
    #: still in the fixed release, on the smallest failing batch alone (a
    #: corpus of that one case, which also keeps the tier's cost down).
    every_batch: bool


#: Real rollback bugs: the vLLM release that shipped it, the release that fixed it.
REAL_BUGS: Final = {
    # vLLM #39273 / #52942: before 0.32.0 a decode with no drafts is a plain
    # decode, which reads the state in its first block, not its last accepted one's.
    "vllm-39273": _RealBug(
        "0.31.0",
        "0.32.0",
        ("--cache-mode", "none"),
        "014-vllm-bf16-plain-decodes-after-accepting-drafts",
        every_batch=True,
    ),
    # vLLM #48132: Model Runner V2 before 0.26.0 resets a batch row's accepted
    # count on add_request only in mode "align", so a request whose first step is
    # a verify starts from the last holder's count. 0.26.0 still has #39273's bug.
    "vllm-48132": _RealBug(
        "0.25.1",
        "0.26.0",
        ("--runner", "v2", "--cache-mode", "none"),
        "022-vllm-bf16-slot-taken-by-a-verify-after-drafts-accepted",
        every_batch=False,
    ),
}


@pytest.mark.parametrize("name", sorted(REAL_BUGS))
def test_the_release_that_shipped_a_real_bug_fails_and_the_fix_passes(
    tmp_path: Path, kernels_python: str, name: str
) -> None:
    bug = REAL_BUGS[name]
    # The release that shipped the bug is judged on its smallest failing
    # batch alone: one failure is the finding, and each batch costs the
    # interpreter's time.
    smallest = ("--vectors", str(engines.corpus_of(tmp_path, "batch.json", bug.smallest)))
    corpus = () if bug.every_batch else smallest
    shipped = ("--version", bug.shipped, *bug.flags)
    status, report, shown = _run(tmp_path, kernels_python, *shipped, corpus=smallest)
    outcomes = {case["id"]: case for case in report["cases"]}
    failing = outcomes[f"replay-batch-{bug.smallest}"]
    assert status == 1
    assert failing["outcome"] == "failed"
    # A state further from the model than the bound, not a refused request.
    assert "relative error" in failing["detail"]
    assert f"FAIL  replay-batch-{bug.smallest}  [RB-REPLAY-12]" in shown
    assert shlex.join(shipped) in shown.split("reproduce: ")[1]
    fixed = ("--version", bug.fixed, *bug.flags)
    status, report, _ = _run(tmp_path, kernels_python, *fixed, corpus=corpus)
    assert status == 0, report["cases"]
    passed = {case["id"] for case in report["cases"] if case["outcome"] == "passed"}
    assert passed == (_vllm_batch_cases() if bug.every_batch else {f"replay-batch-{bug.smallest}"})


#: The batch whose step 1 no row drafts in, right after a step whose rows accepted
#: drafts (s0 kept all 3 tokens of its window, s1 2 of its 4): each decodes 1 token.
_ZERO_DRAFT_BATCH: Final = "014-vllm-bf16-plain-decodes-after-accepting-drafts"


@pytest.mark.parametrize(
    ("version", "outcome"), [("0.31.0", "failed"), ("0.32.0", "passed"), ("0.33.0", "passed")]
)
def test_a_step_in_which_no_row_drafts_is_judged_through_the_runners_own_use_spec_decode(
    tmp_path: Path, kernels_python: str, version: str, outcome: str
) -> None:
    # vLLM #55504/#56531: the runner's own use_spec_decode (runner_code.py) decides
    # whether the builder gets the draft counts. 0.31.0's, from the scheduled drafts,
    # sends the step down the plain path, which reads block-table column 0; from
    # 0.32.0 every step of a speculative runner is speculative.
    case = next(
        case
        for case in json.loads(BATCHES.read_text(encoding="utf-8"))["cases"]
        if case["id"] == _ZERO_DRAFT_BATCH
    )
    before, step = case["steps"][0]["batch"], case["steps"][1]["batch"]
    assert [len(entry["rows"]) for entry in step] == [1, 1]
    assert max(entry["accepted"] for entry in before) == 3
    corpus = ("--vectors", str(engines.corpus_of(tmp_path, "batch.json", _ZERO_DRAFT_BATCH)))
    flags = ("--version", version, "--cache-mode", "none")
    status, report, _ = _run(tmp_path, kernels_python, *flags, corpus=corpus)
    judged = next(case for case in report["cases"] if case["id"].endswith(_ZERO_DRAFT_BATCH))
    assert judged["outcome"] == outcome, judged["detail"]
    assert status == (0 if outcome == "passed" else 1)
    if outcome == "passed":
        return
    # The first state off the model is one the step without drafts left.
    first = int(judged["detail"].removeprefix("states[").split("]")[0])
    assert len(before) <= first < len(before) + len(step), judged["detail"]
    assert "relative error" in judged["detail"]


def _describe(python: str, /, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        engines.argv(python, "vllm", *flags),
        input='{"op":"describe"}\n',
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_describe_names_the_release_version_asks_for(kernels_python: str) -> None:
    pinned = json.loads(_describe(kernels_python).stdout)["ok"]
    other = json.loads(_describe(kernels_python, "--version", "0.32.0").stdout)["ok"]
    assert pinned["release"] == "vllm==0.33.0"
    assert "unsupported" not in pinned["name"]
    assert other["release"] == "vllm==0.32.0"
    assert other["name"].endswith(", unsupported release")


def test_a_malformed_version_is_one_line(kernels_python: str) -> None:
    finished = _describe(kernels_python, "--version", "latest")
    assert finished.returncode == 2
    assert finished.stdout == ""
    assert finished.stderr == (
        "adapters.engines.vllm: --version 'latest' is not a release number such as 0.33.0\n"
    )


def _alone_cases() -> set[str]:
    cases = json.loads(ALONE.read_text("utf-8"))
    vllm = [case["id"] for case in cases["cases"] if case["pipeline"] == "vllm-bf16"]
    return {f"replay-alone-{case_id}" for case_id in vllm}


#: Blocks of 4 tokens in mode "align": every batch crosses blocks, so the runner's
#: pre-copy and post-copy (mamba_utils.py) move each state.
_ACROSS_BLOCKS: Final = ("--cache-mode", "align", "--block-size", "4")


def test_vllms_align_copies_keep_every_batch_right_across_blocks_of_4_tokens(
    tmp_path: Path, kernels_python: str
) -> None:
    # Blocks of 4 tokens: every batch crosses blocks, so the runner's pre-copy and
    # post-copy (mamba_utils.py) move each state; both judges must still pass.
    status, report, _ = engines.vectors_run(
        tmp_path / "report.json",
        kernels_python,
        "vllm",
        *_ACROSS_BLOCKS,
        clause="RB-REPLAY-12",
        corpus=("--clause", "RB-REPLAY-13"),
    )
    mine = _vllm_batch_cases() | _prefix_hit_cases() | _alone_cases()
    outcomes = {case["id"]: case["outcome"] for case in report["cases"] if case["id"] in mine}
    assert status == 0, report["cases"]
    assert _prefix_hit_cases()
    assert outcomes == dict.fromkeys(mine, "passed")


def test_blocks_smaller_than_any_request_need_v1s_align_copies(
    tmp_path: Path, kernels_python: str
) -> None:
    status, report, _ = _run(tmp_path, kernels_python, "--runner", "v2", "--block-size", "4")
    message = (
        "--block-size 4 needs vLLM's fused align copies"
        " (v1/worker/mamba_utils.py's MambaBuffers, from 0.33.0) and --runner v1"
    )
    details = [case["detail"] for case in report["cases"] if case["id"] in _vllm_batch_cases()]
    assert status == 1
    assert len(details) == len(_vllm_batch_cases())
    error = {"error": {"kind": "bad-request", "message": message}}
    reply = json.dumps(error, separators=(",", ":"))
    assert all(f"\nreplied {reply}\n" in detail for detail in details), details[0]


@pytest.mark.parametrize(
    "flags", [("--cache-mode", "none"), _ACROSS_BLOCKS], ids=["mode-none", "blocks-of-4"]
)
def test_checks_drawn_batches_pass_both_judges_in_mode_none_and_across_blocks(
    tmp_path: Path, kernels_python: str, flags: tuple[str, ...]
) -> None:
    # Beyond the shipped cases, where the tier's shared check run (mode "align",
    # blocks of 4,096) does not reach: check's drawn batches, with prompt chunks,
    # against the model's judge and vLLM's own, each sequence alone.
    status, report, shown = engines.check_run(
        tmp_path / "check.json", kernels_python, "vllm", *flags
    )
    outcomes = {row["property"]: row["outcome"] for row in report["properties"]}
    assert status == 0, shown
    assert outcomes == dict.fromkeys(engines.DRAWN_PROPERTIES, "passed")
