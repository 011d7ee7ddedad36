# SPDX-License-Identifier: MIT OR Apache-2.0
"""The wheel's RB-REPLAY-14 through ``check`` and ``vectors run`` against llama.cpp.

The adapter is adapters/llama-cpp/model_adapter.py; the judge is the built
wheel, installed in a fresh venv and run from a folder that is not the
clone (tests/installed.py), as a user runs it.

The checkpoint way passes on both architectures. The snapshot way fails on
the released llama.cpp for the two findings of test_rollback.py (its shrunk
case under the ``ci`` profile is the whole-window one); they are held as a
deviation with their links, so this test turns red the day llama.cpp fixes them.
The round scripts (vectors/replay/model_rounds.json) pass the checkpoint way
whole, and fail the snapshot way on four scripts, each of which rolls back
whole a window decoded after earlier tokens, the finding of #26695. The
self-test's wrong runtimes (``--fault``) fail ``check`` and the round scripts.
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

from tests.llamacpp import operation
from tests.llamacpp.engine import Arch, Fault, Way
from tests.llamacpp.test_rollback import DEVIATION_LINK, WHOLE_WINDOW_LINK

if TYPE_CHECKING:
    from tests.installed import Installed
    from tests.llamacpp.engine import Built

pytestmark = pytest.mark.llamacpp

_PROPERTY: Final = (
    "test_model.py::test_a_rolled_back_sequence_decodes_as_the_kept_tokens_decoded_plainly"
)


def test_describe_offers_both_ways_on_qwen35_and_checkpoints_alone_on_qwen3_next(
    llamacpp: Built,
) -> None:
    offered = {}
    for model in (llamacpp["model"], llamacpp["qwen3next_model"]):
        member = operation.describe(llamacpp["adapter"], model)
        offered[model] = (member["rollback"], member.get("snapshot_depth"), member["bound"])
    assert offered == {
        llamacpp["model"]: (["snapshot", "checkpoint"], 4, "0x0.0p+0"),
        llamacpp["qwen3next_model"]: (["checkpoint"], None, "0x0.0p+0"),
    }


@pytest.mark.parametrize("which", ["model", "qwen3next_model"])
def test_check_passes_llama_cpp_checkpoint_rollback(
    llamacpp: Built, installed: Installed, which: str
) -> None:
    model = llamacpp["model"] if which == "model" else llamacpp["qwen3next_model"]
    impl = operation.impl_cmd(llamacpp["adapter"], model, "checkpoint")
    result = operation.check(installed, impl)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "PASS  RB-REPLAY-14" in result.stdout


def _deviations(tmp_path: Path, /) -> Path:
    """The snapshot way's deviation: RB-REPLAY-14, with both findings' links."""
    deviations = tmp_path / "deviations.json"
    reason = f"llama.cpp's snapshot rollback: {DEVIATION_LINK} and {WHOLE_WINDOW_LINK}"
    deviations.write_text(
        json.dumps(
            {
                "deviations": [
                    {"clause": "RB-REPLAY-14", "reason": reason, "link": WHOLE_WINDOW_LINK}
                ]
            }
        )
    )
    return deviations


def test_check_holds_llama_cpp_snapshot_rollback_as_a_linked_deviation(
    llamacpp: Built, installed: Installed, tmp_path: Path
) -> None:
    impl = operation.impl_cmd(llamacpp["adapter"], llamacpp["model"], "snapshot")
    result = operation.check(installed, impl, "--deviations", str(_deviations(tmp_path)))
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "DEVIATION  RB-REPLAY-14" in result.stdout


@pytest.mark.parametrize(
    ("fault", "profile"),
    # Each fault once, on the checkpoint way: the round scripts below run every
    # fault both ways through the same operation.
    [
        # A failure, reported as found (the interpreter profile shrinks nothing).
        (Fault.AHEAD, "interpreter"),
        # The interpreter profile's 4 examples never checkpoint two sequences at
        # one position with other states, which other-seq needs; ci's 25 do. ci
        # shrinks a failure for Hypothesis's five minutes, so this one is listed
        # as a deviation, which check reports where the property fails and
        # leaves unshrunk (and fails the run where it passes).
        (Fault.OTHER_SEQ, "ci"),
    ],
    ids=lambda value: value.value if isinstance(value, Enum) else value,
)
def test_check_fails_each_wrong_runtime_of_the_self_test(
    llamacpp: Built, installed: Installed, tmp_path: Path, fault: Fault, profile: str
) -> None:
    # rollback.cpp's FAULT, through model_adapter.py's --fault: the same
    # property, model and bound that pass llama.cpp's own checkpoint way, on
    # Qwen3.5 (Qwen3-Next's faults are the round scripts' below).
    impl = operation.impl_cmd(
        llamacpp["adapter"], llamacpp["model"], Way.CHECKPOINT.value, "--fault", fault.value
    )
    report = tmp_path / "report.json"
    listed = profile == "ci"
    options = ("--deviations", str(_deviations(tmp_path))) if listed else ()
    result = operation.check(installed, impl, "--profile", profile, *options, "--json", str(report))
    assert result.returncode == (0 if listed else 1), result.stdout[-4000:] + result.stderr[-2000:]
    outcomes = {row["property"]: row["outcome"] for row in _json(report)["properties"]}
    assert outcomes == {_PROPERTY: "deviation" if listed else "failed"}
    assert ("DEVIATION  RB-REPLAY-14" if listed else "FAIL  RB-REPLAY-14") in result.stdout
    # Judged by a kept token's logits against the same adapter's plain decode.
    assert "a plain decode of" in result.stdout


def _json(path: Path, /) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


@pytest.mark.parametrize(
    ("arch", "way", "fault"),
    [
        (Arch.QWEN35, Way.SNAPSHOT, Fault.AHEAD),
        (Arch.QWEN35, Way.CHECKPOINT, Fault.AHEAD),
        (Arch.QWEN35, Way.CHECKPOINT, Fault.OTHER_SEQ),
        (Arch.QWEN3NEXT, Way.CHECKPOINT, Fault.AHEAD),
        (Arch.QWEN3NEXT, Way.CHECKPOINT, Fault.OTHER_SEQ),
    ],
    ids=lambda value: value.value,
)
def test_the_round_scripts_fail_each_wrong_runtime_of_the_self_test(
    llamacpp: Built, installed: Installed, tmp_path: Path, arch: Arch, way: Way, fault: Fault
) -> None:
    model = llamacpp["model"] if arch is Arch.QWEN35 else llamacpp["qwen3next_model"]
    impl = operation.impl_cmd(llamacpp["adapter"], model, way.value, "--fault", fault.value)
    report = tmp_path / "report.json"
    result = operation.vectors_run(installed, impl, "--json", str(report))
    assert result.returncode == 1, result.stdout[-4000:] + result.stderr[-2000:]
    failed = [case for case in _json(report)["cases"] if case["outcome"] == "failed"]
    # Scripts llama.cpp's own rollback passes: the fault's doing, not a finding's.
    assert {case["id"] for case in failed} - set(_WHOLE_WINDOW_SCRIPTS)
    # Each by a kept token's logits against the same token decoded plainly.
    assert all("the same kept token decoded plainly as plain-" in case["detail"] for case in failed)
    assert all(f"-{way.value}-" in case["id"] for case in failed)


def test_the_round_scripts_pass_llama_cpp_checkpoint_rollback(
    llamacpp: Built, installed: Installed, tmp_path: Path
) -> None:
    report = tmp_path / "report.json"
    impl = operation.impl_cmd(llamacpp["adapter"], llamacpp["model"], "checkpoint")
    result = operation.vectors_run(installed, impl, "--json", str(report))
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    outcomes = {case["id"]: case["outcome"] for case in _json(report)["cases"]}
    # The fourteen checkpoint scripts pass; the snapshot ones are not offered.
    assert sorted(i for i, o in outcomes.items() if o == "passed") == sorted(
        i for i in outcomes if "-checkpoint-" in i
    )
    assert len(outcomes) == 28
    assert {o for i, o in outcomes.items() if "-snapshot-" in i} == {"skipped"}


def _rolls_a_later_window_back_whole(script: list[dict[str, Any]], /) -> bool:
    """Whether a rollback takes back the whole of a window decoded after earlier tokens.

    That is the whole-window finding's shape (test_rollback.py's
    ``WHOLE_WINDOW_ROUNDS``): llama_memory_seq_rm accepts it, and the snapshot
    it needs is one the last decode did not write. A sequence's first window
    rolled back whole leaves it empty, which needs no snapshot.
    """
    held: dict[str, int] = {}
    window: dict[str, int] = {}
    for step in script:
        if "decode" in step:
            for entry in step["decode"]:
                name, tokens = entry["sequence"], len(entry["tokens"])
                held[name] = held.get(name, 0) + tokens
                window[name] = tokens
        elif "rollback" in step:
            name, tokens = step["rollback"], step["tokens"]
            if tokens == window[name] < held[name]:
                return True
            held[name] -= tokens
        else:
            held.pop(step["finish"])
    return False


#: The snapshot scripts that fail on llama.cpp 0c1e57098, each by the whole-window
#: finding: each rolls back whole a window decoded after earlier tokens, alone
#: (001, 006, 007) or beside longer windows (005: 0.0053 to 0.030 off).
#: ``beside-other-sequences`` passes: model_adapter.py gives each new name the
#: first free slot, so its sequences never take the slots of test_rollback.py's
#: shrunk calls (sequence 2 first in the batch).
_WHOLE_WINDOW_SCRIPTS: Final = (
    "model-001-snapshot-whole-window",
    "model-005-snapshot-several-rolled-back-beside-each-other",
    "model-006-snapshot-apart-then-together",
    "model-007-snapshot-finished-and-slot-taken",
)
#: The two drawn scripts of that shape that pass, bit for bit: a one-token and
#: a three-token window rolled back whole, each decoded beside another
#: sequence's longer window (as 005's, which fails, is). Why llama.cpp restores
#: the right state there is not read yet; they are named so that a change shows.
_THE_SHAPE_BUT_PASSING: Final = ("model-008-snapshot-drawn-0", "model-013-snapshot-drawn-5")


def test_the_round_scripts_fail_llama_cpp_snapshot_rollback_where_the_finding_says(
    llamacpp: Built, installed: Installed, tmp_path: Path
) -> None:
    # reproduce: python -m pytest -m llamacpp tests/llamacpp/test_model_operation.py -k round
    # Each failing script is held as a deviation of its own, linked to the
    # finding: vectors run fails if one passes (llama.cpp fixed) or another fails.
    shipped = installed.run("vectors", "where")
    assert shipped.returncode == 0, shipped.stderr
    rounds = json.loads(
        (Path(shipped.stdout.splitlines()[1]) / "model_rounds.json").read_text(encoding="utf-8")
    )
    predicted = sorted(
        f"model-{case['id']}"
        for case in rounds["cases"]
        if case["request"]["rollback"] == "snapshot"
        and _rolls_a_later_window_back_whole(case["request"]["script"])
    )
    assert predicted == sorted(_WHOLE_WINDOW_SCRIPTS + _THE_SHAPE_BUT_PASSING)
    reason = "llama.cpp's snapshot rollback of a whole window decoded after earlier tokens"
    deviations = tmp_path / "deviations.json"
    deviations.write_text(
        json.dumps(
            {
                "deviations": [
                    {"case": case, "reason": reason, "link": WHOLE_WINDOW_LINK}
                    for case in _WHOLE_WINDOW_SCRIPTS
                ]
            }
        ),
        encoding="utf-8",
    )
    report = tmp_path / "report.json"
    impl = operation.impl_cmd(llamacpp["adapter"], llamacpp["model"], "snapshot")
    result = operation.vectors_run(
        installed, impl, "--deviations", str(deviations), "--json", str(report)
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    outcomes = {case["id"]: case["outcome"] for case in _json(report)["cases"]}
    snapshot = {i: o for i, o in outcomes.items() if "-snapshot-" in i}
    assert sorted(i for i, o in snapshot.items() if o == "deviation") == list(_WHOLE_WINDOW_SCRIPTS)
    assert sorted(i for i, o in snapshot.items() if o == "passed") == sorted(
        set(snapshot) - set(_WHOLE_WINDOW_SCRIPTS)
    )
    assert len(snapshot) == 14
    assert {o for i, o in outcomes.items() if "-checkpoint-" in i} == {"skipped"}
