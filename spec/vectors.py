# SPDX-License-Identifier: MIT OR Apache-2.0
"""Language-neutral test vectors: generated from the model, run over the protocol.

The corpus in ``vectors/`` is what runtimes that cannot run Python vendor.
Generation is deterministic (no randomness, no clock), so a fresh generation
must equal the committed files byte for byte. Running needs only the standard
library.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from spec import SPEC_VERSION, model
from spec.driver import is_stateful
from spec.oracle import allowed_replies
from spec.protocol import PROTOCOL_VERSION, encode, reply_matches

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from pathlib import Path

    from spec.subprocess_driver import SubprocessDriver

__all__ = [
    "Case",
    "CaseResult",
    "VectorError",
    "generate",
    "load_cases",
    "run_cases",
    "write_corpus",
]

#: A case as read from JSON: ``id``, ``clauses``, ``request`` and ``expected``.
Case = dict[str, Any]

_MAX: Final = model.USIZE_MAX
# 2**64 - 1 = 3 * 5 * 17 * 257 * 641 * 65537 * 6700417, so these split it.
_A, _B = 3 * 5 * 17 * 257, 641 * 65537 * 6700417
assert _A * _B == _MAX


class VectorError(ValueError):
    """A corpus, skip list or run that cannot be used as it is."""


def _case(case_id: str, clauses: Sequence[str], request: dict[str, Any]) -> Case:
    return {
        "id": case_id,
        "clauses": list(clauses),
        "request": request,
        "expected": allowed_replies(request),
    }


def _parse_cases() -> Iterator[Case]:
    texts = {
        "snapshot": "snapshot",
        "replay": "replay",
        "empty": "",
        "upper": "SNAPSHOT",
        "title": "Replay",
        "leading-space": " snapshot",
        "trailing-space": "replay ",
        "trailing-newline": "snapshot\n",
        "tab-inside": "snap\tshot",
        "nbsp": "replay\u00a0",
        "zero-width-space": "re\u200bplay",
        "cyrillic-e": "r\u0435play",
        "cyrillic-a": "sn\u0430pshot",
        "fullwidth": "\uff52\uff45\uff50\uff4c\uff41\uff59",
        "combining-acute": "re\u0301play",
        "prefix": "snap",
        "one-short": "repla",
        "suffix": "replays",
        "both": "snapshot,replay",
        "single-quotes": "'replay'",
        "double-quotes": '"snapshot"',
        "quote-inside": "re'play",
        "backslash": "snap\\shot",
        "escape-text": "replay\\n",
        "format-braces": "{other}",
        "nul": "replay\x00",
        "hyphen": "snap-shot",
        "other-mode-name": "recompute",
    }
    for name, text in texts.items():
        if text in model.MODE_NAMES:
            clauses = ["RB-MODE-1", "RB-PARSE-1", "RB-PROTO-2"]
        else:
            clauses = ["RB-PARSE-1", "RB-PARSE-2"]
        yield _case(f"parse-{name}", clauses, {"op": "parse", "text": text})


def _boundary_clause(value: int, /, *arguments: int) -> list[str]:
    # A case near the top of the range checks the exact-or-overflow rule too.
    near_top = not model.fits_usize(value) or max(value, *arguments) >= 2**32
    return ["RB-SIZE-3"] if near_top else []


def _row_cases() -> Iterator[Case]:
    half = (_MAX - 1) // 2
    rows = {
        "zero": (0, 0),
        "one-each": (1, 1),
        "qwen3-next": (12288, 32),
        "largest-qkvz": (half, 0),
        "qkvz-one-past": (half + 1, 0),
        "largest-nv": (0, _MAX // 8),
        "nv-one-past": (0, _MAX // 8 + 1),
        "mixed-largest": (half - 4, 1),
        "mixed-one-past": (half - 3, 1),
        "both-max": (_MAX, _MAX),
        "qkvz-max": (_MAX, 0),
        "nv-max": (0, _MAX),
    }
    for name, (qkvz, nv) in rows.items():
        clauses = ["RB-SIZE-1", *_boundary_clause(model.row_bytes(qkvz, nv), qkvz, nv)]
        yield _case(f"row-{name}", clauses, {"op": "row_bytes", "qkvz_elems": qkvz, "nv": nv})


def _ring_cases() -> Iterator[Case]:
    rings: dict[str, tuple[int, int, int, int]] = {
        "k0": (36, 24832, 0, 2),
        "k1": (36, 24832, 1, 2),
        "k2": (36, 24832, 2, 2),
        "qwen3-next-preflight": (36, 24832, 4, 2),
        "k0-all-max": (_MAX, _MAX, 0, _MAX),
        "k1-all-max": (_MAX, _MAX, 1, _MAX),
        "exactly-max-layers": (_MAX, 1, 2, 1),
        "exactly-max-row": (1, _MAX, 2, 1),
        "exactly-max-k": (1, 1, _MAX, 1),
        "exactly-max-slots": (1, 1, 2, _MAX),
        "exactly-max-split": (_A, 1, 2, _B),
        "exactly-max-split-k": (1, _B, _A + 1, 1),
        "double-max": (_MAX, 2, 2, 1),
        "one-more-k": (_MAX, 1, 3, 1),
        "one-more-split": (_A + 1, 1, 2, _B),
        "max-k-one-row-two": (1, 2, _MAX, 1),
        "zero-layers-rest-max": (0, _MAX, _MAX, _MAX),
        "zero-row-rest-max": (_MAX, 0, _MAX, _MAX),
        "zero-slots-rest-max": (_MAX, _MAX, _MAX, 0),
        "zero-first-then-huge": (2**40, 2**40, 2**40, 0),
        "intermediate-too-big": (2**40, 2**40, 2**40 + 1, 1),
        "two-to-the-64": (2**32, 2**16, 2**16 + 1, 1),
        "just-under": (2**31, 2**16, 2**16 + 1, 2**1),
    }
    for name, (layers, row, k, slots) in rings.items():
        value = model.ring_bytes(layers, row, k, slots)
        clauses = ["RB-SIZE-2", *_boundary_clause(value, layers, row, k, slots)]
        request = {"op": "ring_bytes", "num_ssm_layers": layers, "row_bytes": row}
        request |= {"k_ceiling": k, "mtp_state_slots": slots}
        yield _case(f"ring-{name}", clauses, request)


def _set(mode: str) -> dict[str, Any]:
    return {"op": "set", "mode": mode}


_GET: Final[dict[str, Any]] = {"op": "get"}


def _trace_cases() -> Iterator[Case]:
    traces: dict[str, tuple[list[str], list[dict[str, Any]]]] = {
        "empty": (["RB-PUB-1"], []),
        "read-only": (["RB-PUB-2"], [_GET]),
        "read-before-write": (["RB-PUB-2"], [_GET, _set("replay"), _GET]),
        "reads-before-writes": (["RB-PUB-2"], [_GET, _GET, _set("replay"), _set("snapshot")]),
        "write-replay-then-read": (["RB-PUB-1"], [_set("replay"), _GET]),
        "write-snapshot-then-replay": (["RB-PUB-1"], [_set("snapshot"), _set("replay"), _GET]),
        "read-between-writes": (["RB-PUB-1"], [_set("replay"), _GET, _set("snapshot"), _GET]),
        "read-after-writes": (["RB-PUB-1"], [_set("replay"), _set("replay"), _GET]),
        "replay-boots": (["RB-PUB-1", "RB-VERIFY-2"], [_set("replay")]),
        "alternating": (["RB-PUB-1"], [_set("replay"), _set("snapshot")] * 4 + [_GET]),
    }
    for name, (clauses, events) in traces.items():
        yield _case(
            f"trace-{name}", [*clauses, "RB-PUB-3", "RB-PROTO-5"], {"op": "trace", "events": events}
        )


def _race_cases() -> Iterator[Case]:
    races: dict[str, list[dict[str, Any]]] = {
        "two-writers": [_set("replay"), _set("snapshot")],
        "writer-and-reader": [_set("replay"), _GET],
        "many-readers": [_GET] * 8,
        "many-writers-one-mode": [_set("replay")] * 8,
        "mixed-eight": [_set("replay"), _GET, _set("snapshot"), _GET] * 2,
        "mixed-sixteen": [_set("replay"), _set("replay"), _GET, _set("snapshot")] * 4,
    }
    for name, events in races.items():
        yield _case(f"race-{name}", ["RB-PUB-4", "RB-PROTO-5"], {"op": "race", "events": events})


def _verify_cases() -> Iterator[Case]:
    snapshot = {"op": "verify_entry", "mode": "snapshot"}
    yield _case("verify-snapshot", ["RB-VERIFY-1", "RB-PROTO-2"], snapshot)
    yield _case(
        "verify-replay", ["RB-VERIFY-2", "RB-PROTO-2"], {"op": "verify_entry", "mode": "replay"}
    )


def _protocol_cases() -> Iterator[Case]:
    bad: dict[str, dict[str, Any]] = {
        "no-op": {"text": "snapshot"},
        "op-not-string": {"op": 7},
        "parse-no-text": {"op": "parse"},
        "parse-text-number": {"op": "parse", "text": 7},
        "row-missing-nv": {"op": "row_bytes", "qkvz_elems": 1},
        "row-negative": {"op": "row_bytes", "qkvz_elems": -1, "nv": 0},
        "row-past-u64": {"op": "row_bytes", "qkvz_elems": _MAX + 1, "nv": 0},
        "row-float": {"op": "row_bytes", "qkvz_elems": 1.5, "nv": 0},
        "row-bool": {"op": "row_bytes", "qkvz_elems": True, "nv": 0},
        "ring-missing-slots": {
            "op": "ring_bytes",
            "num_ssm_layers": 1,
            "row_bytes": 1,
            "k_ceiling": 2,
        },
        "verify-bad-mode": {"op": "verify_entry", "mode": "Replay"},
        "trace-events-not-list": {"op": "trace", "events": {"op": "get"}},
        "trace-set-without-mode": {"op": "trace", "events": [{"op": "set"}]},
        "race-unknown-event": {"op": "race", "events": [{"op": "reset"}]},
    }
    for name, request in bad.items():
        yield {
            "id": f"protocol-bad-{name}",
            "clauses": ["RB-PROTO-1", "RB-PROTO-4"],
            "request": request,
            "expected": [{"error": {"kind": "bad-request"}}],
        }
    for op in ("rewind", "Parse", "reset"):
        yield {
            "id": f"protocol-unknown-op-{op.lower()}",
            "clauses": ["RB-PROTO-4"],
            "request": {"op": op},
            "expected": [{"error": {"kind": "unknown-op"}}],
        }
    yield {
        "id": "protocol-extra-field-ignored",
        "clauses": ["RB-PROTO-3"],
        "request": {"op": "parse", "text": "replay", "id": 7},
        "expected": [{"ok": "replay"}],
    }


_FILES: Final = {
    "parse.json": _parse_cases,
    "row_bytes.json": _row_cases,
    "ring_bytes.json": _ring_cases,
    "trace.json": _trace_cases,
    "race.json": _race_cases,
    "verify_entry.json": _verify_cases,
    "protocol.json": _protocol_cases,
}


def _compact(value: object, /) -> str:
    # ASCII only, so the files are byte-stable whatever the vendoring tool.
    return json.dumps(value, ensure_ascii=True, separators=(", ", ": "))


def _dump(document: Mapping[str, object], /) -> str:
    # One line per case or file entry: readable, and a change diffs as one line.
    lines = ["{"]
    items = list(document.items())
    for index, (key, value) in enumerate(items):
        comma = "," if index < len(items) - 1 else ""
        if isinstance(value, list):
            inner = [f"  {_compact(item)}" for item in value]
            body = ",\n".join(inner)
            lines.append(
                f" {_compact(key)}: [\n{body}\n ]{comma}"
                if inner
                else f" {_compact(key)}: []{comma}"
            )
        else:
            lines.append(f" {_compact(key)}: {_compact(value)}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def generate() -> dict[str, str]:
    """Every corpus file's path (relative to ``vectors/``) and its exact text."""
    files = {}
    manifest_entries = []
    for name, cases in _FILES.items():
        case_list = list(cases())
        document = {
            "spec_version": SPEC_VERSION,
            "protocol_version": PROTOCOL_VERSION,
            "cases": case_list,
        }
        text = _dump(document)
        files[name] = text
        manifest_entries.append(
            {
                "path": name,
                "cases": len(case_list),
                "sha256": hashlib.sha256(text.encode("ascii")).hexdigest(),
            }
        )
    files["manifest.json"] = _dump(
        {
            "spec_version": SPEC_VERSION,
            "protocol_version": PROTOCOL_VERSION,
            "schema": "schema.json",
            "files": manifest_entries,
        }
    )
    return files


