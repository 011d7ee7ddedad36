# SPDX-License-Identifier: MIT OR Apache-2.0
"""llama.cpp's own server judged by ``serve-check``, with one slot and with several.

``llama-server`` is built from the tier's release source (adapters/llama-cpp/build.py
``--server``: llama.cpp in llama-cpp-python's sdist, cached as the tier's build is)
and serves the tier's tiny Qwen3.5 GGUF with its test tokenizer on loopback,
taking token-id prompts on ``/completion``. The target speculates with
ngram-simple, its lookup and draft sizes set so that short prompts draft
(its defaults, lookups of 12 and drafts of 48, draft nothing on them). The
reference is the same server with no speculation; a calibration server
speculates with a lookup longer than any prompt, so that it never drafts and
measures the verify path's rounding with no rollback. Each run writes its
``--json`` report to build/results/serving/.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

from tests.child import ROOT
from tests.llamacpp.engine import AdapterError, build_server

if TYPE_CHECKING:
    from tests.llamacpp.engine import Built, OwnTest

pytestmark = pytest.mark.serving

#: The m-gram a lookup drafts: K = 4 rows a verify.
K: Final = 3
#: Where the runs' reports go, for .ci/run's results page.
RESULTS: Final = ROOT / "build" / "results" / "serving"
_COMMAND: Final = str(Path(sys.executable).with_name("ssm-rollback-spec"))


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def server() -> OwnTest:
    """llama-server of the pinned release, built the first time and found in the cache after."""
    try:
        return build_server()
    except AdapterError as error:
        pytest.fail(str(error), pytrace=False)


def _serving(binary: str, model: str, port: int, slots: int, lookup: int | None) -> str:
    command = [
        binary, "-m", model, "--host", "127.0.0.1", "--port", str(port),
        "-np", str(slots), "-c", str(512 * slots), "-t", "1", "--seed", "0",
    ]  # fmt: skip
    if lookup is not None:
        command += [
            "--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", str(lookup),
            "--spec-ngram-simple-size-m", str(K), "--spec-ngram-simple-min-hits", "1",
        ]  # fmt: skip
    return shlex.join(command)


def _judge(
    server: OwnTest, llamacpp: Built, slots: int, name: str, folder: Path
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    ports = {role: _port() for role in ("reference", "target", "calibrate")}
    lookups = {"reference": None, "target": 1, "calibrate": 64}
    arguments = [_COMMAND, "serve-check"]
    for role, port in ports.items():
        command = _serving(server["binary"], llamacpp["model"], port, slots, lookups[role])
        arguments += [f"--{role}", f"http://127.0.0.1:{port}", f"--{role}-cmd", command]
    RESULTS.mkdir(parents=True, exist_ok=True)
    report = RESULTS / f"llama-server-{name}.json"
    arguments += [
        "--server-logs", str(folder), "--json", str(report), "--vocab-size", "128",
        "--name", f"llama-server: ngram-simple, {name}",
        "--requests", "16", "--max-tokens", "24", "--concurrency", str(slots),
        "--num-drafts", str(K), "--block-size", "16",
    ]  # fmt: skip
    done = subprocess.run(
        arguments,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    sys.stdout.write(done.stdout + done.stderr)
    document: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    return done, document


def test_llama_server_with_one_slot_speculating_with_ngram_generates_as_without(
    server: OwnTest, llamacpp: Built, tmp_path: Path
) -> None:
    done, document = _judge(server, llamacpp, 1, "one-slot", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("serve-check: PASS: "), done.stdout
    assert document["accepted"] > 0, document


def test_llama_server_with_four_slots_speculating_with_ngram_generates_as_without(
    server: OwnTest, llamacpp: Built, tmp_path: Path
) -> None:
    # The tier's snapshot findings need llama.cpp's n_rs_seq snapshots, which llama-server
    # asks for only with MTP, EAGLE3, DFlash or DSpark drafters (common/common.h lines
    # 396-402, common/common.cpp line 1635): with ngram it restores its own checkpoint
    # on every partial accept (tools/server/server-context.cpp lines 3907-3936), so
    # several sequences beside each other do not reach them.
    done, document = _judge(server, llamacpp, 4, "four-slots", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("serve-check: PASS: "), done.stdout
    assert document["accepted"] > 0, document
