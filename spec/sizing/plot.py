# SPDX-License-Identifier: MIT OR Apache-2.0
"""``size --plot``: bytes against num_drafts, for design documents.

matplotlib is an optional extra (``ssm-rollback-spec[plot]``); it is imported
inside :func:`plot_sweep` only, so ``check``, ``vectors`` and the contract
never load it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from .registry import ENGINES
from .releases import SGLANG

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .views import SweepRow

__all__ = ["PlotError", "plot_sweep"]


class PlotError(RuntimeError):
    """A plot that cannot be drawn: matplotlib is missing, or the file cannot be written."""


#: Each line's marker, size and style, so that lines that coincide stay visible:
#: a large hollow marker under a smaller filled one, and distinct dashes.
_STYLES: Final = (
    ("s", 11, "--"),
    ("^", 8, "-."),
    ("o", 5, ":"),
    ("D", 4, (0, (5, 1))),
    ("x", 9, (0, (1, 1))),
    ("+", 9, (0, (3, 1, 1, 1))),
)


#: Markers larger than this are drawn hollow, so a smaller one inside stays visible.
_HOLLOW_ABOVE: Final = 6


def _positive(drafts: Sequence[int], values: Sequence[int], /) -> tuple[list[int], list[int]]:
    # A log axis cannot show zero (no drafts, no ring): those points are left out.
    kept = [(x, y) for x, y in zip(drafts, values, strict=True) if y > 0]
    return [x for x, _ in kept], [y for _, y in kept]


def plot_sweep(rows: Sequence[SweepRow], target: str, /, *, title: str) -> None:
    """Draw the three rings and each view's speculative state against num_drafts, per GPU.

    The rings: the seed's, the minimal one (minimal for the seed's
    replay-from-checkpoint design, not for ReplaySSM) and SGLang's ReplaySSM
    ring; a log scale. The legend sits below the axes, so it covers no line.

    The format follows the suffix of ``target``: ``.png`` or ``.svg``.

    Raises:
        PlotError: matplotlib is not installed, or the file cannot be written.
    """
    try:
        # Agg draws without a display; the Figure API keeps no global state.
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415
        from matplotlib.figure import Figure  # noqa: PLC0415
        from matplotlib.ticker import MaxNLocator  # noqa: PLC0415
    except ImportError:
        raise PlotError("--plot needs matplotlib: pip install 'ssm-rollback-spec[plot]'") from None
    figure = Figure(figsize=(9, 6.5), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    drafts = [row.num_drafts for row in rows]
    # The rings: label, bytes, then marker, marker size, line width, colour.
    rings = (
        ("seed's replay ring (the contract)", [r.seed_ring[1] for r in rows], "o", 7, 2.5, "black"),
        (
            "minimal ring (replay from a checkpoint)",
            [r.minimal_ring[1] for r in rows],
            "o",
            4,
            1.5,
            "dimgray",
        ),
        (
            f"{SGLANG.engine} ReplaySSM ring alone",
            [r.replayssm_ring[1] for r in rows],
            "*",
            9,
            1.5,
            "tab:green",
        ),
    )
    for label, values, marker, size, width, color in rings:
        axes.plot(
            *_positive(drafts, values),
            marker=marker,
            markersize=size,
            linewidth=width,
            color=color,
            label=label,
        )
    colors = ("tab:blue", "tab:orange", "tab:red", "tab:purple", "tab:brown", "tab:pink")
    for view, (marker, size, dashes), color in zip(
        rows[0].speculative, _STYLES, colors, strict=False
    ):
        axes.plot(
            *_positive(drafts, [row.speculative[view][1] for row in rows]),
            marker=marker,
            markersize=size,
            markerfacecolor="none" if size > _HOLLOW_ABOVE else color,
            linestyle=dashes,
            color=color,
            # Each engine's unit names its line, with its engine and version.
            label=ENGINES[view].plot_label if view in ENGINES else view,
        )
    axes.set_yscale("log")
    # Whole draft counts only, with room either side even for a single one.
    low, high = rows[0].num_drafts, rows[-1].num_drafts
    axes.set_xlim(low - 1, high + 1)
    axes.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    axes.set_xlabel("drafts per step (num_drafts)")
    axes.set_ylabel("bytes per GPU (log scale)")
    axes.set_title(title)
    axes.grid(visible=True, which="both", alpha=0.3)
    figure.legend(loc="outside lower center", ncols=2, fontsize="small")
    try:
        figure.savefig(target, dpi=110)
    except OSError as error:
        raise PlotError(f"--plot {target}: {error.strerror or error}") from None
