# SPDX-License-Identifier: MIT OR Apache-2.0
"""``size``'s flags: one way to read a size, the engines' own names, errors naming the typed."""

from __future__ import annotations

import argparse
import itertools
import re
import shlex
from typing import Final

import pytest

from ssm_rollback_spec.sizing.memory import flags as memory_flags
from ssm_rollback_spec.sizing.options import ENGINE_ALIASES
from ssm_rollback_spec.tools import size
from ssm_rollback_spec.tools.cli import main
from tests.child import ROOT

REVIEW: Final = ["--config", "qwen3.5-27b", "--num-drafts", "3"]
#: Every byte flag and every token flag, by the metavar that says which it is.
BYTE_FLAGS: Final = sorted(
    f"--{flag.dest.replace('_', '-')}" for flag in memory_flags() if flag.metavar == "BYTES"
)
TOKEN_FLAGS: Final = sorted(
    [f"--{flag.dest.replace('_', '-')}" for flag in memory_flags() if flag.metavar == "TOKENS"]
    + ["--context"]
)


def _parse(*arguments: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ssm-rollback-spec size")
    size.add_arguments(parser)
    return parser.parse_args([*REVIEW, *arguments])


def _refused(capsys: pytest.CaptureFixture[str], *arguments: str) -> str:
    with pytest.raises(SystemExit) as raised:
        _parse(*arguments)
    assert raised.value.code == 2
    return capsys.readouterr().err


def test_the_byte_and_token_flags_are_the_ones_a_review_gives() -> None:
    assert BYTE_FLAGS == [
        "--activation-bytes", "--gpu-memory-bytes", "--kv-cache-memory-bytes", "--weights-bytes"
    ]  # fmt: skip
    assert TOKEN_FLAGS == ["--context", "--context-length", "--max-model-len"]


@pytest.mark.parametrize("flag", BYTE_FLAGS)
@pytest.mark.parametrize(
    ("typed", "value"),
    [("80G", 80 * 2**30), ("80g", 80 * 10**9), ("80GiB", 80 * 2**30), ("80GB", 80 * 10**9),
     ("85899345920", 80 * 2**30)],
)  # fmt: skip
def test_every_byte_flag_reads_the_same_spellings(flag: str, typed: str, value: int) -> None:
    parsed = _parse(flag, typed)
    assert getattr(parsed, flag.removeprefix("--").replace("-", "_")) == value


@pytest.mark.parametrize("flag", TOKEN_FLAGS)
@pytest.mark.parametrize(("typed", "value"), [("32K", 32_768), ("32k", 32_000), ("1M", 2**20)])
def test_every_token_flag_reads_k_and_m(flag: str, typed: str, value: int) -> None:
    parsed = _parse(flag, typed)
    assert getattr(parsed, flag.removeprefix("--").replace("-", "_")) == value


@pytest.mark.parametrize(
    ("typed", "dest", "value"),
    [
        (["--tensor-parallel-size", "2"], "tp", 2),
        (["--tp-size", "2"], "tp", 2),
        (["--mamba-ssm-cache-dtype", "float32"], "state_dtype", "fp32"),
        (["--mamba-ssm-dtype", "bfloat16"], "state_dtype", "bf16"),
        (["--mamba-cache-dtype", "float16"], "conv_dtype", "fp16"),
        (["--mamba-cache-dtype", "auto"], "conv_dtype", None),
    ],
)
def test_the_engines_own_flag_names_set_ours(typed: list[str], dest: str, value: object) -> None:
    assert getattr(_parse(*typed), dest) == value


@pytest.mark.parametrize("alias", ENGINE_ALIASES["num_drafts"])
def test_the_engines_names_for_the_drafts_stand_for_num_drafts(alias: str) -> None:
    parser = argparse.ArgumentParser(prog="ssm-rollback-spec size")
    size.add_arguments(parser)
    parsed = parser.parse_args(["--config", "qwen3.5-27b", alias, "1-3"])
    assert parsed.num_drafts == (1, 2, 3)


@pytest.mark.parametrize(
    ("typed", "line"),
    [
        (
            ["--tp", "2", "--tensor-parallel-size", "4"],
            "give --tp or --tensor-parallel-size, not both",
        ),
        (["--tp-size", "x"], "--tp-size: not a whole number: 'x'"),
        (
            ["--mamba-ssm-dtype", "float8"],
            (
                "--mamba-ssm-dtype: invalid choice: 'float8' (choose from 'auto', 'float32',"
                " 'bfloat16', 'float16')"
            ),
        ),
        (
            ["--weights-bytes", "40 GB"],
            (
                "--weights-bytes: not a byte count: '40 GB' (give digits, 10G or 10GiB (x 2^30),"
                " 10g or 10GB (x 10^9))"
            ),
        ),
        (
            ["--context-length", "32KiB"],
            (
                "--context-length: not a token count: '32KiB' (give digits, 128K (x 1024) or 128k"
                " (x 1000))"
            ),
        ),
    ],
)
def test_a_flag_it_cannot_read_is_one_line_naming_the_flag_typed(
    capsys: pytest.CaptureFixture[str], typed: list[str], line: str
) -> None:
    assert (
        _refused(capsys, *typed)
        == f"ssm-rollback-spec: error: {line} (see ssm-rollback-spec size --help)\n"
    )


def test_the_drafts_are_required_under_any_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["size", "--config", "qwen3.5-27b"])
    assert raised.value.code == 2
    assert capsys.readouterr().err == (
        "ssm-rollback-spec: error: the following arguments are required: --num-drafts"
        " (see ssm-rollback-spec size --help)\n"
    )


