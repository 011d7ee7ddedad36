# SPDX-License-Identifier: MIT OR Apache-2.0
"""``size --plot`` as a reviewer pastes it, read back from the figure's own objects."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from ssm_rollback_spec.releases import LLAMA_CPP, LLAMA_CPP_COMMIT
from ssm_rollback_spec.sizing import plot
from ssm_rollback_spec.tools.cli import main

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ssm_rollback_spec.sizing.views import SweepRow

pytest.importorskip("matplotlib")


def _figure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *arguments: str) -> Figure:
    """The figure ``size --plot`` draws for ``arguments``, as matplotlib holds it."""
    drawn: list[tuple[Sequence[SweepRow], str]] = []

    def keep(rows: Sequence[SweepRow], target: str, /, *, title: str) -> None:
        del target
        drawn.append((rows, title))

    monkeypatch.setattr(plot, "plot_sweep", keep)
    assert main(["size", *arguments, "--plot", str(tmp_path / "p.svg"), "--json", "-"]) == 0
    [(rows, title)] = drawn
    return plot.sweep_figure(rows, title=title)


def _ys(axes: Axes, index: int, /) -> list[float]:
    """The heights of the axes' ``index``-th line, in the axis unit."""
    import numpy as np  # noqa: PLC0415 - matplotlib's own dependency

    return [float(y) for y in np.asarray(axes.get_lines()[index].get_ydata(), dtype=float)]


def _labels(axes: Axes, /) -> list[str]:
    return [str(line.get_label()) for line in axes.get_lines()]


def test_qwen3_next_puts_llama_cpps_saved_copy_in_a_host_memory_panel(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    figure = _figure(
        monkeypatch, tmp_path,
        "--config", "qwen3-next-80b-a3b-instruct", "--num-drafts", "1-8", "--mtp-slots", "1",
    )  # fmt: skip
    assert figure.get_suptitle() == (
        "qwen3-next-80b-a3b-instruct, TP 1, 1 request (2 seed slots)\n"
        "each engine's speculative state against the replay rings"
    )
    gpu, host = figure.axes
    assert (gpu.get_title(), host.get_title()) == ("GPU memory", "host memory")
    assert gpu.get_ylabel() == "GiB per GPU (log scale)"
    assert host.get_ylabel() == "MiB in host memory (log scale)"
    saved = f"llama.cpp {LLAMA_CPP_COMMIT} saved copy before each verify (spec_ckpt)"
    assert _labels(host) == [saved]
    assert saved not in _labels(gpu)
    # The saved copy is the state itself: 75.4 MiB whatever the drafts.
    assert {round(y, 1) for y in _ys(host, 0)} == {75.4}
    # One line within a decade: the ticks between its decades are labelled, to read it by;
    # the GPU panel's decades are enough.
    figure.canvas.draw()
    labels = [text.get_text() for text in host.get_yticklabels(minor=True)]
    assert {"70", "80"} <= set(labels)
    assert {text.get_text() for text in gpu.get_yticklabels(minor=True)} == {""}
    for axes in (gpu, host):
        assert axes.get_xlabel() == "drafts per step (num_drafts)"
        assert axes.get_xlim() == (0.5, 8.5)
        assert [int(tick) for tick in axes.get_xticks()] == list(range(1, 9))
    legend = [text.get_text() for text in figure.legends[0].get_texts()]
    assert legend == [*_labels(gpu), saved]
    # Every engine by its own release: llama-cpp-python's version is not llama.cpp's.
    assert not any(LLAMA_CPP.version in label for label in legend)
    assert "vLLM 0.33.0 snapshot (resident blocks)" in legend
    assert "SGLang 0.5.23 snapshot (one draft chain)" in legend


def test_a_model_with_snapshots_keeps_one_panel_in_mib_at_its_drafts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    figure = _figure(
        monkeypatch, tmp_path,
        "--config", "qwen3.5-27b", "--num-drafts", "1,3", "--mtp-slots", "1", "--tp", "2",
        "--engine", "vllm",
    )  # fmt: skip
    [gpu] = figure.axes
    assert figure.get_suptitle().startswith("qwen3.5-27b, TP 2, 1 request (2 seed slots)\n")
    assert gpu.get_ylabel() == "MiB per GPU (log scale)"
    assert gpu.get_xlim() == (0.5, 3.5)
    assert [int(tick) for tick in gpu.get_xticks()] == [1, 3]
    assert _labels(gpu)[-1] == "vLLM 0.33.0 snapshot (resident blocks)"
    # In MiB: vLLM's 258.4 MiB at three drafts.
    assert round(_ys(gpu, -1)[-1], 1) == 258.4


def test_llama_cpps_snapshots_are_named_by_its_commit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    figure = _figure(
        monkeypatch, tmp_path,
        "--config", "qwen3.5-27b", "--num-drafts", "2-4", "--mtp-slots", "1",
        "--engine", "llama.cpp",
    )  # fmt: skip
    [gpu] = figure.axes
    assert _labels(gpu)[-1] == f"llama.cpp {LLAMA_CPP_COMMIT} n_rs_seq snapshots (FP32)"


def test_no_drafts_keep_their_tick_and_draw_no_point(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    figure = _figure(
        monkeypatch, tmp_path,
        "--config", "qwen3.5-27b", "--num-drafts", "0-2", "--mtp-slots", "1",
    )  # fmt: skip
    [gpu] = figure.axes
    assert [int(tick) for tick in gpu.get_xticks()] == [0, 1, 2]
    assert gpu.get_xlim() == (-0.5, 2.5)
    # Every figure is 0 B at 0 drafts, which a log scale cannot draw: each line starts at 1.
    import numpy as np  # noqa: PLC0415 - matplotlib's own dependency

    drawn = {tuple(np.asarray(line.get_xdata(), dtype=int).tolist()) for line in gpu.get_lines()}
    assert drawn == {(1, 2)}
