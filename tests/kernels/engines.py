# SPDX-License-Identifier: MIT OR Apache-2.0
"""The engine adapters as the kernels tier runs them: the registry's rows, and each one's command.

The tier's per-engine checks run over every row of ``adapters/engines/registry.py``,
so a new engine registered there is checked with no test edited. Each adapter
runs as ``python -m adapters.engines.NAME`` from the repository root, in the
kernels venv, through the tier's fork server (``adapters/engines/forkserver.py``).
A run that several tests judge, such as an engine's control build over the
replay corpus, is made once a run and read by each.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from adapters.engines.registry import ENGINES
from ssm_rollback_spec.harness.clauses import CLAUSES
from tests.child import ROOT, run_module
from tests.once import once_per_run

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

    import pytest

__all__ = [
    "DRAWN_BATCHES",
    "DRAWN_PROPERTIES",
    "ENGINES",
    "argv",
    "check_run",
    "command",
    "control_run",
    "corpus_of",
    "fork_server",
    "vectors_run",
]

#: The module every engine adapter is run as, by the registry's name.
_MODULE: Final = "adapters.engines.{}"
#: What runs an adapter through the fork server: ``python -m`` this, then the module.
_FORKED: Final = ("adapters.engines.forkserver", "run")
#: The flags of an adapter's control build, one off in the accepted count.
_CONTROL: Final = ("--control", "off-by-one")
#: The clauses its run is judged by (:func:`control_run`).
_CONTROL_CLAUSES: Final = tuple(
    clause for clause in CLAUSES if clause.startswith("RB-REPLAY-") and clause != "RB-REPLAY-13"
)


def argv(
    python: str, engine: str, /, *flags: str, environment: Mapping[str, str] | None = None
) -> list[str]:
    """The arguments that run ``engine``'s adapter with ``python``, from the repository root.

    ``environment`` is set for the adapter alone (``env NAME=VALUE ...``).
    """
    settings = [f"{name}={value}" for name, value in (environment or {}).items()]
    # Through the tier's fork server (tests/kernels/conftest.py), which runs
    # the adapter as a fork, or as a process of its own where none answers.
    module = [python, "-m", *_FORKED, _MODULE.format(engine)]
    return [*(["env", *settings] if settings else []), *module, *flags]


def command(
    python: str, engine: str, /, *flags: str, environment: Mapping[str, str] | None = None
) -> str:
    """:func:`argv` as one ``--impl-cmd`` string."""
    return shlex.join(argv(python, engine, *flags, environment=environment))


def vectors_run(
    report: Path,
    python: str,
    engine: str,
    /,
    *flags: str,
    clause: str = "RB-REPLAY",
    corpus: tuple[str, ...] = (),
    environment: Mapping[str, str] | None = None,
) -> tuple[int, dict[str, Any], str]:
    """``vectors run --clause CLAUSE`` over ``engine``'s adapter run with ``flags``.

    Returns its exit status, its ``--json`` report (written to ``report``) and
    its standard output; ``corpus`` are more arguments, such as ``--vectors``;
    ``environment`` is set for the adapter.
    """
    adapter = command(python, engine, *flags, environment=environment)
    arguments = ("vectors", "run", "--impl-cmd", adapter, *corpus, "--clause", clause)
    return _reported(report, arguments, 1800)


def _reported(
    report: Path, arguments: Sequence[str], timeout: int, /
) -> tuple[int, dict[str, Any], str]:
    """The command line's run of ``arguments`` with ``--json report``: status, report, output."""
    # A first replay imports torch and interprets the kernels: seconds, not the default 10.
    finished = run_module(
        "ssm_rollback_spec.tools.cli",
        *arguments,
        *("--impl-timeout", "900", "--json", str(report)),
        timeout=timeout,
    )
    assert "Traceback" not in finished.stdout + finished.stderr, finished.stderr
    assert report.exists(), finished.stderr
    return finished.returncode, json.loads(report.read_text(encoding="utf-8")), finished.stdout


