# SPDX-License-Identifier: MIT OR Apache-2.0
"""llama.cpp's recurrent rollback at the model level, both ways, and the self-test's wrong ones."""

from __future__ import annotations

import importlib.util
import re

import pytest

from tests.llamacpp.engine import BUILD_SCRIPT, Arch, Built, Engine, Fault, OwnTest, Way
from tests.llamacpp.machine import (
    BOUND,
    N_RS_SEQ,
    N_SEQ,
    Calls,
    Judged,
    rounds_machine,
    run_rounds,
    worst_kept_difference,
)

pytestmark = pytest.mark.llamacpp


#: The shrunk case of the snapshot way's failure with several sequences
#: (docs/engines-llama-cpp.md, "What the suite finds in llama.cpp 0c1e57098"): sequence 0
#: decodes a token; sequences 2, 0 and 1 decode windows of 2, 1 and 1 tokens in
#: one llama_decode; sequence 2 rolls back 1 token (llama_memory_seq_rm says
#: yes); sequence 2 decodes one more token.
DEVIATION_ROUNDS: Calls = (
    ({0: [0]}, {}),
    ({2: [0, 0], 0: [0], 1: [0]}, {2: 1}),
    ({2: [2]}, {}),
)
#: Where llama.cpp's tracker would take the finding (the closest open report).
DEVIATION_LINK = "https://github.com/ggml-org/llama.cpp/issues/28019"
#: The shrunk case of the snapshot way's failure past the window (#26695's
#: case; docs/engines-llama-cpp.md), as the machine shrank it with ``whole_window=True``
#: on one slot: sequence 0 decodes a token, then a window of one more, rolls
#: that whole window back (llama_memory_seq_rm says yes) and decodes a token.
#: The rollback asks for a snapshot plane the last decode did not write
#: (src/models/delta-net-base.cpp 587-603).
WHOLE_WINDOW_ROUNDS: Calls = (
    ({0: [0]}, {}),
    ({0: [0]}, {0: 1}),
    ({0: [0]}, {}),
)
#: llama.cpp's report of it (closed; the fix it points to, #25004, is not merged at 0c1e57098).
WHOLE_WINDOW_LINK = "https://github.com/ggml-org/llama.cpp/issues/26695"


def test_the_build_names_the_release_its_commit_and_licence(llamacpp: Built) -> None:
    assert llamacpp["version"] == "0.3.36"
    assert llamacpp["commit"] == "0c1e57098"
    assert llamacpp["licence"] == "MIT License"
    with Engine(llamacpp, n_seq=N_SEQ, n_rs_seq=N_RS_SEQ, way=Way.SNAPSHOT) as engine:
        described = engine.describe()
    assert described["commit"] == "0c1e57098"
    assert (described["arch"], described["n_seq"], described["n_rs_seq"]) == ("qwen35", 3, 4)


def test_checkpoint_rollback_keeps_the_logits_of_decoding_only_the_kept_tokens(
    llamacpp: Built,
) -> None:
    # Several sequences in one llama_decode, any window, any rollback up to
    # the whole window, sequences finishing and replaced.
    judged = Judged()
    run_rounds(rounds_machine(llamacpp, Way.CHECKPOINT, whole_window=True, judged=judged))
    assert judged.tokens > 0
    assert judged.largest <= BOUND


def test_qwen3_next_checkpoint_rollback_keeps_the_logits_of_decoding_only_the_kept_tokens(
    llamacpp: Built,
) -> None:
    # Qwen3-Next has no snapshots in llama.cpp: the server's whole-state
    # checkpoints are its only rollback, judged as for Qwen3.5.
    judged = Judged()
    machine = rounds_machine(
        llamacpp, Way.CHECKPOINT, arch=Arch.QWEN3NEXT, whole_window=True, judged=judged
    )
    run_rounds(machine)
    assert judged.tokens > 0
    assert judged.largest <= BOUND


def test_llama_cpp_gives_qwen3_next_no_snapshot_rollback(llamacpp: Built) -> None:
    # llm_arch_supports_rs_rollback leaves Qwen3-Next out, so the context's
    # n_rs_seq is clamped to 0 and a partial rollback is refused.
    with Engine(
        llamacpp, n_seq=N_SEQ, n_rs_seq=N_RS_SEQ, way=Way.SNAPSHOT, arch=Arch.QWEN3NEXT
    ) as engine:
        described = engine.describe()
        engine.decode({0: [1, 2, 3]})
        refused = engine.rollback(0, 1)
    assert (described["arch"], described["n_rs_seq"]) == ("qwen3next", 0)
    assert not refused


def test_snapshot_rollback_of_one_sequence_keeps_the_logits_of_decoding_only_the_kept_tokens(
    llamacpp: Built,
) -> None:
    # One sequence at a time, finishing and replaced, rolled back within its
    # last window (at least one token kept), as the server's verify does.
    judged = Judged()
    run_rounds(rounds_machine(llamacpp, Way.SNAPSHOT, slots=1, judged=judged))
    assert judged.tokens > 0
    assert judged.largest <= BOUND


@pytest.mark.parametrize(
    ("rounds", "link"),
    [
        # Turns red the day llama.cpp restores the right state beside other sequences.
        pytest.param(DEVIATION_ROUNDS, DEVIATION_LINK, id="beside_other_sequences"),
        # One sequence alone. Turns red the day llama.cpp restores the state
        # before the window, or refuses the rollback.
        pytest.param(WHOLE_WINDOW_ROUNDS, WHOLE_WINDOW_LINK, id="whole_window"),
    ],
)
def test_snapshot_rollback_is_a_deviation_of_the_released_llama_cpp(
    llamacpp: Built, rounds: Calls, link: str
) -> None:
    # reproduce: python -m pytest -m llamacpp tests/llamacpp -k beside_other_sequences
    # reproduce: python -m pytest -m llamacpp tests/llamacpp -k whole_window
    # The checkpoint way, on the same calls, is exact.
    differences = {way: worst_kept_difference(llamacpp, way, rounds) for way in Way}
    assert differences[Way.CHECKPOINT] <= BOUND
    assert differences[Way.SNAPSHOT] > 1e-3, f"fixed upstream? see {link}"


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
def test_the_property_rejects_a_wrong_rollback_with_the_same_model_and_bound(
    llamacpp: Built, arch: Arch, way: Way, fault: Fault
) -> None:
    slots = 1 if way is Way.SNAPSHOT else N_SEQ
    machine = rounds_machine(
        llamacpp, way, fault=fault, arch=arch, slots=slots, whole_window=way is Way.CHECKPOINT
    )
    with pytest.raises(AssertionError, match=re.escape("from decoding only the kept tokens")):
        run_rounds(machine, find_only=True)


def test_the_tiers_reading_of_built_json_is_the_build_scripts_own() -> None:
    # build.py stands alone (its folder is no package), so the tier declares
    # the files' types again (built.json, own-test.json); this keeps each
    # pair of declarations one format.
    spec = importlib.util.spec_from_file_location("llamacpp_build", BUILD_SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    for theirs_type, ours_type in ((script.Built, Built), (script.OwnTest, OwnTest)):
        theirs = {name: hint.__forward_arg__ for name, hint in theirs_type.__annotations__.items()}
        ours = {name: hint.__forward_arg__ for name, hint in ours_type.__annotations__.items()}
        assert theirs == ours
