# SPDX-License-Identifier: MIT OR Apache-2.0
"""The llama.cpp tier's reports: its ggml report, and the tier report of its ``llama.h`` tests.

The tier runs ``vectors run`` (the replay corpus) over the ggml adapter
(adapters/llama-cpp/ggml_adapter.py) into build/results/llama.cpp/ggml-vectors.json
(:func:`run_report`). Its ``llama.h`` tests (test_rollback.py,
test_prebuilt.py, test_architectures.py) judge RB-REPLAY-14 on each
architecture, way and build: the conftest registers the tier recorder
(tests/results/tier_recorder.py), which writes what they judged, each one's
outcome in the run, as a tier report, build/results/llama.cpp/llama-h.json
(spec/results/tier_report.py). :func:`describe` says what each test judges:
the build (:data:`GGML_NAME` and :data:`RELEASE` for the sdist's, joining the
ggml report's column; :data:`PREBUILT_NAME` for v0.5.0 prebuilt), and the
finding a pass of it holds live, from :data:`FINDINGS` (its words, page and
llama.cpp report) and, for a snapshot case, the test module's own ``CASES``
(the architectures the case fails on). tests/results/test_results.py holds
:data:`FINDINGS` to the tests' names and to the pages that exist.

The page (docs/results.md) is built from the tier report committed at
tests/results/tiers/llama.cpp.json, which a whole run of the tier compares
with its own, failing when they differ; the ggml report a run writes is
compared with the page by test_ggml_replay.py (:func:`column`).
``python -m tests.llamacpp.results`` runs the ggml report and writes the
tier's implementations into the committed page (``--page-only``: from the
report a run left).
"""

from __future__ import annotations

import shlex
import shutil
import sys
from enum import Enum
from typing import TYPE_CHECKING, Any, Final, TypedDict

from ssm_rollback_spec.releases import LLAMA_CPP, LLAMA_CPP_COMMIT
from ssm_rollback_spec.results import read_report, read_tier_report, tier_reports
from ssm_rollback_spec.results.engines_page import markdown as page_markdown
from ssm_rollback_spec.results.engines_page import part, with_parts
from tests.child import ROOT, run_module
from tests.results.tier_recorder import COMMITTED

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

    from ssm_rollback_spec.results.engines_page import Part

__all__ = [
    "ADAPTER",
    "ARCHITECTURE_FINDINGS",
    "FINDINGS",
    "GGML_NAME",
    "JUDGED",
    "NAME",
    "NAMES",
    "PREBUILT_NAME",
    "PREBUILT_RELEASE",
    "RELEASE",
    "REPORT",
    "REPORTS",
    "TIER",
    "TIER_REPORT",
    "TIER_REPORTS",
    "Finding",
    "column",
    "describe",
    "markdown",
    "page_column",
    "place_committed_report",
    "prebuilt_column",
    "run_report",
    "with_column",
]

ADAPTER: Final = ROOT / "adapters" / "llama-cpp" / "ggml_adapter.py"
#: The tier, as its results folder and its committed tier report name it.
TIER: Final = "llama.cpp"
#: Where the tier writes its reports, beside build/results/kernels/.
REPORTS: Final = ROOT / "build" / "results" / "llama.cpp"
REPORT: Final = REPORTS / "ggml-vectors.json"
#: The tier report of its llama.h tests, as the run writes it.
TIER_REPORT: Final = REPORTS / "llama-h.json"
#: The tier report the page is built from, which a whole run compares with its own.
COMMITTED_REPORT: Final = COMMITTED / f"{TIER}.json"
_PAGE: Final = ROOT / "docs" / "results.md"
#: The ggml adapter's describe name, which the sdist build's llama.h tests share.
GGML_NAME: Final = "llama.cpp ggml kernels (adapters/llama-cpp)"
#: The release the tier builds, as the ggml adapter's describe states it.
RELEASE: Final = f"{LLAMA_CPP.distribution}=={LLAMA_CPP.version} (llama.cpp {LLAMA_CPP_COMMIT})"
#: llama.cpp v0.5.0: the adapter built against its llama.h, linked with
#: node-llama-cpp's prebuilt libraries (adapters/llama-cpp/prebuilt.py).
PREBUILT_NAME: Final = "llama.cpp: llama.h, prebuilt (tests/llamacpp)"
PREBUILT_RELEASE: Final = "node-llama-cpp==3.22.1 (llama.cpp v0.5.0)"
#: The sdist build's section heading on the page, and both.
NAME: Final = f"{GGML_NAME}, {RELEASE}"
NAMES: Final = (NAME, f"{PREBUILT_NAME}, {PREBUILT_RELEASE}")
#: The files .ci/run's report step reads beside the ggml report.
TIER_REPORTS: Final = (TIER_REPORT,)
#: The tier's modules whose tests the tier report holds.
JUDGED: Final = ("test_rollback.py", "test_prebuilt.py", "test_architectures.py")
#: The clause the llama.h tests judge (a rolled-back sequence's kept tokens have
#: the logits of decoding them plainly).
_CLAUSE: Final = "RB-REPLAY-14"
#: Tests whose pass holds a case's finding live only on the architectures the case names.
_CASE_TESTS: Final = (
    "test_each_snapshot_case_fails_on_the_architectures_it_names_and_no_other",
    "test_each_snapshot_case_fails_on_v050_as_on_0c1e57098",
)


