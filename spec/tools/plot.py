# SPDX-License-Identifier: MIT OR Apache-2.0
"""``size --plot``: bytes against num_drafts, for design documents.

matplotlib is an optional extra (``ssm-rollback-spec[plot]``); it is imported
inside :func:`plot_sweep` only, so ``check``, ``vectors`` and the contract
never load it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from .errors import CliError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..sizing.views import SweepRow

__all__ = ["plot_sweep"]

#: How the legend names each view's speculative state (the engine's version is appended).
_VIEW_LABELS: Final = {
    "module": "snapshot, module view (dense)",
    "vllm": "snapshot, vLLM",
    "sglang": "snapshot, SGLang (one draft chain)",
    "sglang-replayssm": "ReplaySSM ring + conv windows, SGLang",
}


# Views whose figures nearly coincide stay told apart by their markers.
_MARKERS: Final = ("s", "^", "v", "D", "x", "+")


def plot_sweep(rows: Sequence[SweepRow], target: str, /, *, title: str) -> None:
    """Draw the three rings and each view's speculative state against num_drafts, per GPU.

    The rings: the seed's, the minimal one (minimal for the seed's
    replay-from-checkpoint design, not for ReplaySSM) and SGLang's ReplaySSM
    ring; a log scale.

    The format follows the suffix of ``target``: ``.png`` or ``.svg``.

    Raises:
        CliError: matplotlib is not installed, or the file cannot be written.
    """
    try:
        # Agg draws without a display; the Figure API keeps no global state.
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415
        from matplotlib.figure import Figure  # noqa: PLC0415
    except ImportError:
        raise CliError("--plot needs matplotlib: install ssm-rollback-spec[plot]") from None
    figure = Figure(figsize=(8, 5), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    # A log axis cannot show zero: no drafts means no ring, so that point is left out.
    drafts = [row.num_drafts for row in rows if row.seed_ring[1] > 0]
    ring = [row.seed_ring[1] for row in rows if row.seed_ring[1] > 0]
    axes.plot(drafts, ring, marker="o", linewidth=2.5, label="seed replay ring (the contract)")
    minimal = [row.minimal_ring[1] for row in rows if row.seed_ring[1] > 0]
    axes.plot(
        drafts,
        minimal,
        marker="o",
        linewidth=1.5,
        label="minimal ring (for replay from a checkpoint, not ReplaySSM)",
    )
    axes.plot(
        [row.num_drafts for row in rows],
        [row.replayssm_ring[1] for row in rows],
        marker="*",
        linewidth=1.5,
        label="ReplaySSM ring alone, SGLang 0.5.23",
    )
    for view, marker in zip(rows[0].speculative, _MARKERS, strict=False):
        points = [(row.num_drafts, row.speculative[view][1]) for row in rows]
        shown = [(x, y) for x, y in points if y > 0]
        axes.plot(
            [x for x, _ in shown],
            [y for _, y in shown],
            marker=marker,
            linestyle="--",
            label=f"{_VIEW_LABELS.get(view.value, view.value)} ({view.engine})",
        )
    axes.set_yscale("log")
    axes.set_xlabel("drafts per step (num_drafts)")
    axes.set_ylabel("bytes per GPU (log scale)")
    axes.set_title(title)
    axes.grid(visible=True, which="both", alpha=0.3)
    axes.legend()
    try:
        figure.savefig(target)
    except OSError as error:
        raise CliError(f"--plot {target}: {error.strerror or error}") from None
