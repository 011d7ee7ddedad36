# SPDX-License-Identifier: MIT OR Apache-2.0
"""An adapter caught mid-run: ``python -m tests.fakes.slow_adapter PID_FILE``.

It answers ``describe`` as the reference does, at once, so that a command's
preflight passes. On its first other request it starts a child of its own
(a sleeper, in its process group, as an engine's worker would be), writes
``ADAPTER_PID CHILD_PID`` to PID_FILE (whole, by a rename), and then waits a
minute before it answers: a command stopped now is stopped mid-run, with
its adapter and the adapter's child both up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

from ssm_rollback_spec import rollback
from ssm_rollback_spec.harness.adapter import respond

#: How long the first request after ``describe`` waits for its reply.
SLOW_SECONDS: Final = 60.0


def main() -> int:
    pid_file = Path(sys.argv[1])
    written = False
    for line in sys.stdin:
        if not written and json.loads(line).get("op") != "describe":
            sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            partial = pid_file.with_name(f"{pid_file.name}.{os.getpid()}")
            partial.write_text(f"{os.getpid()} {sleeper.pid}\n", encoding="utf-8")
            partial.replace(pid_file)
            written = True
            time.sleep(SLOW_SECONDS)
        sys.stdout.write(json.dumps(respond(rollback, line)) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