class Finding(TypedDict):
    """What one test judges, in words; the finding its pass holds live, where it holds one."""

    #: ``FILE::NAME`` or ``FILE::NAME[CASE]``: the test, over all its other parameters.
    test: str
    #: What it judges; the finding's reason when it holds one.
    detail: str
    #: The finding's page (docs/findings/NAME.md) and llama.cpp's report of it
    #: (or empty); both empty for a test that holds none.
    page: str
    link: str


#: The tests the tier report holds, and what each judges: no outcome, which is the run's.
FINDINGS: Final[tuple[Finding, ...]] = (
    {
        "test": (
            "test_rollback.py::test_checkpoint_rollback_keeps_the_logits_of_decoding_only"
            "_the_kept_tokens"
        ),
        "detail": "Qwen3.5, checkpoint way, several sequences in one llama_decode",
        "page": "",
        "link": "",
    },
    {
        "test": (
            "test_rollback.py::test_qwen3_next_checkpoint_rollback_keeps_the_logits_of"
            "_decoding_only_the_kept_tokens"
        ),
        "detail": "Qwen3-Next, checkpoint way (it has no snapshots in llama.cpp)",
        "page": "",
        "link": "",
    },
    {
        "test": (
            "test_rollback.py::test_snapshot_rollback_of_one_sequence_keeps_the_logits_of"
            "_decoding_only_the_kept_tokens"
        ),
        "detail": "Qwen3.5, snapshot way, one sequence, within its last window",
        "page": "",
        "link": "",
    },
    {
        "test": (
            "test_rollback.py::test_snapshot_rollback_is_a_deviation_of_the_released_llama"
            "_cpp[beside_other_sequences]"
        ),
        "detail": (
            "snapshot rollback beside other sequences: llama_memory_seq_rm accepts it, and"
            " the kept tokens' logits are not plain decoding's (find_slot reorders the"
            " cells, the snapshot planes stay put); no report found in llama.cpp's"
            " tracker, the closest open one linked"
        ),
        "page": "docs/findings/llamacpp-snapshot-beside-other-sequences.md",
        "link": "https://github.com/ggml-org/llama.cpp/issues/28019",
    },
    {
        "test": (
            "test_rollback.py::test_snapshot_rollback_is_a_deviation_of_the_released_llama"
            "_cpp[whole_window]"
        ),
        "detail": (
            "snapshot rollback of a whole window: llama_memory_seq_rm accepts it and"
            " restores a plane the last decode did not write"
            " (src/models/delta-net-base.cpp 587-603); llama.cpp's report is closed, its"
            " fix not merged at 0c1e57098"
        ),
        "page": "docs/findings/llamacpp-snapshot-whole-window.md",
        "link": "https://github.com/ggml-org/llama.cpp/issues/26695",
    },
    {
        "test": (
            "test_prebuilt.py::test_checkpoint_rollback_of_the_prebuilt_release_keeps_the"
            "_logits_of_plain_decoding"
        ),
        "detail": (
            "Qwen3.5, checkpoint way, several sequences, both CPU variants (bound 0"
            " baseline, 1e-3 native); the failures of random thorough runs were the"
            " machine's, fixed (docs/engines.md)"
        ),
        "page": "",
        "link": "",
    },
    {
        "test": (
            "test_prebuilt.py::test_both_snapshot_findings_are_live_in_the_prebuilt"
            "_release[beside_other_sequences]"
        ),
        "detail": (
            "snapshot rollback beside other sequences, both CPU variants: 1.74e-2 off"
            " while the checkpoint way on the same calls is within its bound; live in"
            " v0.5.0 as in 0c1e57098"
        ),
        "page": "docs/findings/llamacpp-snapshot-beside-other-sequences.md",
        "link": "https://github.com/ggml-org/llama.cpp/issues/28019",
    },
    {
        "test": (
            "test_prebuilt.py::test_both_snapshot_findings_are_live_in_the_prebuilt"
            "_release[whole_window]"
        ),
        "detail": (
            "snapshot rollback of a whole window, both CPU variants: 5.28e-3 off while the"
            " checkpoint way on the same calls is within its bound; live in v0.5.0 as in"
            " 0c1e57098"
        ),
        "page": "docs/findings/llamacpp-snapshot-whole-window.md",
        "link": "https://github.com/ggml-org/llama.cpp/issues/26695",
    },
    {
        "test": (
            "test_architectures.py::test_checkpoint_rollback_keeps_the_logits_of_plain"
            "_decoding_on_every_architecture"
        ),
        "detail": "ten architectures, checkpoint way, several sequences, whole windows",
        "page": "",
        "link": "",
    },
    {
        "test": (
            "test_architectures.py::test_snapshot_rollback_of_one_sequence_keeps_the"
            "_logits_of_plain_decoding_on_every_architecture"
        ),
        "detail": "ten architectures, snapshot way, one sequence, within its last window",
        "page": "",
        "link": "",
    },
    {
        "test": (
            "test_architectures.py::test_each_snapshot_case_fails_on_the_architectures_it"
            "_names_and_no_other[beside_other_sequences]"
        ),
        "detail": (
            "the several-sequences finding on all nine recurrent architectures (GDN, KDA,"
            " Mamba-2, short convolutions); DeepSeek-V4 exact"
        ),
        "page": "docs/findings/llamacpp-snapshot-beside-other-sequences.md",
        "link": "https://github.com/ggml-org/llama.cpp/issues/28019",
    },
    {
        "test": (
            "test_architectures.py::test_each_snapshot_case_fails_on_the_architectures_it"
            "_names_and_no_other[whole_window]"
        ),
        "detail": (
            "the whole-window finding on all nine recurrent architectures: each family's"
            " snapshot writer leaves planes past its window unwritten; DeepSeek-V4 exact"
        ),
        "page": "docs/findings/llamacpp-snapshot-whole-window.md",
        "link": "https://github.com/ggml-org/llama.cpp/issues/26695",
    },
    {
        "test": (
            "test_architectures.py::test_each_snapshot_case_fails_on_the_architectures_it"
            "_names_and_no_other[past_the_window]"
        ),
        "detail": (
            "DeepSeek-V4, snapshot rollback past the last decode: llama_memory_seq_rm"
            " accepts it and restores the state before that decode, whose compressor ring"
            " (2 x 4 rows by position) a later position has overwritten"
            " (src/llama-kv-cache-dsv4.cpp 518-541, 694, 1315)"
        ),
        "page": "docs/findings/llamacpp-dsv4-rollback-past-the-last-decode.md",
        "link": "",
    },
    {
        "test": (
            "test_architectures.py::test_v050_keeps_its_snapshots_for_every_architecture"
            "_it_lists_and_lacks_glm5_next"
        ),
        "detail": (
            "v0.5.0 keeps 4 snapshots for the nine it lists besides Qwen3.5; its loader"
            " refuses GLM-5-Next by name"
        ),
        "page": "",
        "link": "",
    },
    {
        "test": (
            "test_architectures.py::test_v050s_drawn_rounds_keep_the_logits_of_plain"
            "_decoding_on_every_architecture"
        ),
        "detail": (
            "drawn rounds both ways on the nine, a tenth of the profile's examples (at"
            " least 6): every kept token's logits those of plain decoding, bit for bit"
        ),
        "page": "",
        "link": "",
    },
    {
        "test": (
            "test_architectures.py::test_each_snapshot_case_fails_on_v050_as_on"
            "_0c1e57098[beside_other_sequences]"
        ),
        "detail": (
            "v0.5.0, baseline CPU variant: the several-sequences finding on the eight"
            " recurrent architectures it lists; DeepSeek-V4 exact, the checkpoint way exact"
        ),
        "page": "docs/findings/llamacpp-snapshot-beside-other-sequences.md",
        "link": "https://github.com/ggml-org/llama.cpp/issues/28019",
    },
    {
        "test": (
            "test_architectures.py::test_each_snapshot_case_fails_on_v050_as_on"
            "_0c1e57098[whole_window]"
        ),
        "detail": (
            "v0.5.0, baseline CPU variant: the whole-window finding on the eight recurrent"
            " architectures it lists; DeepSeek-V4 exact, the checkpoint way exact"
        ),
        "page": "docs/findings/llamacpp-snapshot-whole-window.md",
        "link": "https://github.com/ggml-org/llama.cpp/issues/26695",
    },
    {
        "test": (
            "test_architectures.py::test_each_snapshot_case_fails_on_v050_as_on"
            "_0c1e57098[past_the_window]"
        ),
        "detail": (
            "v0.5.0, baseline CPU variant: DeepSeek-V4's rollback past the last decode, as"
            " on 0c1e57098, and the recurrent eight it lists by the whole-window mechanism"
        ),
        "page": "docs/findings/llamacpp-dsv4-rollback-past-the-last-decode.md",
        "link": "",
    },
)


