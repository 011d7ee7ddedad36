# SPDX-License-Identifier: MIT OR Apache-2.0
"""Every figure ``size`` prints for the sglang views' fit, against SGLang 0.5.23's own sizing.

Runs ``tests/planners/sglang_planner.py`` in the planners venv
(``tests/planners/install.sh``; ``$PLANNERS_PYTHON`` names another
interpreter), over the example configs at TP 1 and 2 with 1, 3 and 7 drafts,
and on Qwen3-Next with no drafts, without the radix cache and with
ReplaySSM, at several memories and fractions.
"""

from __future__ import annotations

from typing import Any, Final

import pytest

from tests.child import ROOT
from tests.planners.run import run_planner, size_report

pytestmark = pytest.mark.planners

EXAMPLES: Final = ROOT / "examples"
QWEN3_NEXT: Final = EXAMPLES / "qwen3-next-80b-a3b-instruct.config.json"
PLANNER: Final = ROOT / "tests" / "planners" / "sglang_planner.py"
#: Each example and the weights it loads per GPU at TP 1, an input: about the Qwen3.5
#: checkpoints' BF16 size, and Qwen3-Next's at one byte a parameter (80B in BF16 would
#: not fit one GPU).
WEIGHTS: Final = {
    QWEN3_NEXT: 80_000_000_000,
    EXAMPLES / "qwen3.5-27b.config.json": 56_000_000_000,
    EXAMPLES / "qwen3.5-35b-a3b.config.json": 70_000_000_000,
}


def _cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    for config, weights in WEIGHTS.items():
        for tp in (1, 2):
            cases += [
                {"config": str(config), "tp": tp, "drafts": s, "weights_bytes": weights // tp}
                for s in (1, 3, 7)
            ]
    base = {"config": str(QWEN3_NEXT), "tp": 1, "drafts": 3, "weights_bytes": 80_000_000_000}
    cases += [
        {**base, "drafts": 0},
        {**base, "radix_cache": False},
        {**base, "replayssm": True},
        {**base, "replayssm": True, "tp": 2, "weights_bytes": 40_000_000_000},
    ]
    fractions = (0.85, 0.9, 0.8)
    for index, case in enumerate(cases):
        case["gpu_memory_bytes"] = 140_000_000_000 + index * 1_000_000_000
        case["mem_fraction_static"] = fractions[index % len(fractions)]
        case["context_length"] = (32_768, 8_192)[index % 2]
    # The mamba pool's share each way of the default 0.9, and a cap SGLang lowers,
    # each on the memory of the launch it varies.
    replay = cases[-2]
    launch = {name: value for name, value in replay.items() if name != "replayssm"}
    cases += [
        launch,
        {**launch, "flags": {"mamba_full_memory_ratio": 0.5}},
        {**launch, "flags": {"mamba_full_memory_ratio": 2.0}},
        {**replay, "flags": {"mamba_full_memory_ratio": 0.5}},
        {**launch, "flags": {"max_running_requests": 64}},
    ]
    return cases


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return run_planner(PLANNER, _cases(), tmp_path_factory.mktemp("planners"), timeout=1800)


def _size(case: dict[str, Any]) -> dict[str, Any]:
    arguments = [
        "size", "--config", case["config"], "--tp", str(case["tp"]),
        "--num-drafts", str(case["drafts"]), "--mtp-slots", "1",
        "--engine", "sglang-replayssm" if case.get("replayssm") else "sglang",
        "--mem-fraction-static", str(case["mem_fraction_static"]),
        "--gpu-memory-bytes", str(case["gpu_memory_bytes"]),
        "--weights-bytes", str(case["weights_bytes"]),
        "--context-length", str(case["context_length"]), "--json", "-",
    ]  # fmt: skip
    if not case.get("radix_cache", True):
        arguments.append("--disable-radix-cache")
    for flag, value in case.get("flags", {}).items():
        arguments += [f"--{flag.replace('_', '-')}", str(value)]
    return size_report(arguments)


def test_every_case_was_planned(planned: list[dict[str, Any]]) -> None:
    assert [case["config"] for case in planned] == [case["config"] for case in _cases()]
    assert len(planned) == 27


def test_size_prints_sglangs_own_figures(planned: list[dict[str, Any]]) -> None:
    for case in planned:
        designs = _size(case)["fit"]["designs"]
        # SGLang as it runs: its own figures, or with the flag, ReplaySSM's design.
        (ours,) = [
            d
            for d in designs
            if d["design"] == ("replayssm" if case.get("replayssm") else "snapshot")
        ]
        figures = ("max_total_num_tokens", "max_running_requests", "max_mamba_cache_size")
        assert {name: ours[name] for name in figures} == {name: case[name] for name in figures}, (
            case
        )
        assert ours["mamba_bytes_per_state"] == case["mamba_bytes_per_state"], case


def test_the_mamba_share_moves_the_pools_in_sglang_as_in_size(
    planned: list[dict[str, Any]],
) -> None:
    # The same launch at the default share and at others: SGLang's own figures
    # move (and size's equal them, above); a larger share, more states.
    def figures(case: dict[str, Any]) -> tuple[int, int]:
        return case["max_mamba_cache_size"], case["max_total_num_tokens"]

    inputs = {
        "config", "tp", "drafts", "weights_bytes", "replayssm", "radix_cache",
        "gpu_memory_bytes", "mem_fraction_static", "context_length",
    }  # fmt: skip
    shares = [case for case in planned if "mamba_full_memory_ratio" in case.get("flags", {})]
    assert len(shares) == 3
    for case in shares:
        (default,) = [
            other
            for other in planned
            if not other.get("flags") and all(other.get(key) == case.get(key) for key in inputs)
        ]
        states, tokens = figures(case)
        more = case["flags"]["mamba_full_memory_ratio"] > sglang_default_share()
        assert (states > figures(default)[0]) is more, case
        assert (tokens < figures(default)[1]) is more, case


def sglang_default_share() -> float:
    """SGLang's fallback ``--mamba-full-memory-ratio``, as ``size`` takes it."""
    return 0.9
