# SPDX-License-Identifier: MIT OR Apache-2.0
"""Python implementations by name (--impl-module), the adapter's command line, clause selection."""

from __future__ import annotations

import io
import shlex
import subprocess
import sys
import types
from pathlib import Path
from typing import Final

import pytest

from ssm_rollback_spec import argparse_mode, rollback
from ssm_rollback_spec.harness.adapter import main
from ssm_rollback_spec.harness.clauses import (
    CLAUSES,
    REPLAY_PROFILE_CLAUSES,
    UnknownClauseError,
    family,
    select_clauses,
)
from ssm_rollback_spec.harness.driver import InProcessDriver
from ssm_rollback_spec.harness.python_impl import (
    REFERENCE,
    REQUIRED_NAMES,
    ImplementationModuleError,
    PythonImplementation,
    fresh_module,
    load_python_implementation,
)
from tests.child import ROOT
from tests.fakes.wrong import WrongImplementation

MODULE: Final = "tests.harness.test_python_impl"


class CountedImplementation(WrongImplementation):
    """The reference, counting how many instances the harness makes."""

    made = 0

    def __init__(self) -> None:
        super().__init__()
        type(self).made += 1


class _WithoutCell:
    """The public names of ssm_rollback_spec.rollback, and no cell type."""

    def __getattr__(self, name: str) -> object:
        if name == "FirstWriteWins":
            raise AttributeError(name)
        return getattr(rollback, name)


#: An object (not a class, not a module) holding an implementation.
AN_OBJECT: Final = _WithoutCell()


def _refusal(import_path: str) -> str:
    with pytest.raises(ImplementationModuleError) as raised:
        load_python_implementation(import_path)
    return str(raised.value)


@pytest.mark.parametrize("path", ["", ":x", "a:", "a:b:c"])
def test_a_malformed_import_path_is_named(path: str) -> None:
    assert _refusal(path) == f"{path!r} is not MODULE or MODULE:ATTR"


def test_a_module_that_cannot_be_found_is_named_with_where_it_was_looked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", *sys.path])
    assert _refusal("no_such_module_at_all") == (
        "cannot import no_such_module_at_all: "
        "ModuleNotFoundError: No module named 'no_such_module_at_all' "
        f"(searched the current folder, {tmp_path}, then this Python's installed packages)"
    )
    monkeypatch.setattr(sys, "path", sys.path[1:])
    assert _refusal("no_such_module_at_all") == (
        "cannot import no_such_module_at_all: "
        "ModuleNotFoundError: No module named 'no_such_module_at_all' "
        f"(searched this Python's import path, which does not hold the current folder, {tmp_path})"
    )


def test_a_module_that_fails_to_import_is_named_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken_on_import.py").write_text("raise RuntimeError('no')\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _refusal("broken_on_import") == ("cannot import broken_on_import: RuntimeError: no")


def test_a_missing_attribute_is_named() -> None:
    assert _refusal(f"{MODULE}:Nothing") == f"module {MODULE} has no attribute 'Nothing'"


def test_missing_public_names_are_listed() -> None:
    assert _refusal("types") == (
        f"types lacks {', '.join(REQUIRED_NAMES)} (the public names of ssm_rollback_spec.rollback)"
    )
    partial = f"{MODULE}:Partial"
    assert _refusal(partial) == (
        f"{partial} lacks ssm_rollback_mode (the public names of ssm_rollback_spec.rollback)"
    )


class Partial(WrongImplementation):
    """Everything but the read of the published mode."""

    def __getattribute__(self, name: str) -> object:
        if name == "ssm_rollback_mode":
            raise AttributeError(name)
        return super().__getattribute__(name)


def test_a_module_is_fresh_when_executed_anew() -> None:
    loaded = load_python_implementation("ssm_rollback_spec.rollback")
    assert loaded.api is rollback
    assert loaded.import_path == "ssm_rollback_spec.rollback"
    assert loaded.new_cell is rollback.FirstWriteWins  # type: ignore[attr-defined]
    first, second = loaded.fresh(), loaded.fresh()
    assert first is not second
    assert first is not rollback
    replay = first.SsmRollbackMode.REPLAY
    assert first.set_ssm_rollback_mode(replay) is replay
    assert second.ssm_rollback_mode() is second.SsmRollbackMode.SNAPSHOT


