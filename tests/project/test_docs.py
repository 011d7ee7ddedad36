# SPDX-License-Identifier: MIT OR Apache-2.0
"""The protocol page's examples are real exchanges with the reference adapter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Final

from ssm_rollback_spec.harness.oracle import allowed_replies
from ssm_rollback_spec.harness.protocol import ErrorKind, reply_matches
from ssm_rollback_spec.harness.subprocess_driver import SubprocessDriver

#: The protocol page and the pages of its optional and opt-in operations.
PROTOCOL_PAGES: Final = sorted((Path(__file__).resolve().parents[2] / "docs").glob("protocol*.md"))
# Kinds whose message each runtime words for itself.
FREE_TEXT: Final = {
    ErrorKind.OVERFLOW.value,
    ErrorKind.UNSUPPORTED.value,
    ErrorKind.UNKNOWN_OP.value,
}


def _exchanges() -> list[tuple[str, dict[str, object]]]:
    pairs = []
    request: str | None = None
    lines = [line for page in PROTOCOL_PAGES for line in page.read_text("utf-8").splitlines()]
    for line in lines:
        if line.startswith("> "):
            request = line[2:]
        elif line.startswith("< "):
            assert request is not None, f"a reply with no request: {line}"
            pairs.append((request, json.loads(line[2:])))
            request = None
    return pairs


def test_every_documented_exchange_is_what_the_reference_adapter_replies() -> None:
    exchanges = _exchanges()
    assert len(exchanges) >= 12
    seen_ops: set[object] = set()
    driver = SubprocessDriver([sys.executable, "-m", "ssm_rollback_spec.harness.adapter"])
    for line, documented in exchanges:
        try:
            request = json.loads(line)
        except ValueError:
            request = None
        if isinstance(request, dict) and request.get("op") == "race":
            # A race has one allowed reply per possible winner.
            reply = driver.request(request)
            assert any(reply_matches(reply, allowed) for allowed in allowed_replies(request))
            assert any(reply_matches(documented, allowed) for allowed in allowed_replies(request))
            seen_ops.add("race")
            continue
        if isinstance(request, dict) and request.get("op") == "trace":
            reply = driver.request(request)
        else:
            reply = _raw_exchange(line)
        seen_ops.add(request.get("op") if isinstance(request, dict) else None)
        expected = dict(documented)
        error = expected.get("error")
        if isinstance(error, dict) and error["kind"] in FREE_TEXT:
            expected = {"error": {"kind": error["kind"]}}
        if "ok" in expected and isinstance(expected["ok"], dict) and "name" in expected["ok"]:
            assert reply["ok"]["usize_bits"] == 64  # type: ignore[index]
            continue
        assert reply_matches(reply, expected), f"{line}\n  documented {documented}\n  got {reply}"
    driver.close()
    assert {
        "describe",
        "parse",
        "row_bytes",
        "ring_bytes",
        "trace",
        "race",
        "verify_entry",
    } <= seen_ops


def _raw_exchange(line: str) -> dict[str, object]:
    # Some documented lines are not JSON at all; send them as they are.
    finished = subprocess.run(
        [sys.executable, "-m", "ssm_rollback_spec.harness.adapter"],
        input=line + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    reply: dict[str, object] = json.loads(finished.stdout)
    return reply
