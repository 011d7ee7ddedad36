# SPDX-License-Identifier: MIT OR Apache-2.0
"""Results across implementations: the reports of ``check`` and ``vectors run`` on one page.

:mod:`.reports` reads the JSON reports, :mod:`.matrix` puts them side by side
(implementations by clauses), :mod:`.page` writes the page as markdown or
HTML, and :mod:`.badge` each implementation's badge. :mod:`.tier_report`
reads the reports the repository's test tiers write of their own tests,
and either kind of file, and :mod:`.engines_page` gives
docs/results.md, the tiers' reports on one page. Standard library only.
"""

from __future__ import annotations

from .badge import Badge, badge, badge_name, write_badges
from .matrix import Column, Matrix, MatrixCell, Standing, build_matrix
from .page import html_page, markdown_page
from .reports import WEB_ADDRESS, Known, Report, ReportError, Result, read_report
from .tier_report import TierReport, TierTest, read_reports, read_tier_report, tier_reports

__all__ = [
    "WEB_ADDRESS",
    "Badge",
    "Column",
    "Known",
    "Matrix",
    "MatrixCell",
    "Report",
    "ReportError",
    "Result",
    "Standing",
    "TierReport",
    "TierTest",
    "badge",
    "badge_name",
    "build_matrix",
    "html_page",
    "markdown_page",
    "read_report",
    "read_reports",
    "read_tier_report",
    "tier_reports",
    "write_badges",
]