@pytest.mark.parametrize(
    ("typed", "line"),
    [
        (
            ["--num-speculative-tokens", "3", "--batch", str(10**14)],
            (
                "the preflight reservation exceeds the runtime's 64-bit usize with"
                f" --num-speculative-tokens 3, --batch {10**14}, --config qwen3.5-27b"
            ),
        ),
        (
            ["--num-drafts", "3", "--tensor-parallel-size", "3"],
            "--tensor-parallel-size 3 does not divide the 16 key heads of --config qwen3.5-27b",
        ),
    ],
)
def test_an_error_of_the_review_names_the_flags_as_typed(
    capsys: pytest.CaptureFixture[str], typed: list[str], line: str
) -> None:
    assert main(["size", "--config", "qwen3.5-27b", *typed]) == 2
    assert capsys.readouterr().err == f"ssm-rollback-spec: error: {line}\n"


def _help(capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        main(["size", "--help"])
    return capsys.readouterr().out


def test_help_is_grouped_short_and_within_100_columns(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys)
    lines = text.splitlines()
    headings = [line.removesuffix(":") for line in lines if re.fullmatch(r"[a-z]+:", line)]
    assert headings == ["model", "speculation", "engine", "memory", "output", "examples"]
    # -h is among the output flags, not under a heading of its own.
    assert lines[lines.index("output:") + 1].split() == [
        "-h,",
        "--help",
        "show",
        "this",
        "help",
        "message",
        "and",
        "exit",
    ]
    assert len(lines) <= 63
    assert max(len(line) for line in lines) <= 100
    # Each engine's alias is said once, beside the flag it stands for.
    for aliases in ENGINE_ALIASES.values():
        for alias in aliases:
            assert " ".join(text.split()).count(alias) == 1, alias


def test_sizing_md_states_the_helps_length_and_what_takes_two_lines(
    capsys: pytest.CaptureFixture[str],
) -> None:
    lines = _help(capsys).splitlines()
    stated = " ".join((ROOT / "docs" / "sizing-cli.md").read_text(encoding="utf-8").split())
    found = re.search(r"grows with the drafts\): (\d+) lines within 100 columns", stated)
    assert found is not None
    assert int(found[1]) == len(lines)
    # The flags whose help goes on to a second line: the four the page names.
    # A flag's line: the flag, perhaps its metavar, then its help after a gap.
    flag = re.compile(r"  (-\S+)(?: \S+)? {2,}\S")
    two = [
        match[1]
        for line, after in itertools.pairwise(lines)
        if (match := flag.match(line)) and after.startswith(" " * 10) and not flag.match(after)
    ]
    assert two == ["--config", "--num-drafts", "--state-dtype", "--conv-dtype"]
    assert "4 flags take a second line" in stated
    for group in ("model:", "memory:"):
        # Two lines of description, then the group's first flag.
        start = lines.index(group)
        assert not flag.match(lines[start + 2])
        assert flag.match(lines[start + 3])
    assert "the model and memory groups open with 2 lines each" in stated


def test_the_examples_in_help_run(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys)
    examples = text.split("examples:\n", 1)[1].replace("\\\n", " ")
    commands = [line.strip() for line in examples.splitlines() if "ssm-rollback-spec" in line]
    assert len(commands) == 3
    for command in commands:
        program, name, *arguments = shlex.split(command)
        assert (program, name) == ("ssm-rollback-spec", "size")
        # The plot's extra is the plot test's; here the figures are asked for as text.
        arguments = arguments[: arguments.index("--plot")] if "--plot" in arguments else arguments
        assert main([name, *arguments]) == 0, command
        assert capsys.readouterr().err == ""
