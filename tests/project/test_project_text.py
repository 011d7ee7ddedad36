# SPDX-License-Identifier: MIT OR Apache-2.0
"""The project's files speak of the project alone: no internal issue numbers."""

from __future__ import annotations

import re
import subprocess
from typing import Final

from tests.child import ROOT

#: The word issue (or issues) and a number: a tracker number with no project named.
_ISSUE_NUMBER: Final = re.compile(r"\bissues? #?\d", re.IGNORECASE)
#: A line that names a public project may cite that project's own issue.
_PUBLIC_PROJECTS: Final = re.compile(
    r"llama\.cpp|vllm|sglang|flash-linear-attention|transformers", re.IGNORECASE
)


def _tracked_text_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"],  # noqa: S607 - git from PATH, as a contributor runs it
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=60,
    )
    return [name for name in listed.stdout.decode().split("\0") if name]


def test_no_file_names_an_internal_issue_number() -> None:
    found = []
    for name in _tracked_text_files():
        path = ROOT / name
        if path.is_symlink() or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if _ISSUE_NUMBER.search(line) and not _PUBLIC_PROJECTS.search(line):
                found.append(f"{name}:{number}: {line.strip()[:80]}")
    assert found == []