def _shown(value: object, /) -> str | None:
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return str(value)
    return None


def _finding(item: pytest.Item, function: str, file: str, /) -> Finding | None:
    # An entry of the function whose ID names one of the test's (a case), else the function's.
    ids = f"-{item.name.partition('[')[2].removesuffix(']')}-"
    for finding in FINDINGS:
        name, _, case = finding["test"].partition("[")
        if name == f"{file}::{function}" and case and f"-{case.removesuffix(']')}-" in ids:
            return finding
    return next((f for f in FINDINGS if f["test"] == f"{file}::{function}"), None)


def describe(item: pytest.Item, /) -> dict[str, Any] | None:
    """What ``item`` judges, for the tier report; None for a test it does not hold."""
    path = getattr(item, "path", None)
    if path is None or path.name not in JUDGED:
        return None
    function = item.name.partition("[")[0]
    params = getattr(getattr(item, "callspec", None), "params", {})
    parameters = {key: shown for key, value in params.items() if (shown := _shown(value))}
    found = _finding(item, function, path.name)
    if found is None:
        return None
    live = bool(found["page"])
    if function in _CASE_TESTS:
        # The case fails on the architectures it names; elsewhere its pass holds nothing.
        case = getattr(item, "module", None).CASES[parameters["case"]]  # type: ignore[union-attr]
        live = parameters["arch"] in {arch.value for arch in case.fails_on}
    prebuilt = path.name == "test_prebuilt.py" or "v050" in function
    name, release = (PREBUILT_NAME, PREBUILT_RELEASE) if prebuilt else (GGML_NAME, RELEASE)
    finding = {"page": found["page"], "link": found["link"], "reason": found["detail"]}
    return {
        "test": f"{path.name}::{item.name}",
        "function": function,
        "parameters": parameters,
        "implementation": {"name": name, "release": release},
        "clauses": [_CLAUSE],
        "detail": "" if live else found["detail"],
        "finding": finding if live else None,
    }


