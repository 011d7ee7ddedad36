# SPDX-License-Identifier: MIT OR Apache-2.0
"""The protocol's versions: one minor version per change the wire has seen.

Version 2.0 is the page as it first said version 2; each later change a
request or a reply can show (an operation, a field, a pipeline, a form of
``replay_batch`` entry, which names an adapter is sent) is the next minor
version (docs/protocol.md, "Versions"). None takes back what an earlier one
allowed. An adapter may name the version it implements in its ``describe``
(``"protocol": "2.4"``, :func:`described_version`); the suite then sends it
only what that version had, by the names it had. Standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from .protocol import PROTOCOL_VERSION, encode_value

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "CHANGES",
    "CURRENT",
    "DESCRIBE_MEMBER",
    "FORMS_SINCE",
    "MODEL",
    "PIPELINES_SINCE",
    "RENAME",
    "REPLAY",
    "REPLAY_BATCH",
    "ProtocolVersion",
    "ProtocolVersionError",
    "described_version",
]

#: The ``describe`` member that names the protocol version an adapter implements.
DESCRIBE_MEMBER: Final = "protocol"

_SHAPE: Final = re.compile(r"(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})")


class ProtocolVersionError(ValueError):
    """A ``describe``'s ``protocol`` member is not a version this suite can judge."""


@dataclass(frozen=True, order=True)
class ProtocolVersion:
    """A protocol version, ``major.minor``; later versions compare greater."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


#: Each minor version of protocol 2 and what it added, in order (the page's
#: Changes section states the same, one line each).
CHANGES: Final = (
    "the page as version 2 first said it",
    "the opt-in replay operation",
    "replay's raw gate inputs and the pipelines vllm-bf16, sglang-bf16 and fla-bf16",
    "describe's optional replay member",
    "the pipeline bf16-rows-fp32-state renamed transformers-bf16, the old name kept",
    "race and race_cells asked with spans",
    "describe's optional release member",
    "the opt-in replay_batch operation",
    "the pipeline ggml-f32",
    "the replay_batch form prompt-chunks",
    "the opt-in model operation and describe's model member",
    "the replay_batch form prefix-hits",
    "an adapter sent only the names its protocol had; describe's optional protocol member",
)

#: The version this suite implements: the last of :data:`CHANGES`.
CURRENT: Final = ProtocolVersion(PROTOCOL_VERSION, len(CHANGES) - 1)

#: The version that added ``replay``.
REPLAY: Final = ProtocolVersion(PROTOCOL_VERSION, 1)
#: The version that renamed ``bf16-rows-fp32-state``: an adapter naming an
#: earlier one is sent the old name.
RENAME: Final = ProtocolVersion(PROTOCOL_VERSION, 4)
#: The version that added ``replay_batch``.
REPLAY_BATCH: Final = ProtocolVersion(PROTOCOL_VERSION, 7)
#: The version that added ``model``.
MODEL: Final = ProtocolVersion(PROTOCOL_VERSION, 10)

#: The version that added each pipeline, by its current name.
PIPELINES_SINCE: Final[Mapping[str, ProtocolVersion]] = {
    "float64": REPLAY,
    "transformers-bf16": REPLAY,
    "vllm-bf16": ProtocolVersion(PROTOCOL_VERSION, 2),
    "sglang-bf16": ProtocolVersion(PROTOCOL_VERSION, 2),
    "fla-bf16": ProtocolVersion(PROTOCOL_VERSION, 2),
    "ggml-f32": ProtocolVersion(PROTOCOL_VERSION, 8),
}

#: The version that added each form of ``replay_batch`` entry beyond the first.
FORMS_SINCE: Final[Mapping[str, ProtocolVersion]] = {
    "prompt-chunks": ProtocolVersion(PROTOCOL_VERSION, 9),
    "prefix-hits": ProtocolVersion(PROTOCOL_VERSION, 11),
}


def described_version(described: Mapping[str, object], /) -> ProtocolVersion | None:
    """The version a ``describe`` reply's ``ok`` value names; None when it names none.

    Raises:
        ProtocolVersionError: the member is not a text ``"2.N"``, or names a
            version newer than :data:`CURRENT`, which this suite cannot judge.
    """
    if DESCRIBE_MEMBER not in described:
        return None
    value = described[DESCRIBE_MEMBER]
    match = _SHAPE.fullmatch(value) if isinstance(value, str) else None
    if match is None or int(match[1]) != PROTOCOL_VERSION:
        raise ProtocolVersionError(
            f'describe\'s protocol must be a text "{PROTOCOL_VERSION}.N" naming a protocol '
            f"version, got {encode_value(value)}"
        )
    version = ProtocolVersion(int(match[1]), int(match[2]))
    if version > CURRENT:
        raise ProtocolVersionError(
            f"the adapter implements protocol {version}, newer than this suite knows "
            f"({CURRENT}): upgrade ssm-rollback-spec"
        )
    return version
