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

#: The contract floor: what a runtime vendors, standard library only.
CONTRACT: Final = ("__init__.py", "py.typed", "first_write_wins.py", "rollback.py", "model.py")
VENDORED: Final = (*CONTRACT, "argparse_mode.py")

# Within the tools, the command line calls the commands, which call helpers.
COMMANDS: Final = {"spec.tools.check", "spec.tools.vectors", "spec.tools.size"}
# The only modules allowed a third-party import, and which.
THIRD_PARTY: Final = {
    "spec.harness.pytest_plugin": {"pytest", "hypothesis"},
    "spec.tools.check_report": {"pytest"},
    # The optional plot extra, imported inside the plot function only.
    "spec.tools.plot": {"matplotlib"},
    # The draft replay model (the replay extra); spec.replay.rows stays
    # standard library, so size can report its figures without numpy.
    "spec.replay.portable": {"numpy"},
    "spec.replay.layer": {"numpy"},
    "spec.replay.paths": {"numpy"},
    "spec.replay.rounds": {"numpy"},
    "spec.replay.cases": {"numpy"},
    "spec.replay.vectors": {"numpy"},
}
# Nothing in the contract, the harness or the tools leans on the draft model,
# except rows (standard library), which the size command may report.
REPLAY_NUMPY: Final = {
    "spec.replay.portable",
    "spec.replay.layer",
    "spec.replay.paths",
    "spec.replay.rounds",
    "spec.replay.cases",
    "spec.replay.vectors",
}
# The oracle and the implementation must not lean on each other.
INDEPENDENT: Final = {("spec.model", "spec.rollback"), ("spec.rollback", "spec.model")}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _floor(module: str) -> int:
    if module.startswith("spec.tools"):
        return 3
    # The sizing floor sits beside the harness: above the contract, below the tools.
    if module.startswith(("spec.harness", "spec.sizing")):
        return 2
    return 1


def _side(module: str) -> str | None:
    # The two floor-2 packages stand side by side and never lean on each other.
    for side in ("spec.harness", "spec.sizing"):
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
            absolute |= any(name.split(".")[0] == "spec" for name in names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
                absolute |= module.split(".")[0] == "spec"
            names = [module, *(f"{module}.{alias.name}" for alias in node.names)]
        for name in names:
            if name.split(".")[0] == "spec":
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
    for imported in ours - {module, "spec"}:
        assert _floor(imported) <= _floor(module), f"{module} imports {imported} from above"
        if _floor(imported) == _floor(module) == 2:
            assert _side(imported) == _side(module), f"{module} imports {imported} beside it"
        assert (module, imported) not in INDEPENDENT, f"{module} must not import {imported}"
        if imported in COMMANDS or imported == "spec.tools.cli":
            # Nothing calls up into a command but the command line itself.
            assert module == "spec.tools.cli", f"{module} calls up into {imported}"
    assert others <= THIRD_PARTY.get(module, set()), f"{module} imports {others}"
    if not module.startswith("spec.replay"):
        assert not ours & REPLAY_NUMPY, f"{module} imports the numpy replay model"
        if _floor(module) == 1:
            assert "spec.replay.rows" not in ours, f"the contract {module} imports spec.replay"
    if _floor(module) == 1 or module.startswith("spec.sizing"):
        # Relative, so the floor works under whatever name a runtime gives it.
        assert not absolute, f"{module} imports the package by name"


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


def test_the_whole_property_suite_passes_against_a_vendored_copy(tmp_path: Path) -> None:
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
        env={"PYTHONPATH": str(tmp_path)},
    )
    summary = finished.stdout.strip().splitlines()[-1]
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-2000:]
    # Python-API clauses included: nothing skips for a Python implementation.
    assert "skipped" not in summary, summary
    assert " passed" in summary, summary
