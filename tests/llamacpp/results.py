# SPDX-License-Identifier: MIT OR Apache-2.0
"""The llama.cpp tier's reports, and its column of the results page, docs/results.md.

The tier runs ``vectors run`` (the replay corpus) over the ggml adapter
(adapters/llama-cpp/ggml_adapter.py) and writes the ``--json`` report to
build/results/llama.cpp/, which the page reads beside the kernels tier's
(tests/kernels/results.py). The page gives each passing clause's bound, not
the distance (``--bounds-only``), and a report holds no timing, so the
column is the same on any machine.

llama.cpp's model-level clause (RB-REPLAY-14) is judged by the tier's own
pytest tests through ``llama.h`` (tests/llamacpp/test_rollback.py), which
write no report: its cells come from :data:`RECORD`, a static record of what
those tests find, which tests/results/test_results.py holds to the tests'
own names, calls and links. The page says so in the column's "Reports" line.
The generator runs no engine for it.

llama.cpp v0.5.0 as node-llama-cpp 3.22.1 ships it, prebuilt, is a column of
its own (:data:`PREBUILT_NAME`): its one cell, RB-REPLAY-14, comes from
:data:`PREBUILT_RECORD` (tests/llamacpp/test_prebuilt.py) and the v0.5.0
entries of :data:`ARCHITECTURES_RECORD`. The ten other architectures
tests/llamacpp/test_architectures.py judges are no columns: each build's
RB-REPLAY-14 cell carries their findings, and the sdist column's section
ends in a small table, one row per architecture (:data:`ARCHITECTURES`), one
column per build and way, so that the page keeps one column per build.

The page's columns are sorted by name and release, each one implementation's
alone, its reasons footnoted in its own section, so the tier checks its own
column (its cells, totals and section) against what its report gives,
whatever the other columns are; :func:`with_column` moves a column in and
puts each family's failing clauses first again, as the page is written.
``python -m tests.llamacpp.results`` runs the report and writes the column
into the committed page (``--page-only``: from the report a run left).

The records are no run's report, but ``ssm-rollback-spec report`` reads only
reports, so the tier also writes each record column as one ``--json`` report
of ``check`` beside the ggml report (:func:`write_record_reports`), for the
HTML page and badges .ci/run's report step builds from build/results/. What
that format cannot say is said as closely as it can: its "Reports" line names
a ``check`` report, whose profile says it is this record and not a run; the
sdist column keeps the ggml adapter's describe name (``report`` cannot
rename a column, so the record joins the ggml report's); a deviation entry
links llama.cpp's report where there is one (a report's link must be a web
address, and the finding pages have none) and names its finding page in its
reason; and the architectures' table has no place there, its findings being
the RB-REPLAY-14 cell's entries.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Final, NotRequired, TypedDict

from ssm_rollback_spec import SPEC_VERSION
from ssm_rollback_spec.harness.clauses import CLAUSES
from ssm_rollback_spec.releases import LLAMA_CPP, LLAMA_CPP_COMMIT
from ssm_rollback_spec.results import (
    WEB_ADDRESS,
    Known,
    Report,
    Result,
    build_matrix,
    markdown_page,
    read_report,
)
from ssm_rollback_spec.results.matrix import FAILING
from ssm_rollback_spec.tools.outcomes import LABELS, OUTCOMES, Row, clause_summary, counts
from tests.child import ROOT, run_module

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

__all__ = [
    "ADAPTER",
    "ARCHITECTURES",
    "ARCHITECTURES_RECORD",
    "ARCHITECTURES_TITLE",
    "GGML_NAME",
    "NAME",
    "NAMES",
    "PREBUILT_COMMAND",
    "PREBUILT_NAME",
    "PREBUILT_RECORD",
    "PREBUILT_RECORD_REPORT",
    "PREBUILT_RELEASE",
    "RECORD",
    "RECORD_COMMAND",
    "RECORD_REPORT",
    "RECORD_REPORTS",
    "RELEASE",
    "REPORT",
    "REPORTS",
    "Architecture",
    "Column",
    "Finding",
    "RecordDocument",
    "architectures_table",
    "beside",
    "column",
    "columns",
    "markdown",
    "on_v050",
    "page_column",
    "prebuilt_column",
    "prebuilt_report",
    "record_document",
    "record_document_of",
    "record_profile",
    "record_report",
    "record_report_of",
    "render",
    "run_report",
    "with_column",
    "with_record",
    "without_column",
    "write_record_reports",
]

ADAPTER: Final = ROOT / "adapters" / "llama-cpp" / "ggml_adapter.py"
#: Where the tier writes its reports, beside build/results/kernels/.
REPORTS: Final = ROOT / "build" / "results" / "llama.cpp"
REPORT: Final = REPORTS / "ggml-vectors.json"
_PAGE: Final = ROOT / "docs" / "results.md"
_IMPLEMENTATIONS: Final = "## Implementations\n"
_SEPARATOR: Final = re.compile(r"(?<!\\)\|")
_CLAUSE_ROW: Final = re.compile(r"\[(RB-[A-Z]+-\d+)\]")

#: The ggml adapter's describe name.
GGML_NAME: Final = "llama.cpp ggml kernels (adapters/llama-cpp)"
#: The release the tier builds, as the ggml adapter's describe states it.
RELEASE: Final = f"{LLAMA_CPP.distribution}=={LLAMA_CPP.version} (llama.cpp {LLAMA_CPP_COMMIT})"
#: llama.cpp's column on the page: its ggml kernels' report and the tier's record, together.
NAME: Final = "llama.cpp: ggml kernels (adapters/llama-cpp) and llama.h (tests/llamacpp)"
#: How the page's "Reports" line names the record.
RECORD_COMMAND: Final = (
    "the llama.cpp tier's record of its llama.h tests (tests/llamacpp/results.py), not a run"
)
#: llama.cpp v0.5.0's column: the adapter built against its llama.h, linked with
#: node-llama-cpp's prebuilt libraries (adapters/llama-cpp/prebuilt.py).
PREBUILT_NAME: Final = "llama.cpp: llama.h, prebuilt (tests/llamacpp)"
#: The package and the llama.cpp release its libraries are built from.
PREBUILT_RELEASE: Final = "node-llama-cpp==3.22.1 (llama.cpp v0.5.0)"
#: How the prebuilt column's "Reports" line names its record.
PREBUILT_COMMAND: Final = (
    "the llama.cpp tier's record of its tests of the prebuilt release"
    " (tests/llamacpp/results.py), not a run"
)
#: Every column this tier gives the page.
NAMES: Final = (NAME, PREBUILT_NAME)
#: The records' columns as --json reports beside the ggml report, for ``report``
#: over build/results/ (.ci/run): the sdist build's llama.h record, and the prebuilt one's.
RECORD_REPORT: Final = REPORTS / "llama-h-record.json"
PREBUILT_RECORD_REPORT: Final = REPORTS / "llama-h-prebuilt-record.json"
#: Both, in the order of :data:`NAMES`.
RECORD_REPORTS: Final = (RECORD_REPORT, PREBUILT_RECORD_REPORT)


class Finding(TypedDict):
    """One test of tests/llamacpp/test_rollback.py, as the record gives its result."""

    #: ``test_rollback.py::NAME[ID]``, the test as pytest names it.
    test: str
    outcome: str
    detail: str
    #: A deviation's finding page, under docs/ (relative to docs/results.md), and its
    #: llama.cpp report; empty for a pass.
    page: str
    link: str


#: What the tier's model-level tests find in llama.cpp 0c1e57098 (RB-REPLAY-14: a
#: rolled-back sequence's kept tokens have the logits of decoding them plainly).
RECORD: Final[tuple[Finding, ...]] = (
    {
        "test": (
            "test_rollback.py::test_checkpoint_rollback"
            "_keeps_the_logits_of_decoding_only_the_kept_tokens"
        ),
        "outcome": "passed",
        "detail": "Qwen3.5, checkpoint way, several sequences in one llama_decode",
        "page": "",
        "link": "",
    },
    {
        "test": (
            "test_rollback.py::test_qwen3_next_checkpoint_rollback"
            "_keeps_the_logits_of_decoding_only_the_kept_tokens"
        ),
        "outcome": "passed",
        "detail": "Qwen3-Next, checkpoint way (it has no snapshots in llama.cpp)",
        "page": "",
        "link": "",
    },
    {
        "test": (
            "test_rollback.py::test_snapshot_rollback_of_one_sequence"
            "_keeps_the_logits_of_decoding_only_the_kept_tokens"
        ),
        "outcome": "passed",
        "detail": "Qwen3.5, snapshot way, one sequence, within its last window",
        "page": "",
        "link": "",
    },
    {
        "test": (
            "test_rollback.py::test_snapshot_rollback"
            "_is_a_deviation_of_the_released_llama_cpp[beside_other_sequences]"
        ),
        "outcome": "deviation",
        "detail": (
            "snapshot rollback beside other sequences: llama_memory_seq_rm accepts it, and the"
            " kept tokens' logits are not plain decoding's (find_slot reorders the cells, the"
            " snapshot planes stay put); no report found in llama.cpp's tracker, the closest"
            " open one linked"
        ),
        "page": "findings/llamacpp-snapshot-beside-other-sequences.md",
        "link": "https://github.com/ggml-org/llama.cpp/issues/28019",
    },
    {
        "test": (
            "test_rollback.py::test_snapshot_rollback"
            "_is_a_deviation_of_the_released_llama_cpp[whole_window]"
        ),
        "outcome": "deviation",
        "detail": (
            "snapshot rollback of a whole window: llama_memory_seq_rm accepts it and restores a"
            " plane the last decode did not write (src/models/delta-net-base.cpp 587-603);"
            " llama.cpp's report is closed, its fix not merged at 0c1e57098"
        ),
        "page": "findings/llamacpp-snapshot-whole-window.md",
        "link": "https://github.com/ggml-org/llama.cpp/issues/26695",
    },
)

#: What tests/llamacpp/test_prebuilt.py finds in llama.cpp v0.5.0 as node-llama-cpp
#: 3.22.1 ships it prebuilt (Qwen3.5, the sdist build's model), in the package's
#: baseline CPU variant and the one ggml picks on the host.
PREBUILT_RECORD: Final[tuple[Finding, ...]] = (
    {
        "test": (
            "test_prebuilt.py::test_checkpoint_rollback_of_the_prebuilt_release"
            "_keeps_the_logits_of_plain_decoding"
        ),
        "outcome": "passed",
        "detail": (
            "Qwen3.5, checkpoint way, several sequences, both CPU variants (bound 0 baseline,"
            " 1e-3 native); the failures of random thorough runs were the machine's, fixed"
            " (docs/engines.md)"
        ),
        "page": "",
        "link": "",
    },
    {
        "test": (
            "test_prebuilt.py::test_both_snapshot_findings_are_live_in_the_prebuilt_release"
            "[beside_other_sequences]"
        ),
        "outcome": "deviation",
        "detail": (
            "snapshot rollback beside other sequences, both CPU variants: 1.74e-2 off while"
            " the checkpoint way on the same calls is within its bound; live in v0.5.0 as in"
            " 0c1e57098"
        ),
        "page": "findings/llamacpp-snapshot-beside-other-sequences.md",
        "link": "https://github.com/ggml-org/llama.cpp/issues/28019",
    },
    {
        "test": (
            "test_prebuilt.py::test_both_snapshot_findings_are_live_in_the_prebuilt_release"
            "[whole_window]"
        ),
        "outcome": "deviation",
        "detail": (
            "snapshot rollback of a whole window, both CPU variants: 5.28e-3 off while the"
            " checkpoint way on the same calls is within its bound; live in v0.5.0 as in"
            " 0c1e57098"
        ),
        "page": "findings/llamacpp-snapshot-whole-window.md",
        "link": "https://github.com/ggml-org/llama.cpp/issues/26695",
    },
)

#: What tests/llamacpp/test_architectures.py finds on the ten other architectures
#: llm_arch_supports_rs_rollback lists (make-model's, from llama.cpp's own test
#: generator): its tests of 0c1e57098, then those of v0.5.0 (:func:`on_v050`). Each
#: build's RB-REPLAY-14 cell carries its entries; :data:`ARCHITECTURES` gives them
#: by architecture. Each deviation links its finding page under docs/findings/.
ARCHITECTURES_RECORD: Final[tuple[Finding, ...]] = (
    {
        "test": (
            "test_architectures.py::test_checkpoint_rollback"
            "_keeps_the_logits_of_plain_decoding_on_every_architecture"
        ),
        "outcome": "passed",
        "detail": "ten architectures, checkpoint way, several sequences, whole windows",
        "page": "",
        "link": "",
    },
    {
        "test": (
            "test_architectures.py::test_snapshot_rollback_of_one_sequence"
            "_keeps_the_logits_of_plain_decoding_on_every_architecture"
        ),
        "outcome": "passed",
        "detail": "ten architectures, snapshot way, one sequence, within its last window",
        "page": "",
        "link": "",
    },
    {
        "test": (
            "test_architectures.py::test_each_snapshot_case_fails_on_the_architectures"
            "_it_names_and_no_other[beside_other_sequences]"
        ),
        "outcome": "deviation",
        "detail": (
            "the several-sequences finding on all nine recurrent architectures (GDN, KDA,"
            " Mamba-2, short convolutions); DeepSeek-V4 exact"
        ),
        "page": "findings/llamacpp-snapshot-beside-other-sequences.md",
        "link": "https://github.com/ggml-org/llama.cpp/issues/28019",
    },
    {
        "test": (
            "test_architectures.py::test_each_snapshot_case_fails_on_the_architectures"
            "_it_names_and_no_other[whole_window]"
        ),
        "outcome": "deviation",
        "detail": (
            "the whole-window finding on all nine recurrent architectures: each family's"
            " snapshot writer leaves planes past its window unwritten; DeepSeek-V4 exact"
        ),
        "page": "findings/llamacpp-snapshot-whole-window.md",
        "link": "https://github.com/ggml-org/llama.cpp/issues/26695",
    },
    {
        "test": (
            "test_architectures.py::test_each_snapshot_case_fails_on_the_architectures"
            "_it_names_and_no_other[past_the_window]"
        ),
        "outcome": "deviation",
        "detail": (
            "DeepSeek-V4, snapshot rollback past the last decode: llama_memory_seq_rm accepts"
            " it and restores the state before that decode, whose compressor ring"
            " (2 x 4 rows by position) a later position has overwritten"
            " (src/llama-kv-cache-dsv4.cpp 518-541, 694, 1315)"
        ),
        "page": "findings/llamacpp-dsv4-rollback-past-the-last-decode.md",
        "link": "no report found",
    },
    {
        "test": (
            "test_architectures.py::test_v050_keeps_its_snapshots_for_every_architecture"
            "_it_lists_and_lacks_glm5_next"
        ),
        "outcome": "passed",
        "detail": (
            "v0.5.0 keeps 4 snapshots for the nine it lists besides Qwen3.5; its loader"
            " refuses GLM-5-Next by name"
        ),
        "page": "",
        "link": "",
    },
    {
        "test": (
            "test_architectures.py::test_v050s_drawn_rounds_keep_the_logits"
            "_of_plain_decoding_on_every_architecture"
        ),
        "outcome": "passed",
        "detail": (
            "drawn rounds both ways on the nine, a tenth of the profile's examples"
            " (at least 6): every kept token's logits those of plain decoding, bit for bit"
        ),
        "page": "",
        "link": "",
    },
    {
        "test": (
            "test_architectures.py::test_each_snapshot_case_fails_on_v050_as_on_0c1e57098"
            "[beside_other_sequences]"
        ),
        "outcome": "deviation",
        "detail": (
            "v0.5.0, baseline CPU variant: the several-sequences finding on the eight"
            " recurrent architectures it lists; DeepSeek-V4 exact, the checkpoint way exact"
        ),
        "page": "findings/llamacpp-snapshot-beside-other-sequences.md",
        "link": "https://github.com/ggml-org/llama.cpp/issues/28019",
    },
    {
        "test": (
            "test_architectures.py::test_each_snapshot_case_fails_on_v050_as_on_0c1e57098"
            "[whole_window]"
        ),
        "outcome": "deviation",
        "detail": (
            "v0.5.0, baseline CPU variant: the whole-window finding on the eight recurrent"
            " architectures it lists; DeepSeek-V4 exact, the checkpoint way exact"
        ),
        "page": "findings/llamacpp-snapshot-whole-window.md",
        "link": "https://github.com/ggml-org/llama.cpp/issues/26695",
    },
    {
        "test": (
            "test_architectures.py::test_each_snapshot_case_fails_on_v050_as_on_0c1e57098"
            "[past_the_window]"
        ),
        "outcome": "deviation",
        "detail": (
            "v0.5.0, baseline CPU variant: DeepSeek-V4's rollback past the last decode, as"
            " on 0c1e57098, and the recurrent eight it lists by the whole-window mechanism"
        ),
        "page": "findings/llamacpp-dsv4-rollback-past-the-last-decode.md",
        "link": "no report found",
    },
)


class Architecture(TypedDict):
    """One architecture of tests/llamacpp/test_architectures.py, as the page's table gives it."""

    #: llama.cpp's name of it (the module's ``Generated`` value).
    arch: str
    #: What rolls back in it.
    state: str
    #: Whether llama.cpp v0.5.0 lists it (``IN_V050``).
    v050: bool
    #: The snapshot cases (``CASES``) that fail on it, on each build that lists it.
    fails: tuple[str, ...]


