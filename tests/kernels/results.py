# SPDX-License-Identifier: MIT OR Apache-2.0
"""The engines' results page, docs/results.md, from the kernels tier's own reports.

Each engine adapter (adapters/engines/) is run through ``vectors run`` (the
replay corpus) and ``check`` (the replay properties); each run writes its
``--json`` report to build/results/kernels/, and ``ssm-rollback-spec report``
puts them on one page. ``python -m tests.kernels.results`` makes the kernels
venv, runs them all and rewrites the page; with ``--page-only`` it rewrites
the page from the reports a run of the tier left in build/results/kernels/.
``tests/kernels`` fails when the committed page is not what a fresh run's
reports give.

The page gives each passing replay clause's bound, not the distance
measured (``--bounds-only``): the kernels' float rounding may differ between
machines, and the committed page must not.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING, Any, Final

from tests.child import ROOT, run_module
from tests.kernels import engines
from tests.llamacpp import results as llamacpp_results
from tests.once import once_per_run

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

__all__ = [
    "ENGINES",
    "HEADER",
    "KINDS",
    "PAGE",
    "REPORTS",
    "page",
    "run_report",
    "shared_report",
    "with_other_tiers",
]

PAGE: Final = ROOT / "docs" / "results.md"
#: Where the tier writes its reports, for CI to keep and for the page.
REPORTS: Final = ROOT / "build" / "results" / "kernels"
#: What the committed page opens with, before ``report``'s own markdown.
HEADER: Final = (
    "<!-- SPDX-License-Identifier: MIT OR Apache-2.0 -->\n"
    "<!-- Generated from the kernels tier's reports: python -m tests.kernels.results -->\n"
)
#: The engine adapters on the page: every one the registry lists.
ENGINES: Final = tuple(sorted(engines.ENGINES))
#: Each run of an engine: its command's arguments (the adapter command is added).
KINDS: Final = {
    "vectors": ("vectors", "run", "--clause", "RB-REPLAY"),
    "check": ("check", "--clause", "RB-REPLAY", "--profile", "interpreter"),
}
# Where the llama.cpp tier's reports will go, beside these, when it exists:
# page() reads every report it is given, whatever implementation made it.


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
    """The markdown page of ``reports``, as docs/results.md holds it."""
    finished = run_module(
        "ssm_rollback_spec.tools.cli",
        "report",
        *map(str, reports),
        "--markdown",
        "-",
        "--spec-url",
        "../SPEC.md",
        "--bounds-only",
        timeout=120,
    )
    if finished.returncode != 0:
        raise RuntimeError(finished.stderr)
    return HEADER + finished.stdout


def with_other_tiers(fresh: str, /) -> str:
    """``fresh`` with the llama.cpp tier's column kept from the committed page.

    That column is the llamacpp tier's to write and check (tests/llamacpp/results.py).
    """
    committed = PAGE.read_text(encoding="utf-8")
    try:
        column = llamacpp_results.page_column(committed)
    except KeyError:
        return fresh
    return llamacpp_results.with_column(fresh, column)


def main(argv: list[str] | None = None) -> int:
    """Make the kernels venv, run every engine, and rewrite docs/results.md."""
    if (sys.argv[1:] if argv is None else argv) == ["--page-only"]:
        reports = [REPORTS / f"{engine}-{kind}.json" for engine in ENGINES for kind in KINDS]
        PAGE.write_text(with_other_tiers(page(reports)), encoding="utf-8")
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
    PAGE.write_text(with_other_tiers(page(reports)), encoding="utf-8")
    sys.stdout.write(f"{PAGE.relative_to(ROOT)}: {len(reports)} reports\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
