# SPDX-License-Identifier: MIT OR Apache-2.0
"""The engines' results page, docs/results.md, from the kernels tier's own reports.

Each engine adapter (adapters/engines/) is run through ``vectors run`` (the
replay corpus) and ``check`` (the replay properties); each run writes its
``--json`` report to build/results/kernels/, and ``ssm-rollback-spec report``
puts them on one page (spec/results/engines_page.py) beside the other
tiers'. ``python -m tests.kernels.results`` makes the kernels venv, runs them
all and rewrites the page; with ``--page-only`` it rewrites the page from the
reports runs left in build/results/ and the committed tier reports
(tests/results/tiers/). ``tests/kernels`` fails when the committed page's
engines are not what a fresh run's reports give.

The page gives each passing replay clause's bound, not the distance
measured (``--bounds-only``): the kernels' float rounding may differ between
machines, and the committed page must not.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING, Any, Final, TypedDict

from ssm_rollback_spec.results import read_report, read_tier_report, tier_reports
from ssm_rollback_spec.results.engines_page import parts, results_page, with_parts
from tests.child import ROOT, run_module
from tests.e2e import results as e2e_results
from tests.kernels import engines
from tests.llamacpp import results as llamacpp_results
from tests.once import once_per_run

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

    from ssm_rollback_spec.results import Report

__all__ = [
    "ENGINES",
    "KINDS",
    "OLDER",
    "PAGE",
    "REPORTS",
    "older_report",
    "page",
    "run_report",
    "shared_report",
    "with_other_tiers",
]

PAGE: Final = ROOT / "docs" / "results.md"
#: Where the tier writes its reports, for CI to keep and for the page.
REPORTS: Final = ROOT / "build" / "results" / "kernels"
#: The engine adapters on the page: every one the registry lists.
ENGINES: Final = tuple(sorted(engines.ENGINES))
#: Each run of an engine: its command's arguments (the adapter command is added).
KINDS: Final = {
    "vectors": ("vectors", "run", "--clause", "RB-REPLAY"),
    "check": ("check", "--clause", "RB-REPLAY", "--profile", "interpreter"),
}


class _Older(TypedDict):
    """A vLLM release of docs/engines.md's real-bugs table that fails its batch, on the page."""

    #: tests/kernels/test_vllm_batch.py's REAL_BUGS name, which gives the release and flags.
    bug: str
    #: Where vLLM's tracker has it (docs/engines.md's row names the number).
    link: str
    reason: str


#: The older releases on the page, each judged on the one batch its real bug fails
#: (``vectors run`` with its deviation entry, so the failure is "fails, known, linked").
OLDER: Final[tuple[_Older, ...]] = (
    {
        "bug": "vllm-39273",
        "link": "https://github.com/vllm-project/vllm/issues/39273",
        "reason": (
            "vLLM #39273 / #52942: before 0.32.0 a step with no drafts after a multi-accept"
            " reads block-table column 0 in mode none (fixed in 0.32.0)"
        ),
    },
    {
        "bug": "vllm-48132",
        "link": "https://github.com/vllm-project/vllm/issues/48132",
        "reason": (
            "vLLM #48132: Model Runner V2 resets a row's accepted count on add_request only in"
            " mode align (fixed in 0.26.0)"
        ),
    },
)


def _one_case_corpus(folder: Path, case_id: str, /) -> Path:
    """A copy of the shipped corpus whose batch file holds case ``case_id`` alone."""
    corpus = folder / "vectors"
    shutil.rmtree(corpus, ignore_errors=True)
    shutil.copytree(ROOT / "vectors", corpus)
    batch = corpus / "replay" / "batch.json"
    document = json.loads(batch.read_text(encoding="utf-8"))
    document["cases"] = [case for case in document["cases"] if case["id"] == case_id]
    batch.write_text(json.dumps(document), encoding="utf-8")
    manifest_path = corpus / "replay" / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    for entry in manifest["files"]:
        if entry["path"] == "batch.json":
            entry["cases"] = len(document["cases"])
            entry["sha256"] = hashlib.sha256(batch.read_bytes()).hexdigest()
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    return corpus


def older_report(python: str, older: _Older, /, *, fixed: bool = False) -> tuple[int, Path]:
    """``older``'s release over its one failing batch, with its deviation entry; status, report.

    With ``fixed``, the release that fixed the bug, over the same batch with no
    entry: the page shows the pair, the failure and the fix, side by side.
    """
    from tests.kernels.test_vllm_batch import REAL_BUGS  # noqa: PLC0415 - a test module

    bug = REAL_BUGS[older["bug"]]
    release = bug.fixed if fixed else bug.shipped
    REPORTS.mkdir(parents=True, exist_ok=True)
    name = f"vllm-{release}-vectors"
    report = REPORTS / f"{name}.json"
    report.unlink(missing_ok=True)
    scratch = REPORTS / f"{name}-inputs"
    scratch.mkdir(exist_ok=True)
    corpus = _one_case_corpus(scratch, bug.smallest)
    entries = (
        []
        if fixed
        else [
            {
                "case": f"replay-batch-{bug.smallest}",
                "reason": older["reason"],
                "link": older["link"],
            }
        ]
    )
    deviations = scratch / "deviations.json"
    deviations.write_text(json.dumps({"deviations": entries}), encoding="utf-8")
    adapter = engines.command(python, "vllm", "--version", release, *bug.flags)
    finished = run_module(
        "ssm_rollback_spec.tools.cli",
        *("vectors", "run", "--impl-cmd", adapter, "--vectors", str(corpus)),
        *("--clause", "RB-REPLAY-12", "--deviations", str(deviations)),
        *("--impl-timeout", "900", "--json", str(report)),
        timeout=1800,
    )
    if "Traceback" in finished.stdout + finished.stderr or not report.exists():
        message = f"vllm {release}: no report\n{finished.stderr[-3000:]}"
        raise RuntimeError(message)
    return finished.returncode, report


