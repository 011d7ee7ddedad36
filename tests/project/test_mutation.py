# SPDX-License-Identifier: MIT OR Apache-2.0
"""The mutation score: every mutant mutmut makes is killed or a listed equivalent.

mutmut (configured in pyproject.toml) mutates the contract and the harness
core and runs the in-process properties against each mutant. This test fails
on any survivor that is not listed below with the reason no test can tell it
apart, and on any listed equivalent that mutmut no longer makes, so the list
stays true. docs/mutation.md explains the run and repeats this list.

It is the slow gate (four to eight minutes on two cores), so the everyday
``python -m pytest`` leaves it out (``-m "not mutation"`` in pyproject.toml);
``.ci/run`` installs the ``mutation`` extra (mutmut) and runs it as a step of
its own, ``python -m pytest -m mutation``.

The judges' gate (``python -m pytest -m judge_mutation``) mutates the code that
decides whether an engine passes (``[tool.mutmut-judges]`` in pyproject.toml)
from a folder of its own, ``build/judge-mutation/``, whose pyproject.toml
holds that table as its ``[tool.mutmut]``; its survivors are listed in
:mod:`tests.project.judge_mutants`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections import Counter
from typing import TYPE_CHECKING, Final

import pytest

from tests.child import ROOT
from tests.project.judge_mutants import JUDGE_EQUIVALENT, JUDGE_UNKILLED

if TYPE_CHECKING:
    from pathlib import Path

#: (function, line removed, line added) -> why no test can tell it apart.
EQUIVALENT: Final = {
    (
        "ssm_rollback_spec.harness.protocol.x_encode_value",
        "shown = json.dumps(value, ensure_ascii=False)",
        "shown = json.dumps(value, ensure_ascii=None)",
    ): "json treats any false value as False",
    (
        "ssm_rollback_spec.harness.adapter.x__reply_line",
        'line = raw.decode("utf-8")',
        'line = raw.decode("UTF-8")',
    ): "codec names are case-insensitive",
    (
        "ssm_rollback_spec.harness.adapter.x__reply_line",
        'return protocol.encode(reply).encode("utf-8") + b"\\n"',
        'return protocol.encode(reply).encode("UTF-8") + b"\\n"',
    ): "codec names are case-insensitive",
    (
        "ssm_rollback_spec.harness.protocol.x_encode_line",
        'return _ENCODER.encode(message).encode("utf-8") + b"\\n"',
        'return _ENCODER.encode(message).encode("UTF-8") + b"\\n"',
    ): "codec names are case-insensitive",
    (
        "ssm_rollback_spec.harness.protocol.x_encode_line",
        "+ json.dumps(dict(message), ensure_ascii=True)[:200]",
        "+ json.dumps(dict(message), )[:200]",
    ): "ensure_ascii is True by default",
    (
        "ssm_rollback_spec.harness.protocol.x__load_json",
        '_ENCODER.encode(value).encode("utf-8")',
        '_ENCODER.encode(value).encode("UTF-8")',
    ): "codec names are case-insensitive",
    (
        "ssm_rollback_spec.harness.adapter.x__race",
        'returned: list[list[str]] = [[""] * len(events) for _ in range(rounds)]',
        'returned: list[list[str]] = [["XXXX"] * len(events) for _ in range(rounds)]',
    ): "every slot is written before a race returns; a failed call raises instead",
    (
        "ssm_rollback_spec.harness.oracle.x__calls",
        'raise ValueError(f"not an event: {event!r}")',
        "raise ValueError(None)",
    ): "unreachable: decode_request has already refused every other event",
    (
        "ssm_rollback_spec.harness.adapter.x__call",
        'raise ValueError(f"not an event: {event!r}")',
        "raise ValueError(None)",
    ): "unreachable: decode_request has already refused every other event",
    (
        "ssm_rollback_spec.harness.adapter.x__race",
        "barrier = threading.Barrier(max(len(events), 1), timeout=_BARRIER_SECONDS)",
        "barrier = threading.Barrier(max(len(events), 1), timeout=None)",
    ): "the timeout only fires when a barrier cannot fill, which a correct race never does",
    (
        "ssm_rollback_spec.harness.adapter.x__race",
        "barrier = threading.Barrier(max(len(events), 1), timeout=_BARRIER_SECONDS)",
        "barrier = threading.Barrier(max(len(events), 1), )",
    ): "the same timeout, dropped: it only fires when a barrier cannot fill",
    (
        "ssm_rollback_spec.harness.adapter.x__race",
        "spans: list[_Spans] = [[(0, 0)] * len(events) for _ in range(rounds)]",
        "spans: list[_Spans] = [[(1, 0)] * len(events) for _ in range(rounds)]",
    ): "every span is written before a race returns; a failed call raises instead",
    (
        "ssm_rollback_spec.harness.adapter.x__race",
        "spans: list[_Spans] = [[(0, 0)] * len(events) for _ in range(rounds)]",
        "spans: list[_Spans] = [[(0, 1)] * len(events) for _ in range(rounds)]",
    ): "every span is written before a race returns; a failed call raises instead",
    (
        "ssm_rollback_spec.harness.race_evidence.x_overlapped",
        "latest_end = end if latest_end is None else max(latest_end, end)",
        "latest_end = end if (latest_end is None) or True else max(latest_end, end)",
    ): "sorted by start and stopped at the first overlap, a span reached ends at or after"
    " every earlier end, so the max is always its own end",
}

_SHOWN: Final = re.compile(r"^([-+]) {4,}(.*)$")

#: Where the judges' gate runs: mutmut reads the [tool.mutmut] of the folder it runs in.
JUDGES_TREE: Final = ROOT / "build" / "judge-mutation"
#: What the judges' tree links from the clone (its pyproject.toml is written).
_LINKED: Final = ("ssm_rollback_spec", "tests", "vectors", "examples", "docs", "SPEC.md")


def _mutmut(*arguments: str, cwd: Path = ROOT) -> str:
    storage = {"HYPOTHESIS_STORAGE_DIRECTORY": str(ROOT / ".hypothesis")}
    env = {**storage, **os.environ, "HYPOTHESIS_PROFILE": "ci"}
    for name in ("SSM_ROLLBACK_IMPL_CMD", "SSM_ROLLBACK_IMPL_MODULE"):
        env.pop(name, None)
    finished = subprocess.run(
        [sys.executable, "-m", "mutmut", *arguments],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    return finished.stdout


def judges_pyproject(text: str, /) -> str:
    """``text`` (pyproject.toml) with its [tool.mutmut-judges] table as its [tool.mutmut]."""
    kept: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        if line.startswith("["):
            skipping = line.strip() == "[tool.mutmut]"
            if line.strip() == "[tool.mutmut-judges]":
                line = "[tool.mutmut]\n"  # noqa: PLW2901 - the one header renamed
        if not skipping:
            kept.append(line)
    return "".join(kept)


def _judges_tree() -> Path:
    shutil.rmtree(JUDGES_TREE, ignore_errors=True)
    JUDGES_TREE.mkdir(parents=True)
    for name in _LINKED:
        (JUDGES_TREE / name).symlink_to(ROOT / name)
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    (JUDGES_TREE / "pyproject.toml").write_text(judges_pyproject(text), encoding="utf-8")
    return JUDGES_TREE


def _change(name: str, cwd: Path, /) -> tuple[str, str, str]:
    removed = added = ""
    for line in _mutmut("show", name, cwd=cwd).splitlines():
        match = _SHOWN.match(line)
        if match and match[1] == "-" and not removed:
            removed = match[2].strip()
        elif match and match[1] == "+" and not added:
            added = match[2].strip()
    return name.split("__mutmut_", maxsplit=1)[0], removed, added


def _survivors(cwd: Path, /) -> dict[tuple[str, str, str], tuple[str, str]]:
    """Run mutmut in ``cwd`` afresh; each mutant not killed, by its change: (name, status)."""
    shutil.rmtree(cwd / "mutants", ignore_errors=True)
    _mutmut("run", cwd=cwd)
    statuses = {}
    for line in _mutmut("results", "--all", "true", cwd=cwd).splitlines():
        name, _, status = line.strip().rpartition(": ")
        if name:
            statuses[name] = status
    assert len(statuses) > 500, "mutmut made suspiciously few mutants"
    not_killed = {n: s for n, s in statuses.items() if s not in {"killed", "timeout"}}
    return {_change(name, cwd): (name, status) for name, status in not_killed.items()}


@pytest.mark.mutation
def test_every_mutant_is_killed_or_a_listed_equivalent() -> None:
    survivors = _survivors(ROOT)
    unexplained = {change: found for change, found in survivors.items() if change not in EQUIVALENT}
    assert not unexplained, f"mutants no test kills: {unexplained}"
    stale = set(EQUIVALENT) - set(survivors)
    assert not stale, f"listed equivalents mutmut no longer makes: {stale}"


@pytest.mark.judge_mutation
def test_every_judge_mutant_is_killed_or_listed() -> None:
    survivors = _survivors(_judges_tree())
    stale = JUDGE_EQUIVALENT.keys() - survivors.keys()
    assert not stale, f"listed judge equivalents mutmut no longer makes: {stale}"
    unkilled = Counter(change[0] for change in survivors if change not in JUDGE_EQUIVALENT)
    more = {name: count for name, count in unkilled.items() if count > JUDGE_UNKILLED.get(name, 0)}
    assert not more, f"judge mutants no test kills, past the ones listed: {more}: {survivors}"
    fewer = {
        name: unkilled[name] for name, count in JUDGE_UNKILLED.items() if unkilled[name] < count
    }
    assert not fewer, f"fewer judge mutants survive: lower JUDGE_UNKILLED to {fewer}"


def test_the_judges_pyproject_swaps_in_the_judges_table_alone() -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    swapped = tomllib.loads(judges_pyproject(text))
    original = tomllib.loads(text)
    assert swapped["tool"]["mutmut"] == original["tool"]["mutmut-judges"]
    assert "mutmut-judges" not in swapped["tool"]
    assert swapped["tool"]["pytest"] == original["tool"]["pytest"]
