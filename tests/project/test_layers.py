# SPDX-License-Identifier: MIT OR Apache-2.0
"""The package's floors: imports only go down, and the contract vendors under any name."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING, Final

import pytest

from tests.child import ROOT, run_module

if TYPE_CHECKING:
    from pathlib import Path

SPEC: Final = ROOT / "spec"

#: The name the wheel installs the repository's spec/ under.
PACKAGE: Final = "ssm_rollback_spec"

#: The contract floor: what a runtime vendors, standard library only.
CONTRACT: Final = ("__init__.py", "py.typed", "first_write_wins.py", "rollback.py", "model.py")
VENDORED: Final = (*CONTRACT, "argparse_mode.py")

# Within the tools, the command line calls the commands, which call helpers.
COMMANDS: Final = {
    "ssm_rollback_spec.tools.check",
    "ssm_rollback_spec.tools.vectors",
    "ssm_rollback_spec.tools.size",
}
# The only modules allowed a third-party import, and which.
THIRD_PARTY: Final = {
    "ssm_rollback_spec.harness.pytest_plugin": {"pytest", "hypothesis"},
    "ssm_rollback_spec.harness.outcome_recorder": {"pytest"},
    # The optional plot extra, imported inside the plot function only.
    "ssm_rollback_spec.sizing.plot": {"matplotlib"},
    # The draft replay model (the replay extra); its row sizes,
    # ssm_rollback_spec.replay_rows, are standard library on the contract's
    # floor, so size can report its figures without numpy.
    "ssm_rollback_spec.replay.portable": {"numpy"},
    "ssm_rollback_spec.replay.activations": {"numpy"},
    "ssm_rollback_spec.replay.layer": {"numpy"},
    "ssm_rollback_spec.replay.paths": {"numpy"},
    "ssm_rollback_spec.replay.rounds": {"numpy"},
    "ssm_rollback_spec.replay.decoders": {"numpy"},
    "ssm_rollback_spec.replay.designs.seed_row": {"numpy"},
    "ssm_rollback_spec.replay.designs.minimal_pre_conv": {"numpy"},
    "ssm_rollback_spec.replay.designs.replayssm": {"numpy"},
    "ssm_rollback_spec.replay.designs.post_conv": {"numpy"},
    "ssm_rollback_spec.replay.designs.sglang": {"numpy"},
    "ssm_rollback_spec.replay.cases": {"numpy"},
    "ssm_rollback_spec.replay.batch": {"numpy"},
    "ssm_rollback_spec.corpus.replay_format": {"numpy"},
    "ssm_rollback_spec.corpus.replay_draws": {"numpy"},
    "ssm_rollback_spec.corpus.replay_decodes": {"numpy"},
    "ssm_rollback_spec.corpus.replay_batches": {"numpy"},
}
# The replay corpus's generator (its entry, what it draws from, its single
# windows, its decodes, its batches and its refusals) and its format, read back into the
# model: numpy.
REPLAY_CORPUS: Final = {
    "ssm_rollback_spec.corpus.replay_cases",
    "ssm_rollback_spec.corpus.replay_draws",
    "ssm_rollback_spec.corpus.replay_windows",
    "ssm_rollback_spec.corpus.replay_decodes",
    "ssm_rollback_spec.corpus.replay_batches",
    "ssm_rollback_spec.corpus.replay_refusals",
    "ssm_rollback_spec.corpus.replay_format",
}
# Nothing leans on the numpy modules but the replay model itself and the
# replay corpus's generator; replay_rows (standard library) the size command may use.
REPLAY_NUMPY: Final = {
    name for name, imported in THIRD_PARTY.items() if "numpy" in imported
} | REPLAY_CORPUS
# `vectors generate` writes the replay corpus too: it imports the generator
# inside the command, so running or loading a corpus never needs numpy.
REPLAY_GENERATORS: Final = {
    "ssm_rollback_spec.tools.vectors": {"ssm_rollback_spec.corpus.replay_cases"},
    **dict.fromkeys(REPLAY_CORPUS, REPLAY_NUMPY),
}
# The oracle and the implementation must not lean on each other.
INDEPENDENT: Final = {
    ("ssm_rollback_spec.model", "ssm_rollback_spec.rollback"),
    ("ssm_rollback_spec.rollback", "ssm_rollback_spec.model"),
}
#: The floors, bottom up; a module's floor is its longest matching prefix.
#: ssm_rollback_spec.releases (the engine releases, standard library only)
#: sits on the contract's floor so that sizing, the adapters and the tiers
#: read one version without reaching into sizing; no vendored file imports it.
FLOORS: Final = (
    ("ssm_rollback_spec", 1),
    ("ssm_rollback_spec.harness", 2),
    ("ssm_rollback_spec.sizing", 2),
    ("ssm_rollback_spec.replay", 2),
    ("ssm_rollback_spec.corpus", 3),
    # The results page reads the tools' reports; it stands beside the corpus.
    ("ssm_rollback_spec.results", 3),
    ("ssm_rollback_spec.tools", 4),
)


def _module_name(path: Path) -> str:
    relative = path.relative_to(SPEC)
    parts = [PACKAGE, *(relative.with_suffix("") if relative.suffix else relative).parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _floor(module: str) -> int:
    matching = [
        (len(prefix), floor)
        for prefix, floor in FLOORS
        if module == prefix or module.startswith(prefix + ".")
    ]
    return max(matching)[1]


#: The corpus's one file engine: no module outside the corpus floor reads or
#: writes a case file.
CORPUS_ENGINE: Final = "ssm_rollback_spec.corpus.files"
#: The tools' share of the package's lines: a thin command line. (1900 with
#: report, --require-race and size cut to parsing and printing; 2193 with the
#: preflight, 136 lines, moved in from the harness, where no flag is named, and
#: size's launch flags, one-line flag errors and the JSON's record of every flag;
#: 2555 with serve-check's flags and printing, and the protocol-version preflight.)
TOOLS_LINES_AT_MOST: Final = 2600


def _side(module: str) -> str | None:
    # The floor-2 packages stand side by side and never lean on each other.
    for side in (
        "ssm_rollback_spec.harness",
        "ssm_rollback_spec.sizing",
        "ssm_rollback_spec.replay",
    ):
        if module.startswith(side):
            return side
    return None


MODULES: Final = sorted(
    path for path in SPEC.rglob("*.py") if "suite" not in path.relative_to(SPEC).parts
)


def _imports(path: Path) -> tuple[set[str], set[str], bool]:
    """The package modules ``path`` imports, the top-level others, and whether any is absolute."""
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path.parent)
    ours, others, absolute = set(), set(), False
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
            absolute |= any(name.split(".")[0] in {"spec", PACKAGE} for name in names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
                absolute |= module.split(".")[0] in {"spec", PACKAGE}
            names = [module, *(f"{module}.{alias.name}" for alias in node.names)]
        for name in names:
            if name.split(".")[0] == PACKAGE:
                ours.add(name)
            elif name.split(".")[0] not in sys.stdlib_module_names and name != "__future__":
                others.add(name.split(".")[0])
    known = {_module_name(p) for p in MODULES}
    return {name for name in ours if name in known}, others, absolute


def test_every_module_declares_its_public_names() -> None:
    for path in MODULES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assigned = {
            target.id
            for node in tree.body
            if isinstance(node, (ast.Assign, ast.AnnAssign))
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(target, ast.Name)
        }
        assert "__all__" in assigned, f"{_module_name(path)} has no __all__"
        assert path.read_text(encoding="utf-8").startswith("# SPDX-License-Identifier: ")


@pytest.mark.parametrize("path", MODULES, ids=_module_name)
def test_imports_only_go_down(path: Path) -> None:
    module = _module_name(path)
    ours, others, absolute = _imports(path)
    for imported in ours - {module, PACKAGE}:
        assert _floor(imported) <= _floor(module), f"{module} imports {imported} from above"
        if _floor(imported) == _floor(module) == 2:
            assert _side(imported) == _side(module), f"{module} imports {imported} beside it"
        assert (module, imported) not in INDEPENDENT, f"{module} must not import {imported}"
        if imported in COMMANDS or imported == "ssm_rollback_spec.tools.cli":
            # Nothing calls up into a command but the command line itself.
            assert module == "ssm_rollback_spec.tools.cli", f"{module} calls up into {imported}"
    assert others <= THIRD_PARTY.get(module, set()), f"{module} imports {others}"
    if not module.startswith("ssm_rollback_spec.replay"):
        leaned = ours & REPLAY_NUMPY - REPLAY_GENERATORS.get(module, set())
        assert not leaned, f"{module} imports the numpy replay model"
    # Relative, so the contract vendors under any name, and the rest works
    # from the clone and from the wheel alike.
    assert not absolute, f"{module} imports the package by name"


@pytest.mark.parametrize("path", MODULES, ids=_module_name)
def test_only_the_corpus_floor_reads_or_writes_a_case_file(path: Path) -> None:
    module = _module_name(path)
    ours, _, _ = _imports(path)
    if not module.startswith("ssm_rollback_spec.corpus"):
        assert CORPUS_ENGINE not in ours, f"{module} reads or writes case files"
        reached = ours - REPLAY_GENERATORS.get(module, set())
        assert not any(name.startswith("ssm_rollback_spec.corpus.") for name in reached), (
            f"{module} reaches into the corpus floor past its package API"
        )


def test_the_tools_are_a_thin_command_line() -> None:
    lines = sum(
        len(path.read_text(encoding="utf-8").splitlines()) for path in (SPEC / "tools").glob("*.py")
    )
    assert lines <= TOOLS_LINES_AT_MOST, f"spec/tools/ has {lines} lines"


def _named_imports(node: ast.AST, /) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and not node.level:
        return [node.module or ""]
    return []


def test_nothing_imports_the_package_by_the_folder_name() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for folder in ("spec", "tests", "benchmarks", "adapters")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, (ast.Import, ast.ImportFrom))
        and any(name.split(".")[0] == "spec" for name in _named_imports(node))
    ]
    assert offenders == []


def _vendor(tmp_path: Path) -> Path:
    vendored = tmp_path / "host_runtime" / "_vendor" / "rollback_spec"
    vendored.mkdir(parents=True)
    for package in (tmp_path / "host_runtime", tmp_path / "host_runtime" / "_vendor"):
        (package / "__init__.py").write_text("", encoding="utf-8")
    for name in VENDORED:
        shutil.copy2(SPEC / name, vendored / name)
    return vendored


def test_the_contract_floor_vendors_under_another_name_on_the_bare_standard_library(
    tmp_path: Path,
) -> None:
    _vendor(tmp_path)
    probe = (
        "import sys\n"
        "from host_runtime._vendor.rollback_spec import rollback as r, model as m\n"
        "from host_runtime._vendor.rollback_spec import argparse_mode as a\n"
        "assert r.parse_ssm_rollback_mode('replay') is r.SsmRollbackMode.REPLAY\n"
        "assert r.set_ssm_rollback_mode(r.SsmRollbackMode.REPLAY).value == 'replay'\n"
        "assert r.ssm_replay_ring_bytes(36, 24832, 4, 2) == m.ring_bytes(36, 24832, 4, 2)\n"
        "import argparse; p = argparse.ArgumentParser(); a.add_ssm_rollback_mode_argument(p)\n"
        "assert p.parse_args([]).ssm_rollback_mode is r.SsmRollbackMode.SNAPSHOT\n"
        "print(sorted(n for n in sys.modules if n.startswith(('spec', 'host_runtime'))))\n"
    )
    # -S -E -s: no site-packages, no environment, no user site, so only the
    # standard library and the copied folder can be imported.
    finished = subprocess.run(
        [sys.executable, "-S", "-E", "-s", "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    copy = "host_runtime._vendor.rollback_spec"
    assert finished.stdout.strip() == str(
        [
            "host_runtime",
            "host_runtime._vendor",
            copy,
            f"{copy}.argparse_mode",
            f"{copy}.first_write_wins",
            f"{copy}.model",
            f"{copy}.rollback",
        ]
    )


@pytest.mark.slow
def test_the_whole_property_suite_passes_against_a_vendored_copy(tmp_path: Path) -> None:
    """Every property, in a pytest run of its own, against the floor copied under a new name.

    With the long runs, to keep the everyday suite short: a whole suite in a child process. The
    everyday suite keeps the same behaviour cheaper: the copy imports alone on
    the bare standard library and answers under its new name
    (test_the_contract_floor_vendors_under_another_name_on_the_bare_standard_library
    above), and ``check --impl-module`` passes a vendored copy's RB-PARSE
    properties and its option from the folder that holds it
    (tests/scenarios/test_first_hour.py,
    test_a_vendored_copy_is_checked_from_the_folder_that_holds_it).
    """
    _vendor(tmp_path)
    copy = "host_runtime._vendor.rollback_spec.rollback"
    finished = run_module(
        "pytest",
        "tests/properties",
        "-q",
        "-p",
        "no:cacheprovider",
        "--impl-module",
        copy,
        "-rs",
        env={"PYTHONPATH": str(tmp_path)},
        # Few examples: what is judged is that every property runs against
        # the copy under its new name, not the contract's arithmetic again.
        profile="interpreter",
    )
    summary = finished.stdout.strip().splitlines()[-1]
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-2000:]
    # Python-API clauses included: only the opt-in replay and model properties
    # skip, as the contract has no replay kernel and loads no model.
    reasons = [line for line in finished.stdout.splitlines() if line.startswith("SKIPPED")]
    assert reasons, summary
    opt_in = {
        ": replay is opt-in, and this implementation does not offer it": "test_replay.py",
        ": replay_batch is opt-in, and this implementation does not offer it": "test_replay.py",
        ": model is opt-in, and this implementation's describe names no model": "test_model.py",
    }
    assert all(
        any(line.endswith(reason) and module in line for reason, module in opt_in.items())
        for line in reasons
    ), reasons
    assert " passed" in summary, summary


#: The most lines one module of the package or of the adapters may have.
MODULE_LINES_AT_MOST: Final = 600


def test_no_module_of_the_package_or_the_adapters_is_past_600_lines() -> None:
    modules = [*SPEC.rglob("*.py"), *(ROOT / "adapters").rglob("*.py")]
    long = {
        str(path.relative_to(ROOT)): lines
        for path in modules
        if "target" not in path.relative_to(ROOT).parts
        and (lines := len(path.read_text(encoding="utf-8").splitlines())) > MODULE_LINES_AT_MOST
    }
    assert len(modules) > 100
    assert long == {}