#: The snapshot cases every recurrent architecture fails.
_RECURRENT_FAILS: Final = ("beside_other_sequences", "whole_window", "past_the_window")

#: The ten architectures, in the module's order (tests/results/test_results.py holds
#: the table to its ``Generated``, ``IN_V050`` and ``CASES``).
ARCHITECTURES: Final[tuple[Architecture, ...]] = (
    {"arch": "kimi-k3", "state": "KDA", "v050": True, "fails": _RECURRENT_FAILS},
    {"arch": "qwen35moe", "state": "Gated DeltaNet", "v050": True, "fails": _RECURRENT_FAILS},
    {"arch": "qwen4exp", "state": "Gated DeltaNet", "v050": True, "fails": _RECURRENT_FAILS},
    {
        "arch": "deepseek4",
        "state": "compressor rings (no recurrent layer)",
        "v050": True,
        "fails": ("past_the_window",),
    },
    {"arch": "glm5-next", "state": "KDA", "v050": False, "fails": _RECURRENT_FAILS},
    {"arch": "nemotron_h", "state": "Mamba-2", "v050": True, "fails": _RECURRENT_FAILS},
    {
        "arch": "nemotron_h_moe",
        "state": "Mamba-2 (written dense)",
        "v050": True,
        "fails": _RECURRENT_FAILS,
    },
    {"arch": "lfm2", "state": "short convolutions", "v050": True, "fails": _RECURRENT_FAILS},
    {"arch": "lfm2moe", "state": "short convolutions", "v050": True, "fails": _RECURRENT_FAILS},
    {
        "arch": "bailingmoe3",
        "state": "linear attention (delta-net helper)",
        "v050": True,
        "fails": _RECURRENT_FAILS,
    },
)
#: The caption of the architectures' table, in the sdist column's section.
ARCHITECTURES_TITLE: Final = (
    "**RB-REPLAY-14 by architecture** (`tests/llamacpp/test_architectures.py`)"
)

