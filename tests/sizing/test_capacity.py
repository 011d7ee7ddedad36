# SPDX-License-Identifier: MIT OR Apache-2.0
"""Before a launch: will the engine start, why each figure, the memory N requests need.

In-process and cheap: ``size`` is called through ``main``. What the engines'
own code says for the same inputs is the planners tier's
(``tests/planners/``); here the answers must agree with each other: the
largest value that starts starts and one more does not, the least memory
that starts starts and a byte less does not, a suffix reads as the number it
stands for, and the JSON keeps what was asked, as its schema says.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import jsonschema
import pytest

from ssm_rollback_spec.sizing import capacity
from ssm_rollback_spec.sizing.engines.sglang import facts as sglang
from ssm_rollback_spec.sizing.engines.sglang.unit import SGLANG_VIEW
from ssm_rollback_spec.sizing.presentation import TERMS, rejoined
from ssm_rollback_spec.sizing.review import model_from_config
from ssm_rollback_spec.sizing.state import Setup
from ssm_rollback_spec.sizing.unit import NOT_CHECKED, FitOutcome
from ssm_rollback_spec.tools.cli import main

if TYPE_CHECKING:
    from ssm_rollback_spec.sizing.capacity import SglangFitReport, VllmFitReport
    from ssm_rollback_spec.sizing.wording import Section

ROOT: Final = Path(__file__).resolve().parents[2]
SCHEMA: Final = ROOT / "spec" / "sizing" / "schemas" / "size.json"
QWEN3_5_27B: Final = ["size", "--config", "qwen3.5-27b", "--num-drafts", "3"]
#: The launch of vLLM #49064's kind: 10 GiB of KV cache, 128K tokens per request.
VLLM_LAUNCH: Final = [*QWEN3_5_27B, "--mtp-slots", "1", "--engine", "vllm"]
SGLANG_LAUNCH: Final = [
    *QWEN3_5_27B, "--mtp-slots", "1", "--engine", "sglang", "--mem-fraction-static", "0.85",
    "--gpu-memory-bytes", "140000000000", "--weights-bytes", "56000000000",
    "--context-length", "32768",
]  # fmt: skip


def _json(capsys: pytest.CaptureFixture[str], *arguments: str) -> dict[str, Any]:
    assert main([*arguments, "--json", "-"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    report: dict[str, Any] = json.loads(captured.out)
    return report


def _vllm(capsys: pytest.CaptureFixture[str], kv: str, *more: str) -> dict[str, Any]:
    return _json(
        capsys, *VLLM_LAUNCH, "--kv-cache-memory-bytes", kv, "--max-model-len", "131072", *more
    )


def test_vllms_default_max_num_seqs_refuses_where_the_blocks_are_fewer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    start = _vllm(capsys, "10GiB")["start"]
    assert start == {
        "starts": False,
        "says": 'vLLM raises "max_num_seqs (1024) exceeds available Mamba cache blocks (185)"'
        " for --max-num-seqs 1024 (vLLM's default on SM90)",
        "source": "vllm/config/compilation.py:1510-1533",
        "largest": "largest --max-num-seqs that starts: 185",
        "smallest_memory": "smallest memory that starts with --max-num-seqs 1024 (vLLM's default"
        " on SM90): --kv-cache-memory-bytes 59324235776 (55.25 GiB)",
    }


def test_the_largest_value_starts_and_one_more_does_not(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _vllm(capsys, "10GiB", "--max-num-seqs", "185")["start"]["starts"] is True
    assert _vllm(capsys, "10GiB", "--max-num-seqs", "186")["start"]["starts"] is False


def test_the_least_memory_starts_and_a_byte_less_does_not(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _vllm(capsys, "59324235776")["start"]["starts"] is True
    assert _vllm(capsys, "59324235775")["start"]["starts"] is False


def test_an_a100_defaults_to_256_sequences(capsys: pytest.CaptureFixture[str]) -> None:
    says = _vllm(capsys, "10GiB", "--gpu", "sm80")["start"]["says"]
    assert "--max-num-seqs 256 (vLLM's default on SM80)" in says


def test_a_request_that_does_not_fit_refuses_with_the_memory_that_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    start = _vllm(capsys, "1GiB", "--max-num-seqs", "1")["start"]
    assert start["starts"] is False
    assert start["source"] == "vllm/v1/core/kv_cache_planning.py:1533-1560"
    least = int(start["smallest_memory"].split("--kv-cache-memory-bytes ")[1].split()[0])
    for memory, starts in ((least, True), (least - 1, False)):
        report = _vllm(capsys, str(memory), "--max-num-seqs", "1")
        assert report["fit"]["designs"][0]["fits"] is starts
        assert report["start"]["starts"] is starts


def test_10g_and_128k_give_the_figures_of_10gib_and_131072(
    capsys: pytest.CaptureFixture[str],
) -> None:
    short = _json(capsys, *VLLM_LAUNCH, "--kv-cache-memory-bytes", "10G", "--max-model-len", "128K")
    long = _vllm(capsys, "10GiB")
    assert short["fit"] == long["fit"]
    assert short["start"] == long["start"]


def test_an_fp8_kv_cache_halves_the_attention_page_per_token_and_regrows_the_block(
    capsys: pytest.CaptureFixture[str],
) -> None:
    auto = _vllm(capsys, "10GiB")
    fp8 = _vllm(capsys, "10GiB", "--kv-cache-dtype", "fp8")
    # The GDN page (3,268,608 B) padded in steps of 64 tokens of 4,096 B, or of 2,048 B.
    assert (auto["snapshot"]["block_size"], fp8["snapshot"]["block_size"]) == (832, 1600)
    assert (auto["snapshot"]["padded_page_bytes"], fp8["snapshot"]["padded_page_bytes"]) == (
        832 * 4096,
        1600 * 2048,
    )
    assert (
        fp8["fit"]["designs"][0]["blocks_per_request"]
        < (auto["fit"]["designs"][0]["blocks_per_request"])
    )
    assert fp8["inputs"]["flags"]["--kv-cache-dtype"] == "fp8"


def test_the_mamba_share_moves_sglangs_pools_and_090_is_the_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    default = _json(capsys, *SGLANG_LAUNCH)["fit"]["designs"][0]
    same = _json(capsys, *SGLANG_LAUNCH, "--mamba-full-memory-ratio", "0.9")["fit"]["designs"][0]
    half = _json(capsys, *SGLANG_LAUNCH, "--mamba-full-memory-ratio", "0.5")["fit"]["designs"][0]
    assert same == default
    assert half["max_mamba_cache_size"] < default["max_mamba_cache_size"]
    assert half["max_total_num_tokens"] > default["max_total_num_tokens"]


def test_sglang_caps_the_running_requests_and_says_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = _json(capsys, *SGLANG_LAUNCH, "--max-running-requests", "64")
    up = report["fit"]["designs"][0]
    start, why = report["start"], {item["figure"]: item["why"] for item in report["why"]}
    running, states = up["max_running_requests"], up["max_mamba_cache_size"]
    assert running == states // 5 < 64
    assert start["starts"] is True
    assert start["largest"] == f"largest --max-running-requests it serves: {running}"
    assert why["why max_running_requests"].startswith(
        f"{running} = min(64 asked, {up['max_total_num_tokens']:,} tokens // 2,"
        f" {states} states // 5 per request)"
    )
    least = int(start["smallest_memory"].split("--gpu-memory-bytes ")[1].split()[0])
    for memory, serves in ((least, True), (least - 1, False)):
        flags = [*SGLANG_LAUNCH, "--max-running-requests", "64"]
        flags[flags.index("--gpu-memory-bytes") + 1] = str(memory)
        served = _json(capsys, *flags)["fit"]["designs"][0]["max_running_requests"]
        assert (served == 64) is serves


def test_sglangs_refusal_names_the_least_memory_that_starts_apart_from_what_serves_48(
    capsys: pytest.CaptureFixture[str],
) -> None:
    flags = list(SGLANG_LAUNCH)
    at = flags.index("--gpu-memory-bytes") + 1
    flags[at] = "60000000000"
    start = _json(capsys, *flags)["start"]
    assert start["starts"] is False
    starts, serves = start["smallest_memory"].split("; ")
    assert serves == "smallest memory that serves 48: --gpu-memory-bytes 233090363633 (217.1 GiB)"
    least = int(starts.removeprefix("smallest memory that starts: --gpu-memory-bytes ").split()[0])
    # It starts there, capped below 48 requests, and a byte less refuses.
    for memory, started in ((least, True), (least - 1, False)):
        flags[at] = str(memory)
        assert _json(capsys, *flags)["start"]["starts"] is started


def test_the_answer_says_how_many_requests_each_design_fits(
    capsys: pytest.CaptureFixture[str],
) -> None:
    vllm_flags = [*VLLM_LAUNCH, "--kv-cache-memory-bytes", "10G", "--max-model-len", "128K"]
    assert main(vllm_flags) == 0
    lines = rejoined(capsys.readouterr().out).splitlines()
    assert lines[2] == (
        "requests that fit        1.05x at --max-model-len 131,072 (137,774 tokens); with the"
        " seed's replay ring 1.11x, with ReplaySSM's ring 1.11x (estimates)"
    )
    assert main(SGLANG_LAUNCH) == 0
    lines = rejoined(capsys.readouterr().out).splitlines()
    assert lines[2] == (
        "requests that fit        max_running_requests 20, 15 of 32,768 tokens in its KV pool at"
        " once; with the seed's replay ring 38 and 15, with ReplaySSM's ring 36 and 15 (estimates)"
    )


def test_the_why_lines_are_behind_a_flag_and_always_in_the_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    flags = [*VLLM_LAUNCH, "--kv-cache-memory-bytes", "10G", "--max-model-len", "128K"]
    assert main(flags) == 0
    plain = capsys.readouterr().out
    assert main([*flags, "--why"]) == 0
    why = capsys.readouterr().out
    assert "will it start" in plain
    assert "why the block has its tokens" not in plain
    assert "why the block has its tokens" in why
    # Two reasons, then the terms (a blank line, their heading, one line each).
    shown = len(rejoined(plain).splitlines()) + 2 + 2 + len(TERMS)
    assert len(rejoined(why).splitlines()) == shown
    assert [item["figure"] for item in _json(capsys, *flags)["why"]] == [
        "why the block has its tokens",
        "why tokens are not blocks x block size",
    ]


def test_vllms_need_for_n_requests_is_the_least_memory_that_serves_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    needs = _json(capsys, *QWEN3_5_27B, "--batch", "8", "--context", "32K")["needs"]
    (vllm_need,) = [need for need in needs if need["engine"] == "vllm"]
    least = vllm_need["designs"][0]["bytes"]
    flags = ["--max-model-len", "32768", "--max-num-seqs", "8"]
    # Eight requests' blocks at the full length beside the null block; a byte less is not.
    for memory, serves in ((least, True), (least - 1, False)):
        fit = _json(capsys, *VLLM_LAUNCH, "--kv-cache-memory-bytes", str(memory), *flags)
        design = fit["fit"]["designs"][0]
        assert (design["num_blocks"] - 1 >= 8 * design["blocks_per_request"]) is serves
        assert fit["start"]["starts"] is True


def test_sglangs_need_serves_the_requests_and_a_byte_less_does_not() -> None:
    model = model_from_config(
        json.loads((ROOT / "examples" / "qwen3.5-27b.config.json").read_text(encoding="utf-8")), 1
    )
    setup = Setup()
    _, needs = SGLANG_VIEW.need(model, setup, requests=8, context=32_768, num_drafts=3)
    for index, need in enumerate(needs):
        assert need.bytes is not None
        for memory, serves in ((need.bytes, True), (need.bytes - 1, False)):
            asked = sglang.SglangMemory(memory, 0, 1.0, 32_768, 8)
            up = capacity.sglang_fit(model, setup, asked, num_drafts=3)[index].startup
            served = (
                up is not None
                and up.max_running_requests >= 8
                and up.max_total_num_tokens >= 8 * 32_768
            )
            assert served is serves, need


def test_batch_stands_alone_one_request_is_the_default_and_zero_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = _json(capsys, *QWEN3_5_27B, "--batch", "64")
    assert (report["replay"]["preflight_slots"], report["replay"]["pool_slots"]) == (65, 65)
    with pytest.raises(SystemExit) as raised:
        main([*QWEN3_5_27B, "--mtp-slots", "0"])
    assert raised.value.code == 2
    assert capsys.readouterr().err == (
        "ssm-rollback-spec: error: --mtp-slots: must be at least 1, got 0"
        " (see ssm-rollback-spec size --help)\n"
    )
    # Neither: one request, so a capacity question needs neither flag.
    alone = _json(capsys, *QWEN3_5_27B)
    assert (alone["replay"]["preflight_slots"], alone["replay"]["pool_slots"]) == (2, 2)


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (
            ["--bogus"],
            (
                "ssm-rollback-spec: error: unrecognized arguments: --bogus"
                " (see ssm-rollback-spec size --help)"
            ),
        ),
        (
            ["--kv-cache-memory-bytes", "0.1GiB"],
            (
                "ssm-rollback-spec: error: --kv-cache-memory-bytes: not a whole number of bytes:"
                " '0.1GiB' is 107,374,182.4 B (see ssm-rollback-spec size --help)"
            ),
        ),
        (
            ["--engine", "vlm"],
            (
                "ssm-rollback-spec: error: --engine: invalid choice: 'vlm' (choose from 'module',"
                " 'vllm', 'sglang', 'sglang-replayssm', 'llama.cpp', 'vllm-align')"
                " (see ssm-rollback-spec size --help)"
            ),
        ),
    ],
)
def test_a_bad_flag_is_one_line(
    capsys: pytest.CaptureFixture[str], flags: list[str], line: str
) -> None:
    with pytest.raises(SystemExit) as raised:
        main([*QWEN3_5_27B, "--mtp-slots", "1", *flags])
    assert raised.value.code == 2
    assert capsys.readouterr().err == f"{line}\n"


@pytest.mark.parametrize(
    ("typed", "hint"),
    [
        ("qwen3-next", "; did you mean --config qwen3-next-80b-a3b-instruct?"),
        ("examples/qwen3.5-27b.config.json", "; did you mean --config qwen3.5-27b?"),
        ("qwen3.5-72b", "; did you mean --config qwen3.5-27b or qwen3.5-35b-a3b?"),
        ("/nowhere/model.json", ""),
    ],
)
def test_a_misspelt_config_suggests_the_shipped_names(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    typed: str,
    hint: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["size", "--config", typed, "--num-drafts", "3", "--mtp-slots", "1"]) == 2
    assert capsys.readouterr().err == (
        f"ssm-rollback-spec: error: --config {typed}: No such file or directory{hint}\n"
    )


def test_the_json_records_what_was_asked(capsys: pytest.CaptureFixture[str]) -> None:
    inputs = _vllm(capsys, "10G", "--no-enable-prefix-caching")["inputs"]
    assert inputs["config"] == "qwen3.5-27b"
    assert Path(inputs["config_path"]).name == "qwen3.5-27b.config.json"
    assert (inputs["engine"], inputs["release"], inputs["num_drafts"]) == (
        "vllm",
        "vLLM 0.33.0",
        [3],
    )
    assert {
        "--kv-cache-memory-bytes": 10 * 2**30,
        "--max-model-len": 131_072,
        "--mtp-slots": 1,
        "--no-enable-prefix-caching": True,
        "--tp": 1,
    }.items() <= inputs["flags"].items()


@pytest.mark.parametrize(
    "flags",
    [
        ["--mtp-slots", "1"],
        ["--mtp-slots", "1", "--engine", "vllm", "--kv-cache-memory-bytes", "1G",
         "--max-model-len", "4K"],
        SGLANG_LAUNCH[len(QWEN3_5_27B) :],
        ["--batch", "4", "--context", "8192"],
        ["--mtp-slots", "2", "--num-drafts", "1-3"],
    ],
)  # fmt: skip
def test_every_report_validates_against_the_schema(
    capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    arguments = [*QWEN3_5_27B, *flags]
    if "--num-drafts" in flags:
        arguments = ["size", "--config", "qwen3.5-27b", *flags]
    jsonschema.Draft202012Validator(schema).validate(_json(capsys, *arguments))


def test_the_schema_rejects_a_report_without_its_inputs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    report = _json(capsys, *QWEN3_5_27B, "--mtp-slots", "1")
    del report["inputs"]
    assert not jsonschema.Draft202012Validator(schema).is_valid(report)


class _Unchecked(FitOutcome):
    """A fit whose engine's unit models no startup check."""

    def section(self) -> Section:
        return "heading", []

    def report(self) -> VllmFitReport | SglangFitReport:
        raise NotImplementedError