def run_report(python: str, engine: str, kind: str, /) -> tuple[int, Path]:
    """Run ``kind`` over ``engine``'s adapter in the kernels venv; its exit status and report."""
    REPORTS.mkdir(parents=True, exist_ok=True)
    report = REPORTS / f"{engine}-{kind}.json"
    report.unlink(missing_ok=True)
    adapter = engines.command(python, engine)
    # A first replay imports torch and interprets the kernels: seconds, not the default 10.
    finished = run_module(
        "ssm_rollback_spec.tools.cli",
        *KINDS[kind],
        "--impl-cmd",
        adapter,
        "--impl-timeout",
        "600",
        "--json",
        str(report),
        timeout=1800,
    )
    if "Traceback" in finished.stdout + finished.stderr or not report.exists():
        message = f"{engine} {kind}: no report\n{finished.stderr[-3000:]}"
        raise RuntimeError(message)
    return finished.returncode, report


def shared_report(
    tmp_path_factory: pytest.TempPathFactory, python: str, engine: str, kind: str, /
) -> tuple[int, dict[str, Any]]:
    """The page's run of ``kind`` over ``engine``: made once a run, by whichever test asks first.

    Its report is in build/results/kernels/, which the results page is built
    from; every test that judges the same run reads it, so the tier runs it once.
    """

    def make(folder: Path, /) -> None:
        status, _ = run_report(python, engine, kind)
        (folder / "status").write_text(str(status), encoding="utf-8")

    folder = once_per_run(tmp_path_factory, f"results-{engine}-{kind}", make)
    report = REPORTS / f"{engine}-{kind}.json"
    status = int((folder / "status").read_text(encoding="utf-8"))
    return status, json.loads(report.read_text(encoding="utf-8"))


def page(reports: list[Path], /) -> str:
    """The page of the kernels tier's ``reports`` alone, as docs/results.md holds a page."""
    return results_page([read_report(path) for path in reports])


def with_other_tiers(fresh: str, /) -> str:
    """``fresh`` with each implementation of the committed page that ``fresh`` lacks.

    Those are the other runs': the llama.cpp and e2e tiers' (theirs to write and
    check: tests/llamacpp/results.py, tests/results/tier_recorder.py) and the
    older vLLM releases' (:data:`OLDER`, which ``python -m tests.kernels.results``
    runs and the tier's batch tests judge), each where it sorts.
    """
    made = {found.heading for found in parts(fresh)}
    committed = PAGE.read_text(encoding="utf-8")
    return with_parts(fresh, [found for found in parts(committed) if found.heading not in made])


def _older_releases() -> list[str]:
    """Each real bug's release that shipped it, then the one that fixed it."""
    from tests.kernels.test_vllm_batch import REAL_BUGS  # noqa: PLC0415 - a test module

    bugs = [REAL_BUGS[older["bug"]] for older in OLDER]
    return [*(bug.shipped for bug in bugs), *(bug.fixed for bug in bugs)]


def _tiers() -> list[Report]:
    """The other tiers' reports the page reads: llama.cpp's ggml report, the tier reports."""
    found = [read_report(llamacpp_results.REPORT)] if llamacpp_results.REPORT.exists() else []
    for tier in (llamacpp_results.COMMITTED_REPORT, e2e_results.COMMITTED_REPORT):
        found += tier_reports(read_tier_report(tier))
    return found


def main(argv: list[str] | None = None) -> int:
    """Make the kernels venv, run every engine and older release, and rewrite docs/results.md.

    With ``--page-only``, the page is rebuilt from the reports a run left in
    build/results/ and the committed tier reports (tests/results/tiers/), each
    other implementation kept from the committed page.
    """
    if (sys.argv[1:] if argv is None else argv) == ["--page-only"]:
        reports = [REPORTS / f"{engine}-{kind}.json" for engine in ENGINES for kind in KINDS]
        reports += [REPORTS / f"vllm-{release}-vectors.json" for release in _older_releases()]
        read = [read_report(path) for path in reports if path.exists()]
        PAGE.write_text(with_other_tiers(results_page([*read, *_tiers()])), encoding="utf-8")
        return 0
    made = subprocess.run(
        [sys.executable, "-m", "adapters.engines.environment"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if made.returncode != 0:
        sys.stderr.write(made.stderr.strip() + "\n")
        return 1
    python = made.stdout.strip()
    reports = [run_report(python, engine, kind)[1] for engine in ENGINES for kind in KINDS]
    reports += [older_report(python, older)[1] for older in OLDER]
    reports += [older_report(python, older, fixed=True)[1] for older in OLDER]
    read = [read_report(path) for path in reports]
    PAGE.write_text(with_other_tiers(results_page([*read, *_tiers()])), encoding="utf-8")
    sys.stdout.write(f"{PAGE.relative_to(ROOT)}: {len(reports)} reports and the tiers'\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
