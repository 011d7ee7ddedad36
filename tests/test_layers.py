# SPDX-License-Identifier: MIT OR Apache-2.0
"""The package's floors: imports only go down, and the contract vendors alone."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

ROOT: Final = Path(__file__).resolve().parents[1]
SPEC: Final = ROOT / "spec"

CONTRACT: Final = {"spec", "spec.first_write_wins", "spec.rollback", "spec.model"}
HARNESS: Final = {
    "spec.protocol",
    "spec.adapter",
    "spec.driver",
    "spec.subprocess_driver",
    "spec.oracle",
}
TOOLS: Final = {
    "spec.cli",
    "spec.check_report",
    "spec.vectors",
    "spec.sizing",
    "spec.argparse_mode",
}
FLOOR: Final = {
    **dict.fromkeys(CONTRACT, 1),
    **dict.fromkeys(HARNESS, 2),
    **dict.fromkeys(TOOLS, 3),
}
# The oracle and the implementation must not lean on each other.
INDEPENDENT: Final = {("spec.model", "spec.rollback"), ("spec.rollback", "spec.model")}


def _module_name(path: Path) -> str:
    return "spec" if path.name == "__init__.py" else f"spec.{path.stem}"


def _spec_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name in FLOOR}


def test_every_module_has_a_floor() -> None:
    assert {_module_name(path) for path in SPEC.glob("*.py")} == set(FLOOR)


@pytest.mark.parametrize("path", sorted(SPEC.glob("*.py")), ids=lambda path: path.name)
def test_imports_only_go_down(path: Path) -> None:
    module = _module_name(path)
    for imported in _spec_imports(path) - {module, "spec"}:
        assert FLOOR[imported] <= FLOOR[module], (
            f"{module} (floor {FLOOR[module]}) imports {imported}"
        )
        assert (module, imported) not in INDEPENDENT, f"{module} must not import {imported}"
        # Tools sit on top: nothing but the command line calls up into them.
        if imported in TOOLS:
            assert module == "spec.cli", f"{module} calls up into the tool {imported}"


def test_the_contract_floor_works_copied_alone_with_the_standard_library(tmp_path: Path) -> None:
    vendored = tmp_path / "vendor" / "spec"
    vendored.mkdir(parents=True)
    for name in ("__init__.py", "py.typed", "first_write_wins.py", "rollback.py", "model.py"):
        shutil.copy2(SPEC / name, vendored / name)
    probe = (
        f"import sys; sys.path.insert(0, {str(vendored.parent)!r})\n"
        "import spec.rollback as r, spec.model as m\n"
        f"assert r.__file__.startswith({str(vendored)!r}), r.__file__\n"
        "assert r.parse_ssm_rollback_mode('replay') is r.SsmRollbackMode.REPLAY\n"
        "assert r.set_ssm_rollback_mode(r.SsmRollbackMode.REPLAY).value == 'replay'\n"
        "assert r.ssm_replay_ring_bytes(36, 24832, 4, 2) == m.ring_bytes(36, 24832, 4, 2)\n"
        "import sys; print(sorted(n for n in sys.modules if n.startswith('spec')))\n"
    )
    # -S -E -s: no site-packages, no environment, no user site, so only the
    # standard library and the copied folder can be imported.
    finished = subprocess.run(
        [sys.executable, "-S", "-E", "-s", "-c", probe],
        cwd=vendored.parent,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    assert (
        finished.stdout.strip()
        == "['spec', 'spec.first_write_wins', 'spec.model', 'spec.rollback']"
    )
