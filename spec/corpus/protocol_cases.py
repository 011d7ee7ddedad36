# SPDX-License-Identifier: MIT OR Apache-2.0
"""The protocol corpus made: every case, the model's allowed replies, and the files that hold them.

The corpus (``vectors/`` in a clone, ``spec/vectors`` in the wheel) is what
runtimes that cannot run Python vendor. Generation is deterministic (no
randomness, no clock), so a fresh generation must equal the committed files
byte for byte; every case's expected replies come from the model through the
oracle. Loading and running need only the standard library.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Final, NotRequired, TypedDict, cast

from .. import SPEC_VERSION, model
from ..harness.oracle import allowed_replies
from ..harness.protocol import (
    MAX_DEPTH,
    MAX_EVENTS,
    PROTOCOL_VERSION,
    encode,
    loads_bounded,
)
from .files import SCHEMA_FILE, ManifestEntry, render_corpus_files, schema_text

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from pathlib import Path

__all__ = [
    "Case",
    "CaseFile",
    "Manifest",
    "exported_case",
    "generate",
    "render_corpus",
    "write_corpus",
]


class Case(TypedDict):
    """One vector: a request and every reply the model allows for it."""

    id: str
    clauses: list[str]
    request: dict[str, object]
    #: ``{"ok": VALUE}`` or ``{"error": {"kind": KIND[, "message": TEXT]}}``.
    expected: list[dict[str, object]]
    #: The exact line to send, when an encoder would not write it (``1e2``,
    #: ``-0``, a duplicate key, a byte order mark); ``request`` is what it decodes to.
    line: NotRequired[str]


class CaseFile(TypedDict):
    """One corpus file: the versions it implements and its cases."""

    spec_version: str
    protocol_version: int
    cases: list[Case]


class Manifest(TypedDict):
    """``manifest.json``: the versions, the schema's name and every file's hash."""

    spec_version: str
    protocol_version: int
    schema: str
    files: list[ManifestEntry]


_MAX: Final = model.USIZE_MAX
# 2**64 - 1 = 3 * 5 * 17 * 257 * 641 * 65537 * 6700417, so these split it.
_A, _B = 3 * 5 * 17 * 257, 641 * 65537 * 6700417
assert _A * _B == _MAX


def _case(
    case_id: str,
    clauses: Sequence[str],
    request: dict[str, object],
    line: str | None = None,
    expected: list[dict[str, object]] | None = None,
) -> Case:
    case: Case = {
        "id": case_id,
        "clauses": list(clauses),
        "request": request,
        "expected": allowed_replies(request) if expected is None else expected,
    }
    if line is not None and line != encode(request):
        case["line"] = line
    return case


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
        "nul-then-junk": "snapshot\x00junk",
        "hyphen": "snap-shot",
        "other-mode-name": "recompute",
        "math-bold": "".join(chr(ord(c) - ord("a") + 0x1D41A) for c in "replay"),
        "escape-control": "snap\x1bshot\x7f",
        "non-bmp": "replay\U0001f600",
        "line-separator": "snapshot\u2028",
        "long-4096": "replay " + "'\\" * 2_048 + "\u00e9",
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


def _set(mode: str) -> dict[str, object]:
    return {"op": "set", "mode": mode}


_GET: Final[dict[str, object]] = {"op": "get"}


def _trace_cases() -> Iterator[Case]:
    traces: dict[str, tuple[list[str], list[dict[str, object]]]] = {
        "empty": (["RB-PUB-1"], []),
        "read-only": (["RB-PUB-2"], [_GET]),
        "read-before-write": (["RB-PUB-2"], [_GET, _set("replay"), _GET]),
        "reads-before-writes": (["RB-PUB-2"], [_GET, _GET, _set("replay"), _set("snapshot")]),
        # Fails only where a process does not start unwritten, or where the
        # harness reused a process; a last-write-wins bug passes it.
        "write-replay-then-read": (["RB-PUB-3", "RB-PROTO-5"], [_set("replay"), _GET]),
        "write-snapshot-then-replay": (["RB-PUB-1"], [_set("snapshot"), _set("replay"), _GET]),
        "read-between-writes": (["RB-PUB-1"], [_set("replay"), _GET, _set("snapshot"), _GET]),
        "read-after-writes": (["RB-PUB-1"], [_set("replay"), _set("replay"), _GET]),
        "replay-boots": (["RB-VERIFY-2"], [_set("replay")]),
        "alternating": (["RB-PUB-1"], [_set("replay"), _set("snapshot")] * 4 + [_GET]),
    }
    for name, (clauses, events) in traces.items():
        yield _case(f"trace-{name}", clauses, {"op": "trace", "events": events})
    yield from _bound_cases("trace")


def _bound_cases(op: str, /) -> Iterator[Case]:
    # The event bound, at it and one past it (docs/protocol.md, "Bounds").
    # Every event publishes replay, so only the bound can make a case fail.
    for count in (MAX_EVENTS, MAX_EVENTS + 1):
        events = [_set("replay")] * count
        yield _case(f"{op}-{count}-events", ["RB-PROTO-4"], {"op": op, "events": events})


def _race_cases() -> Iterator[Case]:
    races: dict[str, list[dict[str, object]]] = {
        "two-writers": [_set("replay"), _set("snapshot")],
        "writer-and-reader": [_set("replay"), _GET],
        "many-readers": [_GET] * 8,
        "many-writers-one-mode": [_set("replay")] * 8,
        "mixed-eight": [_set("replay"), _GET, _set("snapshot"), _GET] * 2,
        "mixed-sixteen": [_set("replay"), _set("replay"), _GET, _set("snapshot")] * 4,
    }
    yield _case("race-empty", ["RB-PUB-4", "RB-PROTO-2"], {"op": "race", "events": []})
    for name, events in races.items():
        yield _case(f"race-{name}", ["RB-PUB-4"], {"op": "race", "events": events})
    yield from _bound_cases("race")


def _verify_cases() -> Iterator[Case]:
    snapshot: dict[str, object] = {"op": "verify_entry", "mode": "snapshot"}
    yield _case("verify-snapshot", ["RB-VERIFY-1", "RB-PROTO-2"], snapshot)
    yield _case(
        "verify-replay", ["RB-VERIFY-2", "RB-PROTO-2"], {"op": "verify_entry", "mode": "replay"}
    )


def _protocol_cases() -> Iterator[Case]:
    bad: dict[str, dict[str, object]] = {
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
        yield _case(f"protocol-bad-{name}", ["RB-PROTO-1", "RB-PROTO-4"], request)
    for op in ("rewind", "Parse", "reset"):
        yield _case(f"protocol-unknown-op-{op.lower()}", ["RB-PROTO-4"], {"op": op})
    yield _case(
        "protocol-extra-field-ignored",
        ["RB-PROTO-3"],
        {"op": "parse", "text": "replay", "id": 7},
    )
    yield from _unused_field_cases()
    yield from _written_cases()
    yield from _depth_cases()


#: A field no op reads, holding each kind of JSON value an adapter might
#: choke on: what check's drawn requests reach, pinned for vectors run.
_UNUSED_VALUES: Final = {
    "null": None,
    "false": False,
    "negative": -1,
    "negative-float": -0.5,
    "past-u64": _MAX + 1,
    "string": "snapshot",
    "array": [-1, "x", None, [True]],
    "object": {"op": "reset", "nv": -1},
}


def _unused_field_cases() -> Iterator[Case]:
    # On an op with numbers (row_bytes), with text (parse), and on an event
    # inside a trace, whose fields are read one event at a time.
    for name, value in _UNUSED_VALUES.items():
        yield _case(
            f"protocol-unused-{name}-row-bytes",
            ["RB-PROTO-3"],
            {"op": "row_bytes", "qkvz_elems": 2, "nv": 1, "unused": value},
        )
        yield _case(
            f"protocol-unused-{name}-parse",
            ["RB-PROTO-3"],
            {"op": "parse", "text": "Replay", "unused": value},
        )
        yield _case(
            f"protocol-unused-{name}-get-event",
            ["RB-PROTO-3", "RB-PUB-1"],
            {"op": "trace", "events": [{"op": "get", "unused": value}]},
        )


def _written_cases() -> Iterator[Case]:
    # Lines an encoder would not write: each case carries its exact line.
    integers = {"fraction": "1.0", "exponent": "1e2", "minus-zero": "-0"}
    for name, written in integers.items():
        line = f'{{"op":"row_bytes","qkvz_elems":{written},"nv":1}}'
        request = cast("dict[str, object]", loads_bounded(line, MAX_DEPTH))
        yield _case(f"protocol-bad-integer-{name}", ["RB-PROTO-4"], request, line)
    duplicate = '{"op":"parse","text":"Snapshot","text":"replay"}'
    yield _case(
        "protocol-duplicate-key-last-counts",
        ["RB-PROTO-3"],
        {"op": "parse", "text": "replay"},
        duplicate,
    )
    # RFC 8259, section 8.1: a reader MAY ignore a byte order mark.
    parse: dict[str, object] = {"op": "parse", "text": "replay"}
    yield _case(
        "protocol-byte-order-mark-read-or-refused",
        ["RB-PROTO-1"],
        parse,
        "\ufeff" + encode(parse),
        [{"ok": "replay"}, {"error": {"kind": "bad-request"}}],
    )
    yield _case(
        "protocol-get-ignores-mode",
        ["RB-PROTO-3", "RB-PUB-2"],
        {"op": "trace", "events": [{"op": "get", "mode": "junk"}, {"op": "get"}]},
    )


def _nested(levels: int, container: str, /) -> object:
    value: object = 0
    for _ in range(levels):
        value = [value] if container == "arrays" else {"a": value}
    return value


def _depth_cases() -> Iterator[Case]:
    # The request object is level 1; an ignored field carries the rest.
    for container in ("arrays", "objects"):
        for depth in (MAX_DEPTH, MAX_DEPTH + 1):
            request = {"op": "parse", "text": "replay", "x": _nested(depth - 1, container)}
            yield _case(f"protocol-depth-{depth}-{container}", ["RB-PROTO-4"], request)


_FILES: Final = {
    "parse.json": _parse_cases,
    "row_bytes.json": _row_cases,
    "ring_bytes.json": _ring_cases,
    "trace.json": _trace_cases,
    "race.json": _race_cases,
    "verify_entry.json": _verify_cases,
    "protocol.json": _protocol_cases,
}


def render_corpus(files: Mapping[str, Sequence[Case]], /) -> dict[str, str]:
    """Each corpus file's name and exact text, with the manifest that pins them."""
    documents = {
        name: cast(
            "Mapping[str, object]",
            CaseFile(
                spec_version=SPEC_VERSION, protocol_version=PROTOCOL_VERSION, cases=list(cases)
            ),
        )
        for name, cases in files.items()
    }
    header = {"spec_version": SPEC_VERSION, "protocol_version": PROTOCOL_VERSION}
    return {**render_corpus_files(header, documents), SCHEMA_FILE: schema_text("protocol")}