#: The model-level clause the record gives.
_MODEL_CLAUSE: Final = "RB-REPLAY-14"
#: Whose report a deviation's link is.
_ENGINE: Final = "llama.cpp"


def on_v050(finding: Finding, /) -> bool:
    """Whether ``finding`` is of a v0.5.0 test: test_architectures.py names those ``v050``."""
    return "v050" in finding["test"].partition("[")[0]


def _known(finding: Finding, engine: str, /) -> Known:
    """A deviation's entry on the page: the test, why, and its finding page."""
    return Known(
        f"property {finding['test']}",
        f"{finding['detail']}; {engine}: {finding['link'] or 'no report found'}",
        finding["page"],
    )


def record_report_of(
    name: str, release: str, command: str, findings: Sequence[Finding], engine: str, /
) -> Report:
    """``findings`` of a tier's record as one report of a column, on RB-REPLAY-14.

    A deviation's entry links to its finding page; its reason names the
    ``engine``'s own report (which GitHub's markdown links), or says none was
    found. The e2e tier's record (tests/e2e/results.py) is made here too.
    """
    results = tuple(
        Result(
            name=finding["test"],
            clauses=(_MODEL_CLAUSE,),
            outcome=finding["outcome"],
            detail=finding["detail"],
            known=_known(finding, engine) if finding["outcome"] == "deviation" else None,
        )
        for finding in findings
    )
    return Report(name, release, command, SPEC_VERSION, results, ())


