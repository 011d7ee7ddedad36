# SPDX-License-Identifier: MIT OR Apache-2.0
"""An adapter that misbehaves on purpose: ``python tests/fakes/broken_adapter.py HOW [OP]``.

It serves the reference correctly, except on requests whose op is OP (every
request when OP is left out), where it does HOW.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ssm_rollback_spec import rollback
from ssm_rollback_spec.harness import protocol
from ssm_rollback_spec.harness.adapter import respond

#: A file the holders' PIDs are added to, one a line, when this names one.
HOLDERS_ENV = "BROKEN_ADAPTER_HOLDERS"

_HOW = (
    "crash",
    "hang",
    "non-json",
    "wrong-shape",
    "extra-lines",
    "silent-exit",
    "exit-zero",
    "stderr-flood",
    "grandchild-hang",
    "detached-holder",
    "group-holder",
    "ignore-sigterm",
    "no-flush",
)


def _misbehave(how: str, line: str) -> None:
    out = sys.stdout
    if how == "crash":
        sys.stderr.write("broken adapter: about to crash\n")
        sys.stderr.flush()
        raise SystemExit(3)
    if how == "hang":
        sys.stderr.write("broken adapter: hanging\n")
        sys.stderr.flush()
        time.sleep(3600)
    if how == "non-json":
        out.write("this is not json\n")
    elif how == "wrong-shape":
        out.write(json.dumps({"result": "snapshot"}) + "\n")
    elif how == "extra-lines":
        reply = protocol.encode(respond(rollback, line))
        out.write(reply + "\n" + reply + "\n")
    elif how == "silent-exit":
        raise SystemExit(0)
    elif how == "exit-zero":
        sys.stderr.write("broken adapter: leaving early\n")
        raise SystemExit(0)
    elif how == "stderr-flood":
        sys.stderr.write("noise\n" * 100_000)
        out.write("{\n")
    elif how == "grandchild-hang":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        sys.stderr.write(f"grandchild {child.pid}\n")
        sys.stderr.flush()
        time.sleep(3600)
    out.flush()


_SLEEPER = [sys.executable, "-c", "import time; time.sleep(3600)"]


def _leave_a_holder(*, own_session: bool) -> None:
    # A child that keeps this adapter's stdout open after the adapter exits,
    # in the adapter's process group or in a session of its own.
    child = subprocess.Popen(_SLEEPER, start_new_session=own_session)
    sys.stderr.write(f"holder {child.pid}\n")
    sys.stderr.flush()
    # A run may start the adapter more than once and show only some of its
    # stderr: the test that must end the holders reads them all from here.
    record = os.environ.get(HOLDERS_ENV)
    if record:
        with Path(record).open("a", encoding="ascii") as holders:
            holders.write(f"{child.pid}\n")


def main() -> int:
    if len(sys.argv) not in {2, 3} or sys.argv[1] not in _HOW:
        sys.stderr.write(f"usage: broken_adapter.py {{{','.join(_HOW)}}} [OP]\n")
        return 2
    how = sys.argv[1]
    only = sys.argv[2] if len(sys.argv) == 3 else None
    # These break nothing a request can see: they misbehave around it.
    if how == "ignore-sigterm":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        how = "hang"
    elif how in {"detached-holder", "group-holder"}:
        _leave_a_holder(own_session=how == "detached-holder")
        how = ""
    if how == "no-flush":
        _serve_without_flushing()
        return 0
    for line in sys.stdin:
        op = json.loads(line).get("op") if line.strip().startswith("{") else None
        if how and (only is None or op == only):
            _misbehave(how, line)
        else:
            sys.stdout.write(protocol.encode(respond(rollback, line)) + "\n")
            sys.stdout.flush()
    return 0


def _serve_without_flushing() -> None:
    # The mistake a new adapter makes: replies left in a buffer until exit,
    # whatever PYTHONUNBUFFERED says about sys.stdout.
    with open(sys.stdout.fileno(), "wb", buffering=1 << 16, closefd=False) as out:
        out.writelines(
            protocol.encode(respond(rollback, line)).encode() + b"\n" for line in sys.stdin
        )


if __name__ == "__main__":
    sys.exit(main())
