# SPDX-License-Identifier: MIT OR Apache-2.0
"""``size --plot``: bytes against num_drafts, for design documents.

matplotlib is an optional extra (``ssm-rollback-spec[plot]``); it is imported
inside :func:`plot_sweep` only, so ``check``, ``vectors`` and the contract
never load it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ..releases import SGLANG
from .registry import ENGINES

if TYPE_CHECKING:
    from collections.abc import Sequence

    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from .views import SweepRow

__all__ = ["PlotError", "plot_sweep", "sweep_figure"]


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


#: A unit the y axis may take, the largest first: its name and its bytes.
_AXIS_UNITS: Final = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))

#: Whether the drafts drawn are few enough that each gets its tick.
_EVERY_TICK_UP_TO: Final = 16


#: A log axis's step between labelled ticks.
_DECADE: Final = 10


def _axis_unit(largest: int, /) -> tuple[str, int]:
    """GiB where the largest figure reaches one, else MiB, else KiB."""
    return next(((name, size) for name, size in _AXIS_UNITS if largest >= size), _AXIS_UNITS[-1])


def sweep_figure(rows: Sequence[SweepRow], /, *, title: str) -> Figure:
    """The plot as a matplotlib figure: GPU memory in one panel, host memory in another.

    The GPU panel draws the three rings (the seed's, the minimal one,
    minimal for the seed's replay-from-checkpoint design, not for
    ReplaySSM, and SGLang's ReplaySSM ring) and each view's speculative
    state held on the GPU; a view whose state lies in host memory (llama.cpp
    for an architecture without snapshots) is drawn in a panel of its own.
    The y axes are in GiB, MiB or KiB on a log scale; the x axis spans the
    drafts drawn. The legend sits below the axes, so it covers no line.

    Raises:
        PlotError: matplotlib is not installed.
    """
    try:
        # Agg draws without a display; the Figure API keeps no global state.
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415
        from matplotlib.figure import Figure  # noqa: PLC0415
        from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator  # noqa: PLC0415
    except ImportError:
        raise PlotError("--plot needs matplotlib: pip install 'ssm-rollback-spec[plot]'") from None
    host = sorted(set().union(*(row.host for row in rows)))
    figure = Figure(figsize=(9 if not host else 13, 6.5), layout="constrained")
    FigureCanvasAgg(figure)
    panels = figure.subplots(1, 2, width_ratios=(3, 1)) if host else [figure.add_subplot()]
    gpu = panels[0]
    drafts = [row.num_drafts for row in rows]
    # Each line: its panel, label, bytes, then its style.
    lines: list[tuple[Axes, str, list[int], dict[str, object]]] = [
        (gpu, "seed's replay ring (the contract)", [r.seed_ring[1] for r in rows],
         {"marker": "o", "markersize": 7, "linewidth": 2.5, "color": "black"}),
        (gpu, "minimal ring (replay from a checkpoint)", [r.minimal_ring[1] for r in rows],
         {"marker": "o", "markersize": 4, "linewidth": 1.5, "color": "dimgray"}),
        (gpu, f"{SGLANG.engine} ReplaySSM ring alone", [r.replayssm_ring[1] for r in rows],
         {"marker": "*", "markersize": 9, "linewidth": 1.5, "color": "tab:green"}),
    ]  # fmt: skip
    colors = ("tab:blue", "tab:orange", "tab:red", "tab:purple", "tab:brown", "tab:pink")
    for view, (marker, size, dashes), color in zip(
        rows[0].speculative, _STYLES, colors, strict=False
    ):
        held = view in host
        unit = ENGINES.get(view)
        # Each engine's unit names its line, with its engine's own release.
        label = unit.plot_says(host=held) if unit is not None else view
        style: dict[str, object] = {
            "marker": marker,
            "markersize": size,
            "markerfacecolor": "none" if size > _HOLLOW_ABOVE else color,
            "linestyle": dashes,
            "color": color,
        }
        values = [row.speculative[view][1] for row in rows]
        lines.append((panels[1] if held else gpu, label, values, style))
    for axes, where in zip(panels, ("per GPU", "in host memory"), strict=False):
        mine = [(label, values, style) for on, label, values, style in lines if on is axes]
        name, size = _axis_unit(max((max(values) for _, values, _ in mine), default=0))
        drawn: list[float] = []
        for label, values, style in mine:
            kept_x, kept_y = _positive(drafts, values)
            axes.plot(kept_x, [y / size for y in kept_y], label=label, **style)
            drawn += [y / size for y in kept_y]
        axes.set_yscale("log")
        axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        if drawn and max(drawn) < _DECADE * min(drawn):
            # Within one decade (the host panel's one line) a reader needs the ticks between.
            axes.yaxis.set_minor_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        axes.set_ylabel(f"{name} {where} (log scale)")
        # The drafts drawn and no more: a whole-number tick at each, or at some when many.
        low, high = drafts[0], drafts[-1]
        axes.set_xlim(low - 0.5, high + 0.5)
        if len(drafts) <= _EVERY_TICK_UP_TO:
            axes.xaxis.set_major_locator(FixedLocator(drafts))
        else:
            axes.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
        axes.set_xlabel("drafts per step (num_drafts)")
        axes.grid(visible=True, which="both", alpha=0.3)
    if host:
        gpu.set_title("GPU memory")
        panels[1].set_title("host memory")
    figure.suptitle(title)
    figure.legend(loc="outside lower center", ncols=2, fontsize="small")
    return figure


def plot_sweep(rows: Sequence[SweepRow], target: str, /, *, title: str) -> None:
    """Draw :func:`sweep_figure` into ``target``, as ``.png`` or ``.svg`` by its suffix.

    Raises:
        PlotError: matplotlib is not installed, or the file cannot be written.
    """
    figure = sweep_figure(rows, title=title)
    try:
        figure.savefig(target, dpi=110)
    except OSError as error:
        raise PlotError(f"--plot {target}: {error.strerror or error}") from None