#: test_architectures.py's tests of :data:`FINDINGS`, each that holds a finding
#: as a "deviation": what that module's own test holds to its ``CASES``.
ARCHITECTURE_FINDINGS: Final[tuple[dict[str, str], ...]] = tuple(
    {
        "test": f["test"],
        # The case's own words where llama.cpp has no report of it.
        "link": f["link"] or ("no report found" if f["page"] else ""),
        "outcome": "deviation" if f["page"] else "passed",
    }
    for f in FINDINGS
    if f["test"].startswith("test_architectures.py::")
)


def place_committed_report() -> list[Path]:
    """Put the committed tier report in build/results/llama.cpp/ until the run writes its own.

    An earlier run's may be there, of other tests; the run replaces the
    committed one with its own at the session's end (the tier recorder),
    a whole run failing where they differ.
    """
    REPORTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(COMMITTED_REPORT, TIER_REPORT)
    return [TIER_REPORT]


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


def markdown(*reports: Path) -> str:
    """The page of ``reports`` and the committed tier report, as docs/results.md writes it."""
    read = [read_report(path) for path in reports]
    return page_markdown([*read, *tier_reports(read_tier_report(COMMITTED_REPORT))])


def page_column(text: str, name: str = NAME, /) -> Part | None:
    """The implementation of the page ``text`` whose section is headed ``name``."""
    return part(text, name)


def column(report: Path = REPORT, /) -> Part | None:
    """The sdist build's implementation, as ``report`` and the tier report give it."""
    return part(markdown(report), NAME)


def prebuilt_column(report: Path = REPORT, /) -> Part | None:
    """The prebuilt release's implementation, as the tier report gives it beside ``report``."""
    return part(markdown(report), NAMES[1])


def with_column(text: str, added: Part | None, /) -> str:
    """``text`` with ``added`` in place of the same implementation, where it sorts."""
    return text if added is None else with_parts(text, [added])


def main(argv: list[str] | None = None) -> int:
    """Run the ggml report (or, with ``--page-only``, take a run's) and write the page's parts."""
    if (sys.argv[1:] if argv is None else argv) != ["--page-only"]:
        run_report()
    committed = _PAGE.read_text(encoding="utf-8")
    fresh = markdown(REPORT)
    made = [found for name in NAMES if (found := part(fresh, name)) is not None]
    _PAGE.write_text(with_parts(committed, made), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