def test_a_class_is_fresh_when_instantiated() -> None:
    loaded = load_python_implementation(f"{MODULE}:CountedImplementation")
    made = CountedImplementation.made
    fresh = loaded.fresh()
    assert isinstance(fresh, CountedImplementation)
    assert CountedImplementation.made == made + 1
    assert fresh is not loaded.api


def test_an_object_is_fresh_when_looked_up_in_a_fresh_copy_of_its_module() -> None:
    loaded = load_python_implementation(f"{MODULE}:AN_OBJECT")
    original: object = loaded.api
    assert original is AN_OBJECT
    assert loaded.new_cell is None
    fresh: object = loaded.fresh()
    assert fresh is not AN_OBJECT
    assert type(fresh).__name__ == "_WithoutCell"


def test_fresh_module_refuses_a_module_that_is_not_there() -> None:
    with pytest.raises(ImplementationModuleError) as raised:
        fresh_module("no_such_module_at_all")
    assert str(raised.value) == "cannot find module 'no_such_module_at_all'"
    assert isinstance(fresh_module("json"), types.ModuleType)


def test_only_trace_and_race_get_a_fresh_implementation() -> None:
    driver = InProcessDriver.load(f"{MODULE}:CountedImplementation")
    made = CountedImplementation.made
    assert driver.request({"op": "parse", "text": "replay"}) == {"ok": "replay"}
    assert driver.request({"op": "verify_entry", "mode": "snapshot"}) == {"ok": None}
    assert CountedImplementation.made == made
    assert driver.request({"op": "trace", "events": [{"op": "get"}]}) == {"ok": ["snapshot"]}
    assert driver.request({"op": "race", "events": [{"op": "get"}]}) == {"ok": ["snapshot"]}
    assert CountedImplementation.made == made + 2


def _serve_from(monkeypatch: pytest.MonkeyPatch, *arguments: str) -> tuple[int, bytes]:
    replies = io.BytesIO()
    stdin = io.TextIOWrapper(io.BytesIO(b'{"op": "parse", "text": "replay"}\n'))
    stdout = io.TextIOWrapper(replies)
    monkeypatch.setattr("sys.stdin", stdin)
    monkeypatch.setattr("sys.stdout", stdout)
    status = main(list(arguments))
    return status, replies.getvalue()


def test_the_adapter_refuses_a_module_it_cannot_serve_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _serve_from(monkeypatch, "--impl-module", "types") == (2, b"")
    assert capsys.readouterr().err == (
        "python -m ssm_rollback_spec.harness.adapter: error: --impl-module: "
        f"types lacks {', '.join(REQUIRED_NAMES)} "
        "(the public names of ssm_rollback_spec.rollback)\n"
    )


def test_the_adapter_serves_the_module_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    served = _serve_from(monkeypatch, "--impl-module", f"{MODULE}:CountedImplementation")
    assert served == (0, b'{"ok":"replay"}\n')


def test_the_adapter_says_what_it_takes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--help"])
    assert stopped.value.code == 0
    assert " ".join(capsys.readouterr().out.split()) == (
        "usage: python -m ssm_rollback_spec.harness.adapter [-h] [--impl-module MODULE[:ATTR]] "
        "Serve a Python implementation over the adapter protocol (docs/protocol.md). "
        "options: -h, --help show this help message and exit "
        "--impl-module MODULE[:ATTR] the implementation to serve "
        "(default ssm_rollback_spec.rollback)"
    )


# --- clause selection --------------------------------------------------------