def _sdist_findings() -> list[Finding]:
    """:data:`RECORD` and the architectures' 0c1e57098 entries."""
    return [*RECORD, *(f for f in ARCHITECTURES_RECORD if not on_v050(f))]


def _prebuilt_findings() -> list[Finding]:
    """:data:`PREBUILT_RECORD` and the architectures' v0.5.0 entries."""
    return [*PREBUILT_RECORD, *(f for f in ARCHITECTURES_RECORD if on_v050(f))]


def record_report() -> Report:
    """:data:`RECORD` and the architectures' 0c1e57098 entries: llama.cpp's column's report."""
    return record_report_of(NAME, RELEASE, RECORD_COMMAND, _sdist_findings(), _ENGINE)


def prebuilt_report() -> Report:
    """:data:`PREBUILT_RECORD` and the architectures' v0.5.0 entries, as the prebuilt column's."""
    return record_report_of(
        PREBUILT_NAME, PREBUILT_RELEASE, PREBUILT_COMMAND, _prebuilt_findings(), _ENGINE
    )


class _Entry(TypedDict):
    """A deviation entry as a ``--json`` report keeps it (``Deviation.record``)."""

    entry: str
    reason: str
    link: str


class _Property(TypedDict):
    """One property of a ``check --json`` report."""

    property: str
    clauses: list[str]
    outcome: str
    detail: str
    #: A record has no time.
    seconds: None
    known: NotRequired[_Entry]


