# SPDX-License-Identifier: MIT OR Apache-2.0
"""Replay mode boots, but refuses every speculative verify."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from .conformance import exchange

if TYPE_CHECKING:
    from ssm_rollback_spec.harness.driver import Implementation
    from ssm_rollback_spec.harness.python_impl import PythonImplementation


@pytest.mark.clause("RB-VERIFY-1")
def test_a_verify_may_enter_in_snapshot_mode(impl: Implementation) -> None:
    assert exchange(impl, {"op": "verify_entry", "mode": "snapshot"}) == {"ok": None}


@pytest.mark.clause("RB-VERIFY-2")
def test_every_verify_in_replay_mode_is_refused(impl: Implementation) -> None:
    for _ in range(3):
        reply = exchange(impl, {"op": "verify_entry", "mode": "replay"})
        assert reply["error"]["kind"] == "unsupported"  # type: ignore[index]


@pytest.mark.clause("RB-VERIFY-2", "RB-PUB-1")
def test_replay_mode_boots_then_refuses(python_api: PythonImplementation) -> None:
    api = python_api.fresh()
    modes = api.SsmRollbackMode
    published = api.set_ssm_rollback_mode(modes.REPLAY)
    assert published is modes.REPLAY
    with pytest.raises(api.VerifyRollbackUnsupportedError) as refused:
        api.require_verify_rollback_supported(api.ssm_rollback_mode())
    assert getattr(refused.value, "mode", None) is modes.REPLAY
    assert str(refused.value) == (
        "speculative verify refused: ssm-rollback-mode 'replay' "
        "has no capture or replay implementation"
    )
    api.require_verify_rollback_supported(modes.SNAPSHOT)
