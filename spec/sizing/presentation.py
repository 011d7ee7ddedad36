# SPDX-License-Identifier: MIT OR Apache-2.0
"""How ``size`` words and lays out the sizing figures: units, report rows, tables.

The command line (``ssm_rollback_spec.tools.size``) parses flags and
:mod:`.review` finds the figures; this module turns a report into text,
Markdown and table rows, asking each engine's unit for its own rows and
startup lines, so the wording a reviewer reads lives beside the figures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ..replay_rows import ReplayDesign
from . import rings
from .wording import Row, Section, count, human, ratio, short

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .dimensions import GdnDimensions
    from .review import Review, SizeReport
    from .views import SweepRow

__all__ = [
    "ASSUMED_DTYPES",
    "RATIO_DEFINITION",
    "Section",
    "count",
    "human",
    "markdown_sections",
    "plot_title",
    "ratio",
    "report_text",
    "review_sections",
    "short",
    "sweep_table",
    "text_sections",
]

#: What explicit dimensions leave each view to assume.
ASSUMED_DTYPES: Final = (
    "a bf16 model: explicit dimensions name no dtype (--state-dtype and --conv-dtype say otherwise)"
)

#: The headline ratio, said once wherever it is shown.
RATIO_DEFINITION: Final = "one request's speculative state over one slot's seed ring"


def text_sections(sections: Sequence[Section], /) -> str:
    """Sections as aligned text: the first flush left, the others indented under headings."""
    lines: list[str] = []
    width = max([25, *(len(label) + 3 for _, rows in sections[1:] for label, _ in rows)])
    for index, (heading, rows) in enumerate(sections):
        indent = "" if index == 0 else "  "
        if index:
            lines += ["", heading]
        # A label longer than the column (a huge --batch's) still ends two spaces before its value.
        lines += [
            f"{indent}{label:<{width - len(indent)}}{value}"
            if len(label) < width - len(indent)
            else f"{indent}{label}  {value}"
            for label, value in rows
        ]
    return "\n".join(lines)


def _cell(text: str, /) -> str:
    # A bare | would end the Markdown table cell.
    return text.replace("|", "\\|")


def markdown_sections(sections: Sequence[Section], /) -> str:
    """Sections as Markdown tables under bold headings."""
    lines: list[str] = []
    for heading, rows in sections:
        if lines:
            lines.append("")
        lines += [f"**{heading}**", "", "| figure | value |", "| --- | --- |"]
        lines += [f"| {label} | {_cell(value)} |" for label, value in rows]
    return "\n".join(lines)


def sweep_table(
    rows: Sequence[SweepRow],
    /,
    *,
    scope: str,
    markdown: bool,
    per_request: bool,
) -> str:
    """One sweep table, per GPU or per request, under a one-line caption.

    ``scope`` says what the per-GPU figures cover (TP, slots and requests).
    """
    views = list(rows[0].speculative)
    index = 0 if per_request else 1
    header = [
        "num_drafts",
        f"{ReplayDesign.SEED_ROW.value} ring",
        f"{ReplayDesign.MINIMAL_PRE_CONV.value} ring",
        f"{ReplayDesign.REPLAYSSM.value} ring",
        *(f"{view} speculative" for view in views),
    ]
    body = [
        [
            str(row.num_drafts),
            short(row.seed_ring[index]),
            short(row.minimal_ring[index]),
            short(row.replayssm_ring[index]),
            *(f"{short(row.speculative[v][index])} ({ratio(row.ratio(v))})" for v in views),
        ]
        for row in rows
    ]
    if per_request:
        caption = "Per request; (x) as above."
    else:
        caption = (
            f"{scope}. (x): {RATIO_DEFINITION}. Designs: docs/replay.md; views:"
            " docs/sizing.md; exact bytes: --format json."
        )
    if markdown:
        lines = [caption, "", "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
        lines += ["| " + " | ".join(cells) + " |" for cells in body]
        return "\n".join(lines)
    widths = [max(len(cells[i]) for cells in [header, *body]) for i in range(len(header))]
    lines = [caption, ""]
    lines += [
        "  ".join(cell.rjust(width) for cell, width in zip(cells, widths, strict=True))
        for cells in [header, *body]
    ]
    return "\n".join(lines)


def _replay_section(d: GdnDimensions, f: rings.ReplaySizing, tp: int, /) -> list[Row]:
    covers = "yes" if f.preflight_covers_pool else f"no: short by {human(f.shortfall_bytes)}"
    qkvz = (
        f"2 x {d.num_key_heads} x {d.key_head_dim} + 2 x {d.num_value_heads} x {d.value_head_dim}"
    )
    replay = [
        ("GDN layers", f"{f.num_gdn_layers}"),
        ("per GPU of", f"--tp {tp}"),
        ("qkvz row elements", f"{f.qkvz_elems:,}  ({qkvz})"),
        (
            "replay row",
            (
                f"{human(f.row_bytes)} per token per layer"
                f"  ({f.qkvz_elems:,} BF16 + {d.num_value_heads} x 2 FP32),"
                f" design {ReplayDesign.SEED_ROW.value}"
            ),
        ),
        (
            "preflight reservation",
            (
                f"{human(f.preflight_ring_bytes)}"
                f"  (k = num_drafts + 1 = {f.preflight_k}, mtp_state_slots = {f.preflight_slots})"
            ),
        ),
        (
            "pool allocation",
            (
                f"{human(f.pool_ring_bytes)}"
                f"  (k = num_intermediates = {f.pool_k}, mtp_slots + 1 = {f.pool_slots})"
            ),
        ),
        ("preflight covers pool", covers),
    ]
    if f.batch is not None and f.batch_ring_bytes is not None:
        replay.append((f"batch of {f.batch} requests", f"{human(f.batch_ring_bytes)} ring"))
    replay.append(
        (
            "review note: minimal row",
            (
                f"{human(f.minimal_replay_row_bytes)} per token per layer without z"
                f" ({d.conv_dim:,} BF16 + {d.num_value_heads} x 2 FP32), pool ring"
                f" {human(f.minimal_pool_ring_bytes)}; {rings.MINIMAL_RING_SCOPE}"
                " (docs/replay.md)"
            ),
        )
    )
    return replay


def review_sections(
    review: Review, d: GdnDimensions, /, *, tp: int, explicit: bool, why: bool = False
) -> list[Section]:
    """One review's sections: the seed's ring, the view's state, and its engine's fit if any.

    ``explicit``: the model came from explicit dimensions, so the dtypes are assumed;
    ``why``: each startup figure's reason follows the fit's rows.
    """
    unit, s, f = review.unit, review.snapshot, review.replay
    layers = f"{count(s.requests, 'slot' if unit.seed_slots else 'request')} x"
    if unit.per_layer:
        layers += f" {f.num_gdn_layers} layers x"
    snapshot = [
        ("follows", s.engine),
        ("setup", s.setup),
        *([("dtypes assumed", ASSUMED_DTYPES)] if explicit else []),
        (
            "recurrent state h",
            (
                f"{human(s.recurrent_bytes_per_layer)} per layer"
                f" ({d.recurrent_state_values:,} x {s.dtypes.recurrent.value})"
            ),
        ),
        (
            "conv column",
            (
                f"{human(s.conv_column_bytes_per_layer)} per layer"
                f" ({d.conv_dim:,} x {s.dtypes.conv.value}), K = {d.conv_kernel}"
            ),
        ),
        *unit.rows(s),
        ("base state", f"{human(s.base_bytes)}  ({layers} {unit.base_formula})"),
        (
            "speculative state",
            f"{human(s.speculative_bytes)}  ({layers} {unit.speculative_says(s)})",
        ),
        *unit.total_rows(s),
    ]
    if unit.pads_pools:
        padding = s.base_padding_bytes + s.speculative_padding_bytes
        snapshot.append(("of which pool padding", human(padding)))
    snapshot.append(
        ("speculative / ring", f"{ratio(review.ratio)}  (per request: {RATIO_DEFINITION})")
    )
    heading = (
        "Estimate, not part of the module's contract: "
        f"snapshot state, {s.view} view, {s.engine} (docs/sizing.md)"
    )
    sections = [("Replay ring (the contract)", _replay_section(d, f, tp)), (heading, snapshot)]
    if review.fit is not None:
        heading, rows = review.fit.section()
        rows = [*rows, ("will it start", review.fit.start().line())]
        sections.append((heading, [*rows, *(review.fit.why() if why else [])]))
    return sections


def _need_sections(report: SizeReport, /, *, why: bool) -> list[Section]:
    sections: list[Section] = []
    for need in report.needs:
        rows = [(item.design, item.says) for item in need.needs]
        if why:
            rows += [(f"why more {item.design}", item.why) for item in need.needs if item.why]
        sections.append((need.heading, rows))
    return sections


def _scope(report: SizeReport, /) -> str:
    who = f"--batch {report.batch}" if report.batch else "--mtp-slots"
    requests = count(report.requests, "request")
    return (
        f"Per GPU (--tp {report.tp}): rings over {report.slots} seed slots, views"
        f" over {requests} ({who}) and their pools' padding"
    )


def report_text(report: SizeReport, /, *, markdown: bool, why: bool = False) -> str:
    """The report as aligned text or Markdown: one review's sections, or a sweep's two tables.

    ``why``: each startup figure's reason in a line after the fit's.
    """
    if report.review is not None:
        sections = review_sections(
            report.review,
            report.model.dimensions,
            tp=report.tp,
            explicit=report.explicit,
            why=why,
        )
        sections += _need_sections(report, why=why)
        return markdown_sections(sections) if markdown else text_sections(sections)
    rows = report.rows or []
    return "\n\n".join(
        sweep_table(rows, scope=_scope(report), markdown=markdown, per_request=per_request)
        for per_request in (False, True)
    )


def plot_title(report: SizeReport, /) -> str:
    """The plot's title: TP, the engines' requests and the seed's slots."""
    return (
        f"Speculative state per GPU (TP {report.tp}),"
        f" {count(report.requests, 'request')} ({report.slots} seed slots)"
    )
