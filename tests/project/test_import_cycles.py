# SPDX-License-Identifier: MIT OR Apache-2.0
"""No module of the package imports another that imports it back, directly or round a circle.

The graph counts every import a module writes, those under ``TYPE_CHECKING``
too: a circle that only the type checker walks still ties two modules into
one, so neither can be read, moved or vendored without the other.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Final

from tests.child import ROOT

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

SPEC: Final = ROOT / "spec"
PACKAGE: Final = "ssm_rollback_spec"


def _module_name(path: Path, /) -> str:
    parts = [PACKAGE, *path.relative_to(SPEC).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: Final = {
    _module_name(path): path
    for path in sorted(SPEC.rglob("*.py"))
    if "suite" not in path.relative_to(SPEC).parts
}


def _edges(module: str, path: Path, /) -> set[str]:
    """The package's modules ``module`` names in its imports (``from . import x``: ``x``)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            for alias in node.names:
                # A submodule imported by name is an edge to it, not to its package.
                named = f"{source}.{alias.name}"
                found.add(named if named in MODULES else source)
    return {name for name in found if name in MODULES and name != module}


def _reached(graph: Mapping[str, set[str]], start: str, /) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for step in graph[todo.pop()] - seen:
            seen.add(step)
            todo.append(step)
    return seen


def _circles(graph: Mapping[str, set[str]], /) -> list[list[str]]:
    """The modules that import each other, grouped: each group one strongly connected component."""
    reached = {module: _reached(graph, module) for module in graph}
    circles: list[list[str]] = []
    for module in sorted(graph):
        if module in reached[module] and not any(module in circle for circle in circles):
            circles.append(sorted(other for other in reached[module] if module in reached[other]))
    return circles


def test_the_circle_finder_finds_a_circle_of_three_and_a_pair() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"e"}, "e": {"d", "a"}, "f": set()}
    assert sorted(_circles(graph)) == [["a", "b", "c"], ["d", "e"]]


def test_no_two_modules_of_the_package_import_each_other() -> None:
    graph = {module: _edges(module, path) for module, path in MODULES.items()}
    assert len(graph) > 100, "the package's modules were not found"
    assert _circles(graph) == []
