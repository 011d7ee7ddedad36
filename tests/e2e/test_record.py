# SPDX-License-Identifier: MIT OR Apache-2.0
"""The e2e tier writes its record's report beside the other tiers' (tests/e2e/results.py).

The tier's tests write no report; .ci/run's report step builds the HTML page
and the badges from build/results/, so the tier leaves its record there as a
``check --json`` report, which ``report`` must read as the committed page's
column of it.
"""

from __future__ import annotations

import pytest

from ssm_rollback_spec.results import read_report

from . import results

__all__: list[str] = []

pytestmark = pytest.mark.e2e


def test_the_tier_leaves_its_record_as_a_report_of_its_column() -> None:
    written = results.write_record_report()
    assert written == results.REPORT
    report = read_report(written)
    assert (report.name, report.release) == (results.NAME, results.RELEASE)
    outcomes = [(r.name, r.outcome) for r in report.results]
    assert outcomes == [(f["test"], f["outcome"]) for f in results.RECORD]