class _Described(TypedDict):
    """The part of a ``describe`` reply the page reads."""

    name: str
    release: str


class RecordDocument(TypedDict):
    """A record column as a ``check --json`` report: the keys ``check`` writes, and no time."""

    implementation: str
    profile: str
    spec_version: str
    describe: _Described
    properties: list[_Property]
    clauses: dict[str, str]
    failed: list[str]
    conforming_deviations: list[str]
    conforming: list[_Entry]
    counts: dict[str, int]
    exported: list[str]


def record_profile(command: str, /) -> str:
    """The profile a record's report states, so that ``report`` names it ``check (profile ...)``."""
    return f"none: {command}"


#: The command ``report`` names each record's report by (``check (profile ...)``).
_RECORD_COMMANDS: Final = frozenset(
    f"check (profile {record_profile(command)})" for command in (RECORD_COMMAND, PREBUILT_COMMAND)
)


def _entry(finding: Finding, engine: str, /) -> _Entry:
    """A deviation's entry in a report: llama.cpp's report as its link, its page in its reason.

    A report's link must be a web address (``WEB_ADDRESS``), and the finding
    pages have none; a finding llama.cpp has no report of is not linked.
    """
    known = _known(finding, engine)
    link = finding["link"] if WEB_ADDRESS.fullmatch(finding["link"]) else ""
    return {
        "entry": known.entry,
        "reason": f"{known.reason}; its page: docs/{finding['page']}",
        "link": link,
    }


def _property(finding: Finding, engine: str, /) -> _Property:
    found: _Property = {
        "property": finding["test"],
        "clauses": [_MODEL_CLAUSE],
        "outcome": finding["outcome"],
        "detail": finding["detail"],
        "seconds": None,
    }
    if finding["outcome"] == "deviation":
        found["known"] = _entry(finding, engine)
    return found