def generate() -> dict[str, str]:
    """Every file of the shipped corpus (relative to its directory) and its exact text."""
    return render_corpus({name: list(cases()) for name, cases in _FILES.items()})


def write_corpus(directory: Path, texts: Mapping[str, str] | None = None, /) -> list[Path]:
    """Write a corpus (the generated one by default) into ``directory``; return the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in (generate() if texts is None else texts).items():
        path = directory / name
        path.write_text(text, encoding="ascii")
        written.append(path)
    return written


# The clauses a request of each op can tell apart: a case cites no more.
_OP_CLAUSES: Final = {
    "parse": ("RB-MODE-1", "RB-PARSE-1", "RB-PARSE-2"),
    "row_bytes": ("RB-SIZE-1", "RB-SIZE-3"),
    "ring_bytes": ("RB-SIZE-2", "RB-SIZE-3"),
    "trace": ("RB-PUB-1", "RB-PUB-2", "RB-PUB-3", "RB-PROTO-5"),
    "race": ("RB-PUB-1", "RB-PUB-4", "RB-PROTO-5"),
    "verify_entry": ("RB-VERIFY-1", "RB-VERIFY-2"),
}
_PROTOCOL_CLAUSES: Final = ("RB-PROTO-1", "RB-PROTO-2", "RB-PROTO-3", "RB-PROTO-4")


def exported_case(
    request: Mapping[str, object], clauses: Sequence[str], line: str | None = None, /
) -> Case:
    """A case for a request a property failed on: its ID derived from its content.

    It cites the property's clauses that a request of its op can tell apart,
    and expects what the model allows; ``line`` is the exact line sent, kept
    when it is not ``request`` encoded.
    """
    op = request.get("op")
    possible = (*_OP_CLAUSES.get(op, ()), *_PROTOCOL_CLAUSES) if isinstance(op, str) else ()
    cited = [clause for clause in clauses if clause in possible] or ["RB-PROTO-4"]
    sent = encode(request) if line is None else line
    digest = hashlib.sha256(sent.encode("utf-8")).hexdigest()[:12]
    name = op.replace("_", "-").lower() if isinstance(op, str) and op.isascii() else "request"
    case_id = f"{re.sub(r'[^a-z0-9-]', '', name) or 'request'}-{digest}"
    return _case(case_id, cited, dict(request), line)
