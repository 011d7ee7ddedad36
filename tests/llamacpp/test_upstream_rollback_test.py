# SPDX-License-Identifier: MIT OR Apache-2.0
"""llama.cpp's own rollback test, built from the release's tree and run on the tier's model.

``tests/test-recurrent-state-rollback.cpp`` at the pinned commit checks two
fixed scenarios on one model: a rollback of 3 after a prompt of ``n_rs_seq +
1`` tokens, saved and restored into a fresh and a dirty context (exact
logits), and two sequences rolled back by 3 and replayed in one batch split
over ubatches (nmse within 1e-4). Both pass on the tier's Qwen3.5 model while
the tier's two findings stand: neither scenario decodes other sequences
between a rollback and the next decode of the rolled-back one, or rolls back
a whole window (docs/engines.md). The file sorts after the tier's other
checks, so their results come before this one's longer first build.
"""

from __future__ import annotations

import re
import subprocess
from typing import TYPE_CHECKING, Final

import pytest

from tests.llamacpp.engine import AdapterError, OwnTest, build_own_test

if TYPE_CHECKING:
    from tests.llamacpp.engine import Built

pytestmark = pytest.mark.llamacpp

#: The tiny model answers in seconds; the bound only keeps a hang from holding the tier.
_RUN_SECONDS: Final = 300
#: The lines the test logs when each scenario passes (its LOG_INF lines).
_ROLLBACK_PASSED: Final = "recurrent rollback checkpoint restored successfully"
_SPLIT_REPLAY_PASSED: Final = re.compile(
    r"multi-seq split replay matched \(max diff (\S+), nmse (\S+)\)"
)
_SEQ_ONE_ALONE: Final = "seq-1-only decode independent of seq 0"


@pytest.fixture(scope="module")
def own_test() -> OwnTest:
    """The pinned release's own rollback test (adapters/llama-cpp/build.py --own-test)."""
    try:
        return build_own_test()
    except AdapterError as error:
        pytest.fail(str(error), pytrace=False)


def test_llama_cpps_own_rollback_test_passes_on_the_tiers_qwen35_model(
    llamacpp: Built, own_test: OwnTest
) -> None:
    assert own_test["commit"] == llamacpp["commit"] == "0c1e57098"
    done = subprocess.run(
        [own_test["binary"], "-m", llamacpp["model"], "-t", "1"],
        capture_output=True,
        text=True,
        timeout=_RUN_SECONDS,
        check=False,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-2000:]
    # Each scenario ran (neither skipped) and passed, over both cache fills.
    assert said.count(_ROLLBACK_PASSED) == 2, said[-2000:]
    replays = _SPLIT_REPLAY_PASSED.findall(said)
    assert len(replays) == 2, said[-2000:]
    assert said.count(_SEQ_ONE_ALONE) == 2, said[-2000:]
    # Its split replay's logits match bit for bit here too, within its 1e-4 nmse.
    assert all(float(nmse) <= 1e-4 for _, nmse in replays)
