# SPDX-License-Identifier: MIT OR Apache-2.0
"""CHANGELOG.md moves with the package: its newest entry is the version the wheel carries."""

from __future__ import annotations

import re
from typing import Final

from ssm_rollback_spec import SPEC_VERSION, __version__
from ssm_rollback_spec.harness.versions import CURRENT
from tests.child import ROOT

#: A release's heading: its version, then anything (the date).
_HEADING: Final = re.compile(r"^## (\d+\.\d+\.\d+)\b", re.MULTILINE)


def _entries() -> list[tuple[str, str]]:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    found = list(_HEADING.finditer(text))
    ends = [match.start() for match in found[1:]] + [len(text)]
    return [(m.group(1), text[m.end() : end]) for m, end in zip(found, ends, strict=True)]


def test_the_newest_entry_is_the_packages_version() -> None:
    versions = [version for version, _ in _entries()]
    assert versions[0] == __version__


def test_the_entries_run_from_newest_to_oldest_with_no_version_twice() -> None:
    versions = [tuple(map(int, version.split("."))) for version, _ in _entries()]
    assert versions == sorted(set(versions), reverse=True)


def test_the_newest_entry_names_the_specification_and_protocol_it_ships() -> None:
    _, body = _entries()[0]
    flat = " ".join(body.split())
    assert f"specification is {SPEC_VERSION}" in flat
    assert f"protocol {CURRENT}" in flat
