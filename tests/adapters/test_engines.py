# SPDX-License-Identifier: MIT OR Apache-2.0
"""The engine adapters' protocol, without their kernels: describe, refusals, the contract's ops.

Torch and the engines' kernels load on an adapter's first replay, so all of
this runs with the suite's own Python; the kernels themselves are the
``kernels`` tier's (tests/kernels, docs/engines.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Final

import pytest

from adapters.engines.registry import ENGINES
from adapters.engines.vllm.prefix_cache import PrefixCache
from tests.child import ROOT
from tests.properties.replay_reference import SMALL_REPLAY

PROTOCOL_PAGE: Final = ROOT / "docs" / "protocol-replay.md"
_OFFERS: Final = {
    "vllm": ("vllm-bf16", "snapshot"),
    "sglang": ("sglang-bf16", "sglang-gdn-replayssm"),
    "fla": ("fla-bf16", "minimal-pre-conv"),
}
#: The release each adapter's describe states: its engine's pinned wheel.
RELEASES: Final = {"vllm": "vllm==0.33.0", "sglang": "sglang==0.5.23", "fla": "fla-core==0.6.0"}
# The adapters import the package beside them, as the kernels tier's venv installs it.
_ENV: Final = {**os.environ, "PYTHONPATH": str(ROOT)}


def _exchange(engine: str, *requests: object, arguments: tuple[str, ...] = ()) -> list[object]:
    lines = "".join(json.dumps(request) + "\n" for request in requests)
    finished = subprocess.run(
        [sys.executable, "-m", f"adapters.engines.{engine}", *arguments],
        input=lines,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=ROOT,
        env=_ENV,
    )
    assert finished.stderr == ""
    return [json.loads(line) for line in finished.stdout.splitlines()]


@pytest.mark.parametrize("engine", sorted(_OFFERS))
def test_each_engine_adapter_describes_the_one_pipeline_and_design_it_computes(
    engine: str,
) -> None:
    pipeline, design = _OFFERS[engine]
    [reply] = _exchange(engine, {"op": "describe"})
    variant = ", rule recurrent" if engine == "fla" else ""
    offer: dict[str, object] = {
        "pipelines": [pipeline],
        "layouts": ["pre-conv"],
        "designs": [design],
    }
    # The engines with a batch form take prompt chunks beside verifies (docs/protocol.md).
    if ENGINES[engine].replay_batch is not None:
        offer["batch"] = ["prompt-chunks"]
    assert reply == {
        "ok": {
            "name": f"{engine} engine kernels (adapters/engines){variant}",
            "usize_bits": 64,
            "release": RELEASES[engine],
            "replay": offer,
        }
    }


@pytest.mark.parametrize(
    ("flags", "forms"),
    [
        ((), ["prompt-chunks"]),
        (("--cache-mode", "align", "--block-size", "8"), ["prompt-chunks", "prefix-hits"]),
        (("--block-size", "4"), ["prompt-chunks", "prefix-hits"]),
        (("--block-size", "4", "--runner", "v2"), ["prompt-chunks"]),
        (("--cache-mode", "none", "--block-size", "4"), ["prompt-chunks"]),
    ],
)
def test_vllm_lists_prefix_hits_where_its_align_copies_save_blocks_a_join_can_hit(
    flags: tuple[str, ...], forms: list[str]
) -> None:
    [reply] = _exchange("vllm", {"op": "describe"}, arguments=flags)
    assert reply["ok"]["replay"]["batch"] == forms  # type: ignore[index]


def test_the_prefix_cache_serves_the_longest_boundary_cached_before_this_step() -> None:
    tokens = [bytes([n]) for n in range(10)]
    cache = PrefixCache(4)
    row = [5, 6, 7]
    cache.save(tokens[:3], row, 0)  # not a boundary: nothing cached
    cache.save(tokens[:4], row, 0)
    cache.save(tokens[:8], row, 1)
    assert cache.hit(tokens[:9], 1) == (4, 5)  # the block of 8 was cached this step
    assert cache.hit(tokens[:9], 2) == (8, 6)
    assert cache.hit(tokens[:8], 2) == (4, 5)  # never all of a prompt's tokens
    assert cache.hit([b"x", *tokens[1:9]], 2) is None
    cache.drop([6])
    assert cache.hit(tokens[:9], 2) == (4, 5)


def test_the_registry_lists_each_engine_with_the_pipeline_design_and_release_it_describes() -> None:
    # A new engine is a module and a row in adapters/engines/registry.py; the
    # describe test above runs each row's adapter by its name and pins its reply.
    rows = {
        name: (row.pipeline, row.design, row.wheel.requirement) for name, row in ENGINES.items()
    }
    assert rows == {name: (*_OFFERS[name], RELEASES[name]) for name in _OFFERS}


def test_the_control_build_says_so_in_its_name() -> None:
    [reply] = _exchange("vllm", {"op": "describe"}, arguments=("--control", "off-by-one"))
    assert reply["ok"]["name"] == (  # type: ignore[index]
        "vllm engine kernels (adapters/engines), control build: off by one in the accepted count"
    )


def test_the_protocol_pages_describe_with_replay_is_the_vllm_adapters() -> None:
    page = PROTOCOL_PAGE.read_text(encoding="utf-8").splitlines()
    documented = next(line[2:] for line in page if line.startswith('< {"ok":{"name":"vllm'))
    assert _exchange("vllm", {"op": "describe"}) == [json.loads(documented)]


@pytest.mark.parametrize("engine", sorted(_OFFERS))
def test_an_engine_adapter_refuses_a_pipeline_it_does_not_compute_in_one_line(
    engine: str,
) -> None:
    pipeline, _ = _OFFERS[engine]
    [reply] = _exchange(engine, SMALL_REPLAY)
    assert reply == {
        "error": {
            "kind": "bad-request",
            "message": f"{engine}'s kernels compute pipeline {pipeline}, not float64 "
            "(see its describe)",
        }
    }


def test_an_engine_pipeline_request_without_the_raw_gate_inputs_is_refused() -> None:
    [reply] = _exchange("vllm", SMALL_REPLAY | {"pipeline": "vllm-bf16"})
    assert reply == {
        "error": {
            "kind": "bad-request",
            "message": "pipeline vllm-bf16 needs the raw gate inputs: a_log, dt_bias, "
            "and a and b on every row",
        }
    }


def test_an_engine_adapter_answers_the_contracts_operations_as_the_reference() -> None:
    requests = [
        {"op": "parse", "text": "Replay "},
        {"op": "row_bytes", "qkvz_elems": 12288, "nv": 32},
        {"op": "verify_entry", "mode": "replay"},
        {"op": "rewind"},
    ]
    reference = subprocess.run(
        [sys.executable, "-m", "ssm_rollback_spec.harness.adapter"],
        input="".join(json.dumps(request) + "\n" for request in requests),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=ROOT,
    )
    expected = [json.loads(line) for line in reference.stdout.splitlines()]
    assert _exchange("fla", *requests) == expected
