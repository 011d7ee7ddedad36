# SPDX-License-Identifier: MIT OR Apache-2.0
"""An implementation's badge: a JSON file in the endpoint format that shields.io reads.

``{"schemaVersion": 1, "label": ..., "message": ..., "color": ...}``
(https://shields.io/badges/endpoint-badge), so a runtime's README can show
its result with ``https://img.shields.io/endpoint?url=<where the file is served>``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final, TypedDict

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from .matrix import Column, Matrix, MatrixCell

__all__ = ["LABEL", "Badge", "badge", "badge_name", "write_badges"]

#: The badge's left-hand text.
LABEL: Final = "ssm-rollback-spec"


class Badge(TypedDict):
    """The endpoint format's fields."""

    schemaVersion: int
    label: str
    message: str
    color: str


def badge_name(column: Column, /) -> str:
    """The badge file's name: the implementation's name and release, as a file name."""
    return f"{column.key}.json"


def badge(column: Column, cells: Mapping[str, MatrixCell], /, labels: Mapping[str, str]) -> Badge:
    """The badge of one implementation: how many clauses it passes, and what else.

    The colour is red when a clause fails, is not run, or a deviation entry
    now passes; yellow for known deviations or an outcome the page does not
    know; green when every clause checked passes; grey when none was.
    """
    outcomes = [cell.outcome for cell in cells.values() if cell.outcome not in {None, "skipped"}]
    passed = outcomes.count("passed")
    others = sorted({o for o in outcomes if o != "passed"}, key=lambda o: (o != "failed", o))
    parts = [f"{passed}/{len(outcomes)} clauses pass"]
    parts += [f"{outcomes.count(o)} {labels.get(o, o).lower()}" for o in others if o]
    if column.now_passing:
        parts.append(f"{len(column.now_passing)} listed, but now passes")
    if {"failed", "not-run"} & set(others) or column.now_passing:
        color = "red"
    elif others:
        color = "yellow"
    else:
        color = "brightgreen" if outcomes else "lightgrey"
    return {"schemaVersion": 1, "label": LABEL, "message": ", ".join(parts), "color": color}


def write_badges(folder: Path, matrix: Matrix, /, labels: Mapping[str, str]) -> None:
    """Write each implementation's badge into ``folder``, made if missing.

    Raises:
        OSError: the folder or a file cannot be written.
    """
    folder.mkdir(parents=True, exist_ok=True)
    for column, cells in zip(matrix.columns, matrix.cells, strict=True):
        text = json.dumps(badge(column, cells, labels), indent=2) + "\n"
        (folder / badge_name(column)).write_text(text, encoding="utf-8")
