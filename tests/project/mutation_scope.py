# SPDX-License-Identifier: MIT OR Apache-2.0
"""The mutation gates' denominator: which of the package's modules each mutates, and their lines.

Computed from pyproject.toml's ``[tool.mutmut]`` (the everyday gate) and
``[tool.mutmut-judges]`` (the judges' gate) with mutmut's own rule (a module
is mutated when ``only_mutate``, where given, names it and ``do_not_mutate``
does not). docs/mutation.md shows the table this module writes between its
markers; ``python -m tests.project.mutation_scope`` rewrites it, and
tests/project/test_mutation_scope.py fails while the page's figures are
further than :data:`DRIFT` from these.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from dataclasses import dataclass
from typing import Final

from tests.child import ROOT

PACKAGE: Final = ROOT / "spec"
PAGE: Final = ROOT / "docs" / "mutation.md"
BEGIN: Final = "<!-- mutation-scope:begin (python -m tests.project.mutation_scope) -->"
END: Final = "<!-- mutation-scope:end -->"
#: How far the page's line counts may lag the package's before the test asks
#: for the table to be written again: every edit of a module moves them.
DRIFT: Final = 0.02
#: Each gate: its table in pyproject.toml and how it is run.
GATES: Final = {
    "mutmut": "everyday: `python -m pytest -m mutation`",
    "mutmut-judges": "the judges: `python -m pytest -m judge_mutation`",
}


@dataclass(frozen=True)
class Scope:
    """One gate's mutated modules (paths under spec/) and their lines, and the package's."""

    modules: tuple[str, ...]
    lines: int
    package_modules: int
    package_lines: int


def _lines(relative: str, /) -> int:
    return len((PACKAGE / relative).read_text(encoding="utf-8").splitlines())


def package_modules() -> list[str]:
    """Every Python module of the package, as a path under spec/."""
    return sorted(path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py"))


def scope(table: str, /) -> Scope:
    """The modules ``[tool.<table>]`` mutates, as mutmut chooses them."""
    with (ROOT / "pyproject.toml").open("rb") as file:
        config = tomllib.load(file)["tool"][table]
    only = list(config.get("only_mutate", []))
    never = list(config.get("do_not_mutate", []))
    every = package_modules()
    chosen = []
    for relative in every:
        name = f"ssm_rollback_spec/{relative}"
        if only and not any(fnmatch.fnmatch(name, pattern) for pattern in only):
            continue
        if any(fnmatch.fnmatch(name, pattern) for pattern in never):
            continue
        chosen.append(relative)
    return Scope(
        modules=tuple(chosen),
        lines=sum(_lines(relative) for relative in chosen),
        package_modules=len(every),
        package_lines=sum(_lines(relative) for relative in every),
    )


def table() -> str:
    """The page's block: one row a gate, with its modules."""
    rows = [
        BEGIN,
        "| gate | modules mutated | their lines | of the package's |",
        "| --- | ---: | ---: | --- |",
    ]
    listed = []
    for name, how in GATES.items():
        found = scope(name)
        share = f"{found.lines / found.package_lines:.1%}"
        rows.append(
            f"| {how} | {len(found.modules)} | {found.lines:,} | {found.package_lines:,} lines "
            f"in {found.package_modules} modules ({share}) |"
        )
        shown = ", ".join(f"`{module}`" for module in found.modules)
        listed.append(f"- {how.split(':', 1)[0]}: {shown}")
    return "\n".join([*rows, "", *listed, END])


#: A row of the page's block: its gate's modules, lines, the package's lines and modules.
ROW: Final = re.compile(
    r"^\| (?P<how>[^|]+) \| (?P<modules>[\d,]+) \| (?P<lines>[\d,]+) \| "
    r"(?P<package>[\d,]+) lines in (?P<package_modules>\d+) modules"
)


def page_block(text: str, /) -> str:
    """The block between the page's markers, markers included."""
    return text[text.index(BEGIN) : text.index(END) + len(END)]


def main() -> None:
    """Write the table into docs/mutation.md."""
    text = PAGE.read_text(encoding="utf-8")
    PAGE.write_text(text.replace(page_block(text), table()), encoding="utf-8")


if __name__ == "__main__":
    main()