def record_document(name: str, /) -> RecordDocument:
    """The column of :data:`NAMES` named ``name`` as a ``check --json`` report, for ``report``.

    The sdist column's report is of the ggml adapter's name (:data:`GGML_NAME`),
    so that ``report`` puts it in the ggml report's column, as the page does.

    Raises:
        KeyError: ``name`` is not a record column's.
    """
    release, command, findings = {
        NAME: (RELEASE, RECORD_COMMAND, _sdist_findings()),
        PREBUILT_NAME: (PREBUILT_RELEASE, PREBUILT_COMMAND, _prebuilt_findings()),
    }[name]
    described = GGML_NAME if name == NAME else name
    record = "tests/llamacpp/results.py"
    return record_document_of(described, release, command, findings, _ENGINE, record)


def record_document_of(
    name: str,
    release: str,
    command: str,
    findings: Sequence[Finding],
    engine: str,
    record: str,
    /,
) -> RecordDocument:
    """``findings`` of the record kept in ``record`` as a ``check --json`` report of ``name``."""
    rows = [Row(f["test"], (_MODEL_CLAUSE,), f["outcome"], f["detail"]) for f in findings]
    return {
        "implementation": f"{record} (a record, not a run)",
        "profile": record_profile(command),
        "spec_version": SPEC_VERSION,
        "describe": {"name": name, "release": release},
        "properties": [_property(finding, engine) for finding in findings],
        "clauses": clause_summary(rows),
        "failed": [row.name for row in rows if row.outcome == "failed"],
        "conforming_deviations": [],
        "conforming": [],
        "counts": counts(rows),
        "exported": [],
    }


def write_record_reports(directory: Path = REPORTS, /) -> list[Path]:
    """Write the records' columns as reports into ``directory``, named as :data:`RECORD_REPORTS`."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, path in zip(NAMES, RECORD_REPORTS, strict=True):
        target = directory / path.name
        target.write_text(json.dumps(record_document(name), indent=2) + "\n", encoding="utf-8")
        written.append(target)
    return written


def with_record(reports: Sequence[Report], /) -> list[Report]:
    """``reports``, llama.cpp's ggml report renamed to its column and joined by the records.

    The prebuilt release's column comes with it (:func:`prebuilt_report`). The
    records' reports of :func:`write_record_reports` are left out, the records
    being joined from this module: so a page of every report in
    :data:`REPORTS` is the ggml report's.

    Raises:
        RuntimeError: the ggml report is of another llama.cpp than the record.
    """
    found: list[Report] = []
    for report in reports:
        if report.command in _RECORD_COMMANDS:
            # The records' own reports (write_record_reports): the records join below.
            continue
        if report.name != GGML_NAME:
            found.append(report)
            continue
        if report.release != RELEASE:
            message = (
                f"the llama.cpp tier's record is of {RELEASE}, its ggml report of"
                f" {report.release}: run the tier and update RECORD in tests/llamacpp/results.py"
            )
            raise RuntimeError(message)
        found += [replace(report, name=NAME), record_report(), prebuilt_report()]
    return found


def _case_pages() -> dict[str, str]:
    """Each snapshot case's page, as the architectures' 0c1e57098 entries link it."""
    pages = {}
    for finding in ARCHITECTURES_RECORD:
        _, _, parameter = finding["test"].partition("[")
        if finding["outcome"] == "deviation" and not on_v050(finding):
            pages[parameter.removesuffix("]")] = finding["page"]
    return pages


#: How the table names each snapshot case of test_architectures.py's ``CASES``.
_CASE_LABELS: Final = {
    "beside_other_sequences": "beside others",
    "whole_window": "whole window",
    "past_the_window": "past the window",
}


def _snapshot_cell(architecture: Architecture, pages: dict[str, str], drawn: str, /) -> str:
    """The snapshot way's cell: the cases that fail, each linked, and what ``drawn`` says."""
    failing = ", ".join(f"[{_CASE_LABELS[case]}]({pages[case]})" for case in architecture["fails"])
    return f"**DEVIATION** {failing}; {drawn}"


_TABLE_HEADER: Final = (
    "Architecture | What rolls back | 0c1e57098 checkpoint | 0c1e57098 snapshot"
    " | v0.5.0 checkpoint | v0.5.0 snapshot"
)
_TABLE_NOTE: Final = (
    "0c1e57098's cells are the drawn rounds' and the shrunk cases' (`test_architectures.py`);"
    " v0.5.0's are the shrunk cases' and a tenth of the drawn rounds (at least 6 examples),"
    " on the prebuilt adapter's baseline CPU variant. Qwen3.5, the tier's own model, is the"
    " columns' other entries (`test_rollback.py`, `test_prebuilt.py`)."
)


