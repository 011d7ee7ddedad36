# SPDX-License-Identifier: MIT OR Apache-2.0
"""vLLM's align mode over a verify window longer than a block (docs/engines-vllm.md).

vLLM 0.33.0 refuses no ``num_speculative_tokens + 1 > block_size`` in mode
"align" (its only such check, ``v1/core/kv_cache_coordinator.py`` lines
150-158, is for multi-module MTP, and allows K equal to the block size), so
a verify window may cross two block boundaries, and its post-copy
(``v1/worker/mamba_utils.py`` lines 458 and 467) saves the state only at the
last one its kept tokens reach. No batch of the corpus has such a window
(its windows hold at most K_CEILING = 4 rows); this test builds one case of
them with the corpus's own API, at blocks of 4 tokens, and judges it against
the model's sequences decoded alone (RB-REPLAY-12).
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from typing import TYPE_CHECKING, Final

import pytest

from ssm_rollback_spec.corpus.replay_batches import batch_cases
from ssm_rollback_spec.corpus.replay_draws import ENGINE_SHAPE, K_CEILING
from ssm_rollback_spec.replay.layer import Pipeline
from tests.child import ROOT
from tests.kernels import engines

if TYPE_CHECKING:
    from pathlib import Path

    from ssm_rollback_spec.corpus.replay_format import BatchCase

pytestmark = pytest.mark.kernels

#: The block size of the run: every window below is longer than it.
_BLOCK: Final = 4
#: (sequence, slot, window, accepted, prefill rows, joins, finishes), as the corpus plans a
#: batch. A request starts with its checkpoint as its one computed token. s0 keeps all 7
#: rows of its first window (tokens 1 to 8: boundaries 4 and 8 crossed, only 8 saved),
#: then 2 of 6, then all 7 again (10 to 17: 12 and 16); s1 keeps 3 of 7, all 5 of 5
#: (4 to 9: 8) and 1 of 7 (a rollback inside a window that spans three blocks).
_PLAN: Final = (
    (("s0", 0, 7, 7, 0, True, False),),
    (("s0", 0, 6, 2, 0, False, False), ("s1", 1, 7, 3, 0, True, False)),
    (("s1", 1, 5, 5, 0, False, False), ("s0", 0, 7, 7, 0, False, False)),
    (("s0", 0, 1, 1, 0, False, True), ("s1", 1, 7, 1, 0, False, False)),
    (("s1", 1, 2, 2, 0, False, True),),
)
_NAME: Final = "verify-windows-longer-than-a-block"


def _long_window_case() -> BatchCase:
    (case,) = batch_cases(
        random.Random(_NAME),  # noqa: S311 (draws for a test case, not a secret)
        (Pipeline.VLLM_BF16,),
        ENGINE_SHAPE,
        plans={_NAME: (2, _PLAN)},
    )
    return case


def _corpus_of(folder: Path, case: BatchCase, /) -> Path:
    """A copy of the shipped corpus whose ``batch.json`` holds ``case`` alone."""
    copy = folder / "long-windows"
    shutil.copytree(ROOT / "vectors", copy)
    path = copy / "replay" / "batch.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    document["cases"] = [case]
    path.write_text(json.dumps(document), encoding="utf-8")
    manifest_path = copy / "replay" / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    for entry in manifest["files"]:
        if entry["path"] == "batch.json":
            entry["cases"] = 1
            entry["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    return copy


def _boundaries_kept(case: BatchCase, /) -> list[int]:
    """Per verify, the block boundaries its kept tokens cross (each request's computed count)."""
    computed: dict[str, int] = {}
    crossed = []
    for step in case["steps"]:
        for entry in step["batch"]:
            before = computed.get(entry["sequence"], 1)
            after = before + entry["accepted"]
            crossed.append(after // _BLOCK - before // _BLOCK)
            computed[entry["sequence"]] = after
    return crossed


def test_the_case_has_windows_longer_than_a_block_whose_kept_tokens_cross_two_boundaries() -> None:
    case = _long_window_case()
    windows = [len(entry["rows"]) for step in case["steps"] for entry in step["batch"]]
    assert max(windows) == 7 > _BLOCK >= K_CEILING
    assert sum(window > _BLOCK for window in windows) == 6
    # s0's first and third windows: the post-copy saves only the later boundary.
    assert _boundaries_kept(case) == [2, 0, 1, 1, 2, 0, 0, 1]


def test_vllms_align_copies_keep_windows_longer_than_a_block_right(
    tmp_path: Path, kernels_python: str
) -> None:
    case = _long_window_case()
    corpus = ("--vectors", str(_corpus_of(tmp_path, case)))
    flags = ("--cache-mode", "align", "--block-size", str(_BLOCK))
    status, report, shown = engines.vectors_run(
        tmp_path / "report.json",
        kernels_python,
        "vllm",
        *flags,
        clause="RB-REPLAY-12",
        corpus=corpus,
    )
    judged = {found["id"]: found for found in report["cases"]}
    mine = judged[f"replay-batch-{case['id']}"]
    assert mine["outcome"] == "passed", mine["detail"]
    assert status == 0, shown
    # The case reads the bookkeeping: one off in the accepted count vLLM is handed fails it.
    control = (*flags, "--control", "off-by-one")
    status, report, _ = engines.vectors_run(
        tmp_path / "control.json",
        kernels_python,
        "vllm",
        *control,
        clause="RB-REPLAY-12",
        corpus=corpus,
    )
    failed = {found["id"]: found["outcome"] for found in report["cases"]}
    assert failed[f"replay-batch-{case['id']}"] == "failed"
    assert status == 1
