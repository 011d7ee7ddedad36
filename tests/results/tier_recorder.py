# SPDX-License-Identifier: MIT OR Apache-2.0
"""The pytest plugin that writes a tier's tier report (spec/results/tier_report.py).

Each test the tier's ``describe`` knows carries what it judges (the
implementation, the clauses, the finding its pass holds live) as a user
property, which xdist sends to the controller with each phase's report; the
controller, or the one process of a run without xdist, keeps its outcome
(failed if any phase failed, skipped with its reason if skipped) and, at the
session's end, writes the tier report to ``target``.

The results page is built from the tier report committed beside this module
(tests/results/tiers/): a run that judged every test that report holds and
gives another page fails the session, naming both files, so that the
committed page cannot drift from what the tier finds. A run of some of the
tests (``-k``, one file) writes its report and compares nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

import pytest

from ssm_rollback_spec import SPEC_VERSION
from ssm_rollback_spec.results.reports import ReportError
from ssm_rollback_spec.results.tier_report import FORMAT, read_tier_report, tier_reports

if TYPE_CHECKING:
    from collections.abc import Callable

    from ssm_rollback_spec.results.tier_report import TierReport, TierTest

__all__ = ["COMMITTED", "TierRecorder", "compare"]

#: Where the committed tier reports are, one per tier (TIER.json).
COMMITTED: Final = Path(__file__).resolve().parent / "tiers"
_PROPERTY: Final = "ssm-rollback-spec tier"


def compare(fresh: TierReport, committed: TierReport, /) -> str | None:
    """Why ``fresh`` does not give the page ``committed`` gives, or None when it does or is partial.

    A partial run (some of ``committed``'s tests not run) is not compared.
    """
    if {t["test"] for t in fresh["tests"]} < {t["test"] for t in committed["tests"]}:
        return None
    mine = sorted(fresh["tests"], key=lambda test: test["test"])
    theirs = sorted(committed["tests"], key=lambda test: test["test"])
    if tier_reports({**fresh, "tests": mine}) == tier_reports(
        {**committed, "tests": theirs, "spec_version": fresh["spec_version"]}
    ):
        return None
    changed = [test["test"] for test in mine if test not in theirs]
    changed += [test["test"] for test in theirs if test not in mine]
    return f"{len(changed)} tests differ, the first {changed[0] if changed else 'of none'}"


class TierRecorder:
    """Keeps the outcome of each test ``describe`` knows, and writes the tier report."""

    def __init__(
        self, tier: str, target: Path, describe: Callable[[pytest.Item], dict[str, Any] | None]
    ) -> None:
        self.tier = tier
        self.target = target
        self.describe = describe
        self.ran: dict[str, TierTest] = {}

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Carry what ``item`` judges to whichever process writes the report."""
        found = self.describe(item)
        if found is not None:
            item.user_properties.append((f"{_PROPERTY} {self.tier}", json.dumps(found)))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep each described test's outcome: failed if any phase failed, skipped if skipped."""
        for key, value in report.user_properties:
            if key != f"{_PROPERTY} {self.tier}":
                continue
            described = cast("TierTest", {**json.loads(str(value)), "outcome": "passed"})
            test = self.ran.setdefault(report.nodeid, described)
            if report.failed:
                test["outcome"] = "failed"
            elif report.skipped and test["outcome"] != "failed":
                test["outcome"] = "skipped"
                if isinstance(report.longrepr, tuple):
                    test["detail"] = str(report.longrepr[2]).removeprefix("Skipped: ")

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Write the tier report on the controller or alone; fail a whole run the page lacks."""
        if hasattr(session.config, "workerinput") or not self.ran:
            return
        # By node ID: xdist's controller collects nothing, so no run order is
        # the same with and without it.
        tests = [self.ran[nodeid] for nodeid in sorted(self.ran)]
        document: TierReport = {
            "format": FORMAT,
            "tier": self.tier,
            "spec_version": SPEC_VERSION,
            "tests": tests,
        }
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self.target.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        committed_path = COMMITTED / f"{self.tier}.json"
        try:
            committed = read_tier_report(committed_path)
        except ReportError as error:
            why: str | None = f"{committed_path}: {error}"
        else:
            why = compare(document, committed)
        if why is not None:
            reporter = session.config.pluginmanager.get_plugin("terminalreporter")
            message = (
                f"{self.target} is not {committed_path} ({why}): the results page is out of"
                f" date; copy the one over the other and run python -m tests.kernels.results"
                " --page-only"
            )
            if reporter is not None:
                reporter.write_line(message, red=True)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