def test_an_engine_without_a_startup_check_says_so() -> None:
    outcome = _Unchecked()
    assert outcome.start() is NOT_CHECKED
    assert outcome.start().line() == "not modelled: this engine's unit has no startup check"
    assert outcome.why() == []


def _before_a_launch() -> list[tuple[str, list[str]]]:
    text = (ROOT / "docs" / "sizing-cli.md").read_text(encoding="utf-8")
    section = text.split("## Before a launch\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(sh|text)\n(.*?)```", section, flags=re.DOTALL)
    pairs = []
    for (kind, command), (shown_kind, shown) in zip(blocks[::2], blocks[1::2], strict=True):
        assert (kind, shown_kind) == ("sh", "text")
        pairs.append((command.strip(), shown.splitlines()))
    return pairs


def test_before_a_launch_shows_what_its_commands_print(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The documents test runs each command from an install; here each shown
    # line must be one the command prints, in the order it prints them.
    pairs = _before_a_launch()
    assert len(pairs) == 5
    for command, shown in pairs:
        program, *arguments = shlex.split(command)
        assert program == "ssm-rollback-spec"
        assert main(arguments) == 0
        printed = iter(capsys.readouterr().out.splitlines())
        for line in shown:
            assert any(line == candidate for candidate in printed), (command, line)


def test_under_utilization_the_least_memory_is_a_utilization_that_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    flags = [
        *VLLM_LAUNCH, "--gpu-memory-utilization", "0.9", "--gpu-memory-bytes", "80GiB",
        "--weights-bytes", "56000000000", "--activation-bytes", "4GiB", "--max-model-len", "32K",
    ]  # fmt: skip
    assert _json(capsys, *flags, "--max-num-seqs", "64")["start"]["smallest_memory"] is None
    start = _json(capsys, *flags, "--max-num-seqs", "400")["start"]
    share = start["smallest_memory"].split("--gpu-memory-utilization ")[1].split()[0]
    for used, starts in ((share, True), (f"{float(share) - 0.0001:.4f}", False)):
        flags[flags.index("--gpu-memory-utilization") + 1] = used
        assert _json(capsys, *flags, "--max-num-seqs", "400")["start"]["starts"] is starts
    beyond = _json(capsys, *flags, "--max-num-seqs", "1024")["start"]["smallest_memory"]
    assert beyond.endswith(
        "more than --gpu-memory-bytes 85,899,345,920 leaves at any --gpu-memory-utilization"
    )
