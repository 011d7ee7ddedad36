# SPDX-License-Identifier: MIT OR Apache-2.0
"""An adapter that names its protocol version: ``python -m tests.fakes.versioned_adapter VERSION``.

It computes what ``tests/fakes/first_replay_adapter.py`` does and knows the
same two pipelines by their first names alone, but its ``describe`` lists
them as the page names them now (``float64``, ``transformers-bf16``, both
layouts) and names ``VERSION`` as its ``protocol``. Only the version tells
the suite to send it the old name: named before the rename (2.4), it passes;
named after, it refuses ``transformers-bf16`` and fails. A version newer than
the suite knows is refused before the run (docs/protocol.md, "Versions").
"""

from __future__ import annotations

import sys

from ssm_rollback_spec.harness import protocol
from ssm_rollback_spec.harness.adapter import serve_lines
from ssm_rollback_spec.harness.replay_wire import ReplayLayout
from tests.fakes.first_replay_adapter import DESCRIBE
from tests.fakes.first_replay_adapter import reply as first_reply


def describe(version: str, /) -> dict[str, object]:
    """Its ``describe``'s ``ok`` value, naming ``version``."""
    listed = {
        "pipelines": ["float64", "transformers-bf16"],
        "layouts": [layout.value for layout in ReplayLayout],
        "designs": [],
    }
    return DESCRIBE | {"protocol": version, "replay": listed}


def reply(line: str, version: str, /) -> dict[str, object]:
    """Its reply to one request line."""
    try:
        op = protocol.decode_request(line).get("op")
    except protocol.ProtocolError as error:
        return protocol.error_reply(error.kind, str(error))
    if op == "describe":
        return protocol.ok_reply(describe(version))
    return first_reply(line, None)


def main() -> int:
    if len(sys.argv) != 2:
        sys.stderr.write("usage: versioned_adapter.py VERSION\n")
        return 2
    version = sys.argv[1]
    serve_lines(lambda line: reply(line, version), sys.stdin.buffer, sys.stdout.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
