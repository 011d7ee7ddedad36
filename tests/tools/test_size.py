# SPDX-License-Identifier: MIT OR Apache-2.0
"""``size``'s default output for the README's examples: the answer first, within 100 columns."""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING, Final

import pytest

from ssm_rollback_spec.sizing.presentation import COLUMNS
from ssm_rollback_spec.tools.cli import main
from tests.child import ROOT

if TYPE_CHECKING:
    from pathlib import Path

#: The README's section that shows ``size``.
_SECTION: Final = "## Design-review sizing\n"
#: The flag that picks a format other than the default text.
_FORMAT: Final = re.compile(r" --format \w+")


def _readme_examples() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split(_SECTION, 1)[1].split("\n## ", 1)[0]
    return [
        _FORMAT.sub("", line)
        for block in re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)
        if "# untested" not in block
        for line in block.splitlines()
        if line.startswith("ssm-rollback-spec size ")
    ]


def test_the_readme_shows_three_size_examples_that_run_here() -> None:
    assert _readme_examples() == [
        "ssm-rollback-spec size --config qwen3-next-80b-a3b-instruct --num-drafts 3 --mtp-slots 1",
        (
            "ssm-rollback-spec size --config qwen3-next-80b-a3b-instruct --num-drafts 1-8"
            " --mtp-slots 1"
        ),
        "ssm-rollback-spec size --config qwen3.5-27b --num-drafts 1,3,7 --mtp-slots 1 --tp 2",
    ]


@pytest.mark.parametrize("command", _readme_examples())
def test_a_readme_example_fits_100_columns_and_answers_in_five_lines(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    assert main(shlex.split(command)[1:]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= COLUMNS
    first = lines[:5]
    if "--num-drafts 3 " in f"{command} ":
        # One review: the engine, then its speculative state and the seed's ring.
        assert first[0] == (
            "engine                   module view: this module (engine-neutral, spec/rollback.py)"
        )
        assert first[1].startswith("speculative state        589.5 MiB per GPU for 2 slots")
        assert first[2].startswith("seed's replay ring       5.1 MiB per GPU reserved at preflight")
    else:
        # A sweep: the default engine's speculative state across the drafts drawn.
        assert first[0].startswith("Speculative state per GPU (--tp ")
        assert any(line.startswith("  module            ") for line in first)


def test_a_bad_flag_and_a_bad_config_begin_their_line_alike(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["size", "--num-drafts", "-1"])
    assert raised.value.code == 2
    flag = capsys.readouterr().err
    missing = tmp_path / "missing.json"
    assert main(["size", "--num-drafts", "3", "--config", str(missing)]) == 2
    config = capsys.readouterr().err
    assert flag == (
        "ssm-rollback-spec: error: --num-drafts: must not be negative: -1"
        " (see ssm-rollback-spec size --help)\n"
    )
    assert config == f"ssm-rollback-spec: error: --config {missing}: No such file or directory\n"
