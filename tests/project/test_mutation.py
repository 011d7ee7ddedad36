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
"""

from __future__ import annotations

import re
import shutil
from typing import Final

import pytest

from tests.child import ROOT, run_module

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


def _mutmut(*arguments: str) -> str:
    finished = run_module("mutmut", *arguments, timeout=2400)
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    return finished.stdout


def _change(name: str) -> tuple[str, str, str]:
    removed = added = ""
    for line in _mutmut("show", name).splitlines():
        match = _SHOWN.match(line)
        if match and match[1] == "-" and not removed:
            removed = match[2].strip()
        elif match and match[1] == "+" and not added:
            added = match[2].strip()
    return name.split("__mutmut_", maxsplit=1)[0], removed, added


@pytest.mark.mutation
def test_every_mutant_is_killed_or_a_listed_equivalent() -> None:
    shutil.rmtree(ROOT / "mutants", ignore_errors=True)
    _mutmut("run")
    statuses = {}
    for line in _mutmut("results", "--all", "true").splitlines():
        name, _, status = line.strip().rpartition(": ")
        if name:
            statuses[name] = status
    assert len(statuses) > 500, "mutmut made suspiciously few mutants"
    not_killed = {n: s for n, s in statuses.items() if s not in {"killed", "timeout"}}
    survivors = {_change(name): (name, status) for name, status in not_killed.items()}
    unexplained = {change: found for change, found in survivors.items() if change not in EQUIVALENT}
    assert not unexplained, f"mutants no test kills: {unexplained}"
    stale = set(EQUIVALENT) - set(survivors)
    assert not stale, f"listed equivalents mutmut no longer makes: {stale}"
