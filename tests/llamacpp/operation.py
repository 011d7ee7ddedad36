# SPDX-License-Identifier: MIT OR Apache-2.0
"""The protocol's ``model`` operation over llama.cpp, as the tier's tests drive it.

adapters/llama-cpp/model_adapter.py serves one ``llama-rollback`` binary (the
sdist build's or the prebuilt release's) and one model file; these helpers
ask it to describe itself, and run ``check --clause RB-REPLAY-14`` and
``vectors run --clause RB-REPLAY-14`` through it as users do: the built
wheel's command, installed in a fresh venv (tests/installed.py), run from a
folder that is not the clone.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from typing import TYPE_CHECKING, Any, Final

from tests.child import ROOT
from tests.installed import clean_environment

if TYPE_CHECKING:
    from collections.abc import Mapping

    from tests.installed import Installed

__all__ = ["MODEL_ADAPTER", "check", "describe", "impl_cmd", "vectors_run"]

#: The adapter that offers llama.cpp's rollback over the protocol's ``model`` operation.
MODEL_ADAPTER: Final = ROOT / "adapters" / "llama-cpp" / "model_adapter.py"
#: How long one ``check`` over a model may take.
_CHECK_SECONDS: Final = 900


def impl_cmd(binary: str, model: str, ways: str, /, *options: str) -> str:
    """The ``--impl-cmd`` that serves ``model`` through ``binary`` in ``ways``.

    ``options`` follow: ``--bound B``, ``--fault FAULT`` (model_adapter.py's docstring).
    """
    return shlex.join([sys.executable, str(MODEL_ADAPTER), binary, model, ways, *options])


def describe(binary: str, model: str, /, *options: str) -> dict[str, Any]:
    """The ``model`` member of the adapter's ``describe`` reply, given ``options``."""
    out = subprocess.run(
        [sys.executable, str(MODEL_ADAPTER), binary, model, *options],
        input='{"op":"describe"}\n',
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    member: dict[str, Any] = json.loads(out)["ok"]["model"]
    return member


#: A model reply decodes whole scripts through llama.cpp: on two loaded cores
#: (the tier runs on every core) one took past the default 10 s, and check
#: held the deviation for a hang in place of the rollback's difference.
_SLOW_REPLIES: Final = ("--impl-timeout", "120")


def _installed(
    installed: Installed, arguments: list[str], environment: Mapping[str, str] | None, /
) -> subprocess.CompletedProcess[str]:
    """The wheel's command, from its venv, in a folder that is not the clone."""
    return subprocess.run(
        [str(installed.command), *arguments],
        cwd=installed.elsewhere,
        capture_output=True,
        text=True,
        timeout=_CHECK_SECONDS,
        check=False,
        env={
            **clean_environment(),
            **installed.hypothesis_storage,
            "CI": "1",
            **(environment or {}),
        },
    )


def check(
    installed: Installed,
    impl: str,
    /,
    *extra: str,
    environment: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """The installed wheel's ``check --clause RB-REPLAY-14`` over ``impl``, as CI runs it.

    ``CI`` is set (the ``ci`` profile); ``environment`` is added to what the run is given.
    """
    arguments = ["check", "--impl-cmd", impl, "--clause", "RB-REPLAY-14", *_SLOW_REPLIES, *extra]
    return _installed(installed, arguments, environment)


def vectors_run(
    installed: Installed, impl: str, /, *extra: str, environment: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The installed wheel's ``vectors run --clause RB-REPLAY-14`` (round scripts) over ``impl``."""
    arguments = ["vectors", "run", "--impl-cmd", impl, "--clause", "RB-REPLAY-14", *_SLOW_REPLIES]
    arguments += extra
    return _installed(installed, arguments, environment)
