# SPDX-License-Identifier: MIT OR Apache-2.0
"""An engine is one unit: defined here alone and registered, ``size`` shows it everywhere.

The toy engine below holds two full states per request and layer. Nothing
else in the package names it: the registry's table gains it for the test
(``monkeypatch``), and ``size --engine`` offers it, words it in text and
Markdown, writes it as JSON, sweeps it and draws it, as CONTRIBUTING.md's
"Adding an engine" says.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pytest

from ssm_rollback_spec.sizing import registry
from ssm_rollback_spec.sizing.dtypes import Dtype, StateDtypes
from ssm_rollback_spec.sizing.presentation import rejoined
from ssm_rollback_spec.sizing.state import SnapshotSizing
from ssm_rollback_spec.sizing.unit import EngineUnit, layer_bytes
from ssm_rollback_spec.tools.cli import main

if TYPE_CHECKING:
    from ssm_rollback_spec.sizing.state import Drafting, Model, Setup
    from ssm_rollback_spec.sizing.wording import Row

QWEN3_NEXT: Final = str(
    Path(__file__).resolve().parents[2] / "examples" / "qwen3-next-80b-a3b-instruct.config.json"
)
REVIEW: Final = ["size", "--config", QWEN3_NEXT, "--num-drafts", "3", "--mtp-slots", "1"]
#: One Qwen3-Next layer's state: h (32 x 128 x 128 FP32) and 3 conv columns (8,192 BF16).
STATE: Final = 2_097_152 + 3 * 16_384


class ToyEngine(EngineUnit):
    """A made-up engine: two full states per request and layer while drafting, one without."""

    name = "toy"
    engine = "Toy 1.0"
    plot_label = "Toy 1.0 snapshot (two states)"
    base_formula = "(h + (K-1) conv columns)"
    speculative_formula = "2 x (h + (K-1) conv columns)"

    def describe(self, setup: Setup, /) -> str:
        del setup
        return "toy serve, two states per drafting request"

    def dtypes(self, model: Model, setup: Setup, /) -> StateDtypes:
        del model
        return StateDtypes(recurrent=setup.recurrent or Dtype.FP32, conv=setup.conv or Dtype.BF16)

    def size(self, model: Model, setup: Setup, drafting: Drafting, /) -> SnapshotSizing:
        d = model.dimensions
        dtypes = self.dtypes(model, setup)
        h, column = layer_bytes(d, dtypes)
        state = d.num_gdn_layers * (h + (d.conv_kernel - 1) * column)
        return SnapshotSizing(
            view=self.name,
            engine=self.engine,
            setup=self.describe(setup),
            dtypes=dtypes,
            recurrent_bytes_per_layer=h,
            conv_column_bytes_per_layer=column,
            requests=drafting.requests,
            base_bytes_per_request=state,
            speculative_bytes_per_request=2 * state if drafting.num_drafts else 0,
        )

    def rows(self, sizing: SnapshotSizing, /) -> list[Row]:
        return [("toy states", f"{2 * sizing.requests} while drafting")]


@pytest.fixture(autouse=True)
def _toy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.ENGINES, "toy", ToyEngine())


def _size(capsys: pytest.CaptureFixture[str], *arguments: str) -> str:
    assert main([*REVIEW, *arguments]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    return captured.out


def test_the_registered_engine_is_one_of_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["size", "--help"])
    flat = " ".join(capsys.readouterr().out.split())
    assert "--engine NAME module (default), vllm, sglang, sglang-replayssm, llama.cpp, toy" in flat


def test_the_text_report_words_the_engine(capsys: pytest.CaptureFixture[str]) -> None:
    lines = rejoined(_size(capsys, "--engine", "toy")).splitlines()
    assert (
        "Estimate, not part of the module's contract: snapshot state, toy view, Toy 1.0"
        " (docs/sizing.md)"
    ) in lines
    assert "  follows                Toy 1.0" in lines
    assert "  setup                  toy serve, two states per drafting request" in lines
    assert "  toy states             2 while drafting" in lines
    # 1 request x 36 layers x the state, and twice that while drafting.
    assert (
        "  base state             77,266,944 B (73.7 MiB)  (1 request x 36 layers x"
        " (h + (K-1) conv columns))"
    ) in lines
    assert (
        "  speculative state      154,533,888 B (147.4 MiB)  (1 request x 36 layers x"
        " 2 x (h + (K-1) conv columns))"
    ) in lines
    assert "  of which pool padding  0 B" in lines


def test_the_markdown_report_words_the_engine(capsys: pytest.CaptureFixture[str]) -> None:
    out = _size(capsys, "--engine", "toy", "--format", "markdown")
    assert "| follows | Toy 1.0 |" in out.splitlines()
    assert "| toy states | 2 while drafting |" in out.splitlines()


def test_the_json_report_holds_the_engines_figures(capsys: pytest.CaptureFixture[str]) -> None:
    report = json.loads(_size(capsys, "--engine", "toy", "--json", "-"))
    snapshot = report["snapshot"]
    assert (snapshot["view"], snapshot["engine"]) == ("toy", "Toy 1.0")
    assert snapshot["speculative_bytes"] == 2 * 36 * STATE == 154_533_888
    # Over one slot's seed ring (2 x 3 rows x 36 layers x 24,832 B over 2 slots).
    assert report["snapshot_to_replay"] == 154_533_888 / 2_681_856
    assert report["fit"] is None


def test_a_sweep_shows_the_engine_beside_the_others(capsys: pytest.CaptureFixture[str]) -> None:
    sweep = json.loads(_size(capsys, "--num-drafts", "0-2", "--format", "json"))
    assert list(sweep["views"]) == [
        "module",
        "vllm",
        "sglang",
        "sglang-replayssm",
        "llama.cpp",
        "toy",
    ]
    assert sweep["views"]["toy"]["engine"] == "Toy 1.0"
    assert [row["speculative"]["toy"]["per_request"] for row in sweep["rows"]] == [
        0,
        154_533_888,
        154_533_888,
    ]
    table = _size(capsys, "--num-drafts", "1-2", "--engine", "toy")
    assert table.split("\n\n")[3].splitlines()[0].split()[-1] == "toy"


def test_the_plot_labels_the_engines_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / "sweep.svg"
    _size(capsys, "--num-drafts", "1-3", "--engine", "toy", "--plot", str(target), "--json", "-")
    # Matplotlib's SVG keeps each text as a comment beside its outlines.
    assert "Toy 1.0 snapshot (two states)" in target.read_text(encoding="utf-8")