def corpus_of(folder: Path, file: str, case_id: str, /) -> Path:
    """A copy of the shipped corpus, in ``folder``, whose replay ``file`` holds ``case_id`` alone.

    For ``vectors run --vectors``: one batch of the interpreter's time, where one is enough.
    """
    copy = folder / "one-batch"
    shutil.copytree(ROOT / "vectors", copy)
    path = copy / "replay" / file
    document = json.loads(path.read_text(encoding="utf-8"))
    document["cases"] = [case for case in document["cases"] if case["id"] == case_id]
    assert len(document["cases"]) == 1, f"{file} has no case {case_id}"
    path.write_text(json.dumps(document), encoding="utf-8")
    manifest_path = copy / "replay" / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    for entry in manifest["files"]:
        if entry["path"] == file:
            entry["cases"] = 1
            entry["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    return copy


#: check's drawn batch properties, the model's judge (RB-REPLAY-12) and the engine's own
#: (RB-REPLAY-13), by the words their names share (``check -k``).
DRAWN_BATCHES: Final = "drawn_batch"
#: The properties ``DRAWN_BATCHES`` selects, RB-REPLAY-12's and RB-REPLAY-13's.
DRAWN_PROPERTIES: Final = (
    "test_replay.py::test_each_sequence_of_a_drawn_batch_is_its_own_replay_alone",
    "test_replay.py::test_each_sequence_of_a_drawn_batch_is_what_the_same_adapter_gives_it_alone",
)


def check_run(
    report: Path,
    python: str,
    engine: str,
    /,
    *flags: str,
    select: str = DRAWN_BATCHES,
    environment: Mapping[str, str] | None = None,
) -> tuple[int, dict[str, Any], str]:
    """``check --profile interpreter -k SELECT`` over ``engine``'s adapter run with ``flags``.

    Returns its exit status, its ``--json`` report (written to ``report``) and
    its standard output; ``environment`` is set for the adapter.
    """
    adapter = command(python, engine, *flags, environment=environment)
    arguments = ("check", "--impl-cmd", adapter, "--profile", "interpreter", "-k", select)
    return _reported(report, (*arguments, "--clause", "RB-REPLAY"), 3600)


def control_run(
    tmp_path_factory: pytest.TempPathFactory, python: str, engine: str, /
) -> tuple[int, dict[str, Any], str]:
    """:func:`vectors_run` of ``engine``'s off-by-one control build, made once a run.

    The control's every case is judged by more than one test (its single
    rounds and, where the engine has one, its batches in the default cache
    mode), and each run of it costs the interpreter's time. Every replay
    clause but RB-REPLAY-13 judges it: that one judges the engine against
    itself, each sequence alone, and the control is one off alone as in
    a batch, so its cases pass it whatever the build.
    """

    def make(folder: Path, /) -> None:
        first, *more = _CONTROL_CLAUSES
        status, _, shown = vectors_run(
            folder / "report.json",
            python,
            engine,
            *_CONTROL,
            clause=first,
            corpus=tuple(flag for clause in more for flag in ("--clause", clause)),
        )
        (folder / "status").write_text(str(status), encoding="utf-8")
        (folder / "stdout").write_text(shown, encoding="utf-8")

    folder = once_per_run(tmp_path_factory, f"control-{engine}", make)
    return (
        int((folder / "status").read_text(encoding="utf-8")),
        json.loads((folder / "report.json").read_text(encoding="utf-8")),
        (folder / "stdout").read_text(encoding="utf-8"),
    )


#: How long a fork server may take to import what it preloads.
_SERVER_START_SECONDS: Final = 120


@contextlib.contextmanager
def fork_server(python: str, /) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``python``'s fork server (adapters/engines/forkserver.py) and its socket, once it listens.

    Killed, and its socket's folder removed, on leaving.
    """
    # A Unix socket's path has at most 107 bytes: a short folder of its own.
    folder = Path(tempfile.mkdtemp(prefix="ssm-forks-"))
    path = folder / "socket"
    server = subprocess.Popen(
        [python, "-m", "adapters.engines.forkserver", "serve", str(path)], cwd=ROOT
    )
    try:
        deadline = time.monotonic() + _SERVER_START_SECONDS
        while not path.exists():
            assert server.poll() is None, "the fork server exited before it listened"
            assert time.monotonic() < deadline, "the fork server did not listen in time"
            time.sleep(0.1)
        yield server, str(path)
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(folder, ignore_errors=True)
