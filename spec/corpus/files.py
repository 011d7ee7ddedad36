# SPDX-License-Identifier: MIT OR Apache-2.0
"""A corpus directory's files: their text, the manifest that pins them, and loading them back.

Both corpora use this one engine: the protocol corpus (``vectors/``, built by
``ssm_rollback_spec.corpus.protocol_cases``) and the replay corpus (``vectors/replay/``, built by
``ssm_rollback_spec.corpus.replay_cases``). A corpus is a directory of case files, each a JSON
object holding its cases under ``cases``, one case a line; ``manifest.json``
names the schema file and pins every case file by its case count and its
SHA-256. Writing and reading need only the standard library, and every read
is bounded (:func:`..harness.files.read_json_file`).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypedDict, cast

from ..harness.files import JsonFileError, read_json_file

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "MANIFEST_FILE",
    "SCHEMA_FILE",
    "CorpusFile",
    "ManifestEntry",
    "VectorError",
    "dump_document",
    "load_corpus",
    "render_corpus_files",
    "schema_text",
    "sha256_hex",
]

#: The manifest's name in every corpus directory.
MANIFEST_FILE: Final = "manifest.json"

#: The schema's name, as every manifest gives it.
SCHEMA_FILE: Final = "schema.json"


class VectorError(ValueError):
    """A corpus, skip list or run that cannot be used as it is."""


class ManifestEntry(TypedDict):
    """One corpus file as the manifest pins it."""

    path: str
    cases: int
    sha256: str


class CorpusFile(TypedDict):
    """One case file read back: its name in the manifest and its cases, not yet checked."""

    path: str
    cases: list[object]
    document: dict[str, object]


_FILE_NAME: Final = re.compile(r"[a-z_]+\.json")
_SHA256: Final = re.compile(r"[0-9a-f]{64}")


def sha256_hex(text: str, /) -> str:
    """The SHA-256 of a corpus file's text (ASCII), as the manifest writes it."""
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _compact(value: object, /) -> str:
    # ASCII only, so the files are byte-stable whatever the vendoring tool.
    return json.dumps(value, ensure_ascii=True, separators=(", ", ": "))


def dump_document(document: Mapping[str, object], /) -> str:
    """A corpus document's exact text: one line per case or file entry.

    Readable, and a change diffs as one line; ASCII, so byte-stable.
    """
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


#: The shipped schemas, one JSON file per corpus, beside this module.
_SCHEMAS: Final = Path(__file__).resolve().parent / "schemas"


def schema_text(corpus: str, /) -> str:
    """The exact text of a corpus's JSON schema (``"protocol"`` or ``"replay"``)."""
    return (_SCHEMAS / f"{corpus}.json").read_text(encoding="ascii")


def render_corpus_files(
    header: Mapping[str, object], documents: Mapping[str, Mapping[str, object]], /
) -> dict[str, str]:
    """Each case file's name and exact text, and ``manifest.json`` pinning them.

    ``header`` opens the manifest (the versions the corpus implements); its
    ``schema`` and ``files`` follow. Each document holds its cases under
    ``cases``.
    """
    texts = {name: dump_document(document) for name, document in documents.items()}
    entries: list[ManifestEntry] = [
        {
            "path": name,
            "cases": len(cast("list[object]", documents[name]["cases"])),
            "sha256": sha256_hex(text),
        }
        for name, text in texts.items()
    ]
    manifest = {**header, "schema": SCHEMA_FILE, "files": entries}
    texts[MANIFEST_FILE] = dump_document(manifest)
    return texts


def _read(directory: Path, name: str, /) -> tuple[bytes, object]:
    path = directory / name
    try:
        document = read_json_file(path)
    except JsonFileError as error:
        raise VectorError(f"{path}: {error}") from None
    return path.read_bytes(), document


def _manifest_entries(directory: Path, /) -> list[ManifestEntry]:
    _, manifest = _read(directory, MANIFEST_FILE)
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, list) or not files:
        raise VectorError(f"{directory / MANIFEST_FILE}: must list its files under 'files'")
    for index, entry in enumerate(files):
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("path"), str)
            or not _FILE_NAME.fullmatch(entry["path"])
            or type(entry.get("cases")) is not int
            or not isinstance(entry.get("sha256"), str)
            or not _SHA256.fullmatch(entry["sha256"])
        ):
            raise VectorError(
                f"{directory / MANIFEST_FILE}: files[{index}] must be "
                "{path: NAME.json, cases: COUNT, sha256: HEX}"
            )
    return cast("list[ManifestEntry]", files)


def load_corpus(directory: Path, /) -> list[CorpusFile]:
    """Every case file of the corpus in ``directory``, checked against its manifest.

    The caller checks each case against its own corpus's rules.

    Raises:
        VectorError: the manifest or a file is missing or unreadable, or a
            file's hash or case count does not match the manifest.
    """
    loaded: list[CorpusFile] = []
    for entry in _manifest_entries(directory):
        raw, document = _read(directory, entry["path"])
        if hashlib.sha256(raw).hexdigest() != entry["sha256"]:
            raise VectorError(f"{entry['path']}: SHA-256 differs from {MANIFEST_FILE}")
        cases = document.get("cases") if isinstance(document, dict) else None
        if not isinstance(cases, list):
            raise VectorError(f"{entry['path']}: must hold its cases under 'cases'")
        if len(cases) != entry["cases"]:
            raise VectorError(f"{entry['path']}: case count differs from {MANIFEST_FILE}")
        assert isinstance(document, dict)
        loaded.append({"path": entry["path"], "cases": cases, "document": document})
    return loaded