def test_a_family_selects_every_clause_of_it() -> None:
    assert family("RB-SIZE-3") == "RB-SIZE"
    assert select_clauses(["RB-SIZE"]) == {"RB-SIZE-1", "RB-SIZE-2", "RB-SIZE-3"}
    assert select_clauses(["RB-SIZE-3", "RB-PY"]) == {"RB-SIZE-3", "RB-PY-1", "RB-PY-2", "RB-PY-3"}
    assert select_clauses([]) == frozenset()
    assert {c for c in CLAUSES if c.startswith("RB-REPLAY-")} == REPLAY_PROFILE_CLAUSES


@pytest.mark.parametrize("given", ["RB-SIZE-", "RB-SIZE-9", "rb-size-3", "SIZE", "RB"])
def test_anything_else_is_an_unknown_clause(given: str) -> None:
    with pytest.raises(UnknownClauseError) as raised:
        select_clauses([given])
    assert str(raised.value) == (
        f"unknown clause {given!r}: give an ID such as RB-SIZE-3 or a family "
        "(RB-MODE, RB-PARSE, RB-PUB, RB-CELL, RB-SIZE, RB-VERIFY, RB-PY, RB-PROTO, RB-REPLAY)"
    )


def test_the_argparse_mode_beside_the_implementation_is_found() -> None:
    loaded = load_python_implementation(REFERENCE)
    assert loaded.argparse_mode is argparse_mode


def test_a_module_with_nothing_beside_it_has_no_argparse_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "lonely_runtime"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    rollback_source = Path(rollback.__file__).read_text(encoding="utf-8")
    # The vendored copy, alone: its imports of its siblings made absolute.
    (package / "rollback.py").write_text(
        rollback_source.replace("from .", "from ssm_rollback_spec."), encoding="utf-8"
    )
    (tmp_path / "toplevel_rollback.py").write_text(
        rollback_source.replace("from .", "from ssm_rollback_spec."), encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_python_implementation("lonely_runtime.rollback").argparse_mode is None
    assert load_python_implementation("toplevel_rollback").argparse_mode is None


def test_an_argparse_mode_that_cannot_be_imported_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "broken_option_runtime"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "rollback.py").write_text(
        Path(rollback.__file__)
        .read_text(encoding="utf-8")
        .replace("from .", "from ssm_rollback_spec."),
        encoding="utf-8",
    )
    (package / "argparse_mode.py").write_text("raise RuntimeError('no')\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _refusal("broken_option_runtime.rollback") == (
        "cannot import broken_option_runtime.argparse_mode, beside broken_option_runtime.rollback: "
        "RuntimeError: no"
    )


@pytest.mark.parametrize(
    ("import_path", "expression", "printed"),
    [
        (REFERENCE, 'm.parse_ssm_rollback_mode("replay")', "<SsmRollbackMode.REPLAY: 'replay'>"),
        (f"{REFERENCE}:USIZE_MAX", "m", "18446744073709551615"),
        (
            "tests.fakes.wrong:WrongImplementation",
            "type(m).__name__",
            "'WrongImplementation'",
        ),
    ],
)
def test_a_reproduction_runs_and_prints_what_the_call_returns(
    import_path: str, expression: str, printed: str
) -> None:
    implementation = PythonImplementation(
        api=rollback,
        import_path=import_path,
        fresh=lambda: rollback,
        new_cell=None,
    )
    command = implementation.reproduction(expression)
    assert command.startswith("python -c '")
    finished = subprocess.run(
        [sys.executable, *shlex.split(command)[1:]],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout == f"{printed}\n"


def test_a_missing_module_with_an_empty_import_path_names_the_current_folder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An empty sys.path (python -I -c with nothing added) searches nothing but
    # what is already loaded; the message still names the folder it started in.
    monkeypatch.setattr(sys, "path", [])
    with pytest.raises(ImplementationModuleError) as raised:
        load_python_implementation("no_such_module_anywhere")
    assert str(raised.value) == (
        "cannot import no_such_module_anywhere: ModuleNotFoundError: "
        "No module named 'no_such_module_anywhere' "
        f"(searched the current folder, {Path.cwd()}, then this Python's installed packages)"
    )