def architectures_table() -> str:
    """The table of :data:`ARCHITECTURES`: a row each, a column per build and way.

    Its rows start with no pipe, so a column moved in or out of the page
    (:func:`with_column`) takes it as part of its section.
    """
    pages = _case_pages()
    lines = [
        ARCHITECTURES_TITLE,
        "",
        _TABLE_HEADER,
        "--- | --- | --- | --- | --- | ---",
    ]
    for architecture in ARCHITECTURES:
        # The drawn snapshot rounds pass for one sequence within its window; on
        # DeepSeek-V4 (exact beside other sequences) up to whole windows too.
        drawn = "drawn rounds PASS, one sequence in its window"
        if "beside_other_sequences" not in architecture["fails"]:
            drawn = "drawn rounds PASS, several sequences up to whole windows"
        snapshot = _snapshot_cell(architecture, pages, drawn)
        if architecture["v050"]:
            # v0.5.0 draws a tenth of the rounds, each way as the sdist build's
            # rounds take it, snapshots for one sequence on every architecture.
            later = [
                (
                    "**PASS** the shrunk cases' calls; drawn rounds (a tenth) PASS,"
                    " several sequences, whole windows"
                ),
                _snapshot_cell(
                    architecture, pages, "drawn rounds (a tenth) PASS, one sequence in its window"
                ),
            ]
        else:
            later = ["**SKIP**: v0.5.0 does not list it, its loader refuses it by name"] * 2
        cells = [
            f"`{architecture['arch']}`",
            architecture["state"],
            "**PASS** drawn rounds, several sequences, whole windows",
            snapshot,
            *later,
        ]
        lines.append(" | ".join(cells))
    lines += [
        "",
        _TABLE_NOTE,
    ]
    return "\n".join(lines) + "\n"


def render(reports: Sequence[Report], /) -> str:
    """The results page of ``reports``, as ``report --markdown - --bounds-only`` writes it.

    llama.cpp's ggml report is joined by the records (:func:`with_record`), and
    its column's section ends in :func:`architectures_table`; clause links go
    to ``../SPEC.md``, as docs/results.md reads it.
    """
    matrix = build_matrix(with_record(reports), order=OUTCOMES)
    labels: dict[str, str] = {o: LABELS[o] for o in OUTCOMES if o in LABELS}
    page = markdown_page(matrix, labels=labels, spec_url="../SPEC.md", measured=False)
    title = f"\n### {NAME}, {RELEASE}\n"
    if title not in page:
        return page
    end = page.find("\n### ", page.index(title) + 1)
    end = len(page) if end == -1 else end
    return f"{page[:end].rstrip()}\n\n{architectures_table()}{page[end:]}"


def run_report(*flags: str, report: Path = REPORT) -> int:
    """``vectors run --clause RB-REPLAY`` over the ggml adapter into ``report``; its exit status.

    Raises:
        RuntimeError: the run left no report, or a traceback.
    """
    report.parent.mkdir(parents=True, exist_ok=True)
    report.unlink(missing_ok=True)
    command = shlex.join([sys.executable, str(ADAPTER), *flags])
    finished = run_module(
        "ssm_rollback_spec.tools.cli",
        *("vectors", "run", "--impl-cmd", command, "--clause", "RB-REPLAY"),
        # The first reply waits for build.py to find its cache: seconds on a loaded host.
        *("--impl-timeout", "120", "--json", str(report)),
        timeout=600,
    )
    if "Traceback" in finished.stdout + finished.stderr or not report.exists():
        message = f"ggml vectors run: no report\n{finished.stderr[-3000:]}"
        raise RuntimeError(message)
    return finished.returncode


#: One implementation's part of a page: its header cell, its totals, its cell
#: by clause, and its section (with its footnotes).
Column = tuple[str, str, dict[str, str], str]


def _name(header_cell: str, /) -> str:
    return header_cell.split("<br>", 1)[0]


def _cells(line: str, /) -> list[str]:
    # A cell's own pipes (a reproduce: line's) are escaped as \|.
    return [cell.strip() for cell in _SEPARATOR.split(line.strip()[1:-1])]


def _clause(cells: Sequence[str], /) -> str | None:
    found = _CLAUSE_ROW.match(cells[0])
    return None if found is None else found[1]


def _blocks(text: str, /) -> dict[str, str]:
    tail = text.split(_IMPLEMENTATIONS, 1)[1]
    parts = tail.split("\n### ")
    return {part.split("\n", 1)[0].removeprefix("### "): part for part in parts if part.strip()}


def page_column(text: str, name: str = NAME, /) -> Column:
    """The column of ``text`` (a results page) named ``name``, and its section.

    Raises:
        KeyError: no column is named ``name``.
    """
    rows = [_cells(line) for line in text.splitlines() if line.startswith("| ")]
    index = next((i for i, cell in enumerate(rows[0]) if i and _name(cell) == name), None)
    if index is None:
        raise KeyError(name)
    header = rows[0][index]
    cells = {clause: row[index] for row in rows[3:] if (clause := _clause(row)) is not None}
    return header, rows[2][index], cells, _blocks(text)[header.replace("<br>", ", ")]


def markdown(*reports: Path) -> str:
    """The page of the reports in ``reports``, as docs/results.md is written (:func:`render`).

    Raises:
        ReportError: a file is not a report.
    """
    return render([read_report(path) for path in reports])


def column(report: Path = REPORT, /) -> Column:
    """The column ``report`` gives, with the record, as the page writes it."""
    return page_column(markdown(report))


