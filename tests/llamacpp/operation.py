# SPDX-License-Identifier: MIT OR Apache-2.0
"""The protocol's ``model`` operation over llama.cpp, as the tier's tests drive it.

adapters/llama-cpp/model_adapter.py serves one ``llama-rollback`` binary (the
sdist build's or the prebuilt release's) and one model file; these helpers
ask it to describe itself and run the installed ``check --clause
RB-REPLAY-14`` through it.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from tests.child import ROOT

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["MODEL_ADAPTER", "check", "describe", "impl_cmd"]

#: The adapter that offers llama.cpp's rollback over the protocol's ``model`` operation.
MODEL_ADAPTER: Final = ROOT / "adapters" / "llama-cpp" / "model_adapter.py"
#: How long one ``check`` over a model may take.
_CHECK_SECONDS: Final = 900


def impl_cmd(binary: str, model: str, ways: str, /) -> str:
    """The ``--impl-cmd`` that serves ``model`` through ``binary`` in ``ways``."""
    return shlex.join([sys.executable, str(MODEL_ADAPTER), binary, model, ways])


def describe(binary: str, model: str, /) -> dict[str, Any]:
    """The ``model`` member of the adapter's ``describe`` reply."""
    out = subprocess.run(
        [sys.executable, str(MODEL_ADAPTER), binary, model],
        input='{"op":"describe"}\n',
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    member: dict[str, Any] = json.loads(out)["ok"]["model"]
    return member


def check(
    impl: str, /, *extra: str, environment: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The installed ``check --clause RB-REPLAY-14`` over ``impl``, as CI runs it.

    ``environment`` is added to the few variables the run is given.
    """
    command = shutil.which("ssm-rollback-spec")
    assert command is not None, "ssm-rollback-spec is not installed"
    return subprocess.run(
        [command, "check", "--impl-cmd", impl, "--clause", "RB-REPLAY-14", *extra],
        capture_output=True,
        text=True,
        timeout=_CHECK_SECONDS,
        check=False,
        env={
            "CI": "1",
            "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin",
            **(environment or {}),
        },
    )