def write_corpus(directory: Path, /) -> list[Path]:
    """Write the generated corpus into ``directory``; return the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in generate().items():
        path = directory / name
        path.write_text(text, encoding="ascii")
        written.append(path)
    return written


def load_cases(directory: Path, /) -> list[Case]:
    """Every case of the corpus in ``directory``, checked against its manifest.

    Raises:
        VectorError: the manifest is missing, a file's hash or case count does
            not match it, or two cases share an ID.
    """
    try:
        manifest = json.loads((directory / "manifest.json").read_text(encoding="ascii"))
        cases: list[Case] = []
        for entry in manifest["files"]:
            raw = (directory / entry["path"]).read_bytes()
            if hashlib.sha256(raw).hexdigest() != entry["sha256"]:
                raise VectorError(f"{entry['path']}: SHA-256 differs from manifest.json")
            file_cases = json.loads(raw)["cases"]
            if len(file_cases) != entry["cases"]:
                raise VectorError(f"{entry['path']}: case count differs from manifest.json")
            cases.extend(file_cases)
    except OSError as error:
        raise VectorError(f"cannot read the vectors in {directory}: {error}") from None
    except (ValueError, KeyError, TypeError) as error:
        raise VectorError(f"malformed vectors in {directory}: {error!r}") from None
    ids = [str(case["id"]) for case in cases]
    duplicates = sorted({case_id for case_id in ids if ids.count(case_id) > 1})
    if duplicates:
        raise VectorError(f"duplicate case IDs: {', '.join(duplicates)}")
    return cases


@dataclass
class CaseResult:
    """The outcome of one case: ``passed``, ``failed`` or ``skipped``."""

    case_id: str
    clauses: list[str]
    outcome: str
    detail: str = ""


def run_cases(
    driver: SubprocessDriver,
    cases: Sequence[Case],
    skips: Mapping[str, str],
    /,
) -> list[CaseResult]:
    """Run every case not skipped; stateless ones pipelined through one process.

    Raises:
        VectorError: a skip names no case, or a case was neither run nor skipped.
    """
    known = {str(case["id"]) for case in cases}
    unknown = sorted(set(skips) - known)
    if unknown:
        raise VectorError(f"the skip list names cases that do not exist: {', '.join(unknown)}")
    results: dict[str, CaseResult] = {}
    to_run = []
    for case in cases:
        case_id = str(case["id"])
        clauses = [str(c) for c in case["clauses"]]
        if case_id in skips:
            results[case_id] = CaseResult(case_id, clauses, "skipped", skips[case_id])
        else:
            to_run.append(case)
    stateless = [case for case in to_run if not is_stateful(case["request"])]
    stateful = [case for case in to_run if is_stateful(case["request"])]
    replies: list[dict[str, object] | AssertionError] = list(
        driver.request_many([case["request"] for case in stateless])
    )
    for case in stateful:
        try:
            replies.append(driver.request(case["request"]))
        except AssertionError as failure:
            replies.append(failure)
    # Not strict: a driver that answers fewer cases than it was sent leaves
    # those cases unrecorded, and the check below names them.
    for case, reply in zip([*stateless, *stateful], replies, strict=False):
        case_id = str(case["id"])
        clauses = [str(c) for c in case["clauses"]]
        expected = case["expected"]
        if isinstance(reply, BaseException):
            results[case_id] = CaseResult(case_id, clauses, "failed", str(reply))
        elif any(reply_matches(reply, e) for e in expected):
            results[case_id] = CaseResult(case_id, clauses, "passed")
        else:
            shown = " or ".join(encode(e) for e in expected)
            detail = f"request {encode(case['request'])}\nreplied {encode(reply)}\nexpected {shown}"
            results[case_id] = CaseResult(case_id, clauses, "failed", detail)
    missing = sorted(known - results.keys())
    if missing:
        raise VectorError(f"cases neither run nor skipped: {', '.join(missing)}")
    return [results[str(case["id"])] for case in cases]