def prebuilt_column(report: Path = REPORT, /) -> Column:
    """The prebuilt release's column, from its record, as the page beside ``report``'s writes it."""
    return page_column(markdown(report), PREBUILT_NAME)


#: A cell that puts its clause among the failing ones, as the page orders them.
_FAILING_LABELS: Final = tuple(f"**{LABELS[outcome]}**" for outcome in sorted(FAILING))


def _failing(cells: Sequence[str], /) -> bool:
    return any(
        cell == label or cell.startswith((f"{label}[^", f"{label}<br>"))
        for cell in cells[1:]
        for label in _FAILING_LABELS
    )


def _order(clause: str, /) -> tuple[int, str]:
    return (CLAUSES.index(clause), "") if clause in CLAUSES else (len(CLAUSES), clause)


def _sorted_rows(rows: list[list[str]], /) -> list[list[str]]:
    """The table's rows below the totals, each family's failing clauses first (as the page)."""
    ordered: list[list[str]] = []
    family: list[list[str]] = []
    for row in [*rows, ["**end**"]]:
        if _clause(row) is not None:
            family.append(row)
            continue
        clause_of = {id(r): _clause(r) or "" for r in family}
        ordered += sorted(family, key=lambda r: (not _failing(r), _order(clause_of[id(r)])))
        family = []
        ordered.append(row)
    return ordered[:-1]


def _rebuilt(text: str, drop: Callable[[str], bool], added: Column | None, /) -> str:
    """``text`` without the columns whose header ``drop`` takes, with ``added`` where it sorts."""
    lines = text.splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if line.startswith("| ")]
    rows = [_cells(lines[i]) for i in at]
    header = rows[0]
    kept = [i for i, cell in enumerate(header) if i and not drop(cell)]
    place = 1 + sum(1 for i in kept if added is not None and _key(header[i]) < _key(added[0]))
    built = []
    for number, row in enumerate(rows):
        cells = [row[0]] + [row[i] for i in kept]
        if added is not None:
            clause = _clause(row)
            shown = (added[0], "---", added[1])[number] if number < _TOP_ROWS else ""
            cells.insert(place, added[2].get(clause, "—") if clause is not None else shown)
        built.append(cells)
    built = built[:_TOP_ROWS] + _sorted_rows(built[_TOP_ROWS:])
    for line_at, cells in zip(at, built, strict=True):
        lines[line_at] = "| " + " | ".join(cells) + " |\n"
    body = "".join(lines)
    blocks = _blocks(body)
    if added is not None:
        blocks[added[3].split("\n", 1)[0]] = added[3]
    # The sections follow the columns, each titled "name, release".
    order = [cell.replace("<br>", ", ") for cell in built[0][1:]]
    joined = "\n### ".join(blocks[title].rstrip("\n") + "\n" for title in order)
    return body.split(_IMPLEMENTATIONS, 1)[0] + _IMPLEMENTATIONS + "\n### " + joined


#: The table's rows above the clauses: the header, the separator and the totals.
_TOP_ROWS: Final = 3


def _key(header_cell: str, /) -> tuple[str, str]:
    name, _, release = header_cell.partition("<br>")
    return name, release


def with_column(text: str, added: Column, /) -> str:
    """``text`` (a results page) with ``added`` where ``report`` sorts it (its namesake gone)."""
    return _rebuilt(text, lambda cell: _name(cell) == _name(added[0]), added)


def beside(text: str, added: Column, /) -> str:
    """``text`` with ``added`` where it sorts, beside its namesakes of other releases."""
    return _rebuilt(text, lambda cell: cell == added[0], added)


def without_column(text: str, name: str, /) -> str:
    """``text`` (a results page) without the columns named ``name`` and their sections."""
    return _rebuilt(text, lambda cell: _name(cell) == name, None)


def columns(text: str, /) -> list[Column]:
    """Every column of ``text`` (a results page), in its order."""
    rows = [_cells(line) for line in text.splitlines() if line.startswith("| ")]
    blocks = _blocks(text)
    found = []
    for index, header in enumerate(rows[0][1:], start=1):
        cells = {clause: row[index] for row in rows[3:] if (clause := _clause(row)) is not None}
        found.append((header, rows[2][index], cells, blocks[header.replace("<br>", ", ")]))
    return found


def main(argv: list[str] | None = None) -> int:
    """Run the report (unless ``--page-only``) and write its column into docs/results.md.

    The records' reports are written beside it (:func:`write_record_reports`).
    """
    if (sys.argv[1:] if argv is None else argv) != ["--page-only"]:
        run_report()
    write_record_reports()
    page = with_column(_PAGE.read_text(encoding="utf-8"), column())
    _PAGE.write_text(with_column(page, prebuilt_column()), encoding="utf-8")
    sys.stdout.write(
        f"{_PAGE.relative_to(ROOT)}: the llama.cpp columns from {REPORT.name} and the records\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
