# SPDX-License-Identifier: MIT OR Apache-2.0
"""How ``size`` words and lays out the sizing figures: units, report rows, tables.

The command line (``ssm_rollback_spec.tools.size``) parses flags and
:mod:`.review` finds the figures; this module turns a report into text,
Markdown and table rows, asking each engine's unit for its own rows and
startup lines, so the wording a reviewer reads lives beside the figures.
"""

from __future__ import annotations

import textwrap
from pathlib import PurePath
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
    "COLUMNS",
    "RATIO_DEFINITION",
    "TERMS",
    "Section",
    "count",
    "human",
    "markdown_sections",
    "model_name",
    "plot_title",
    "ratio",
    "rejoined",
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

#: The widest line the text output prints (a table too wide for it goes on
#: in a second block of its columns, under the same first column).
COLUMNS: Final = 100

#: The file a Hugging Face snapshot folder keeps its config in.
_SNAPSHOT_CONFIG: Final = "config.json"

#: The headline ratio, said once wherever it is shown.
RATIO_DEFINITION: Final = "one request's speculative state over one slot's seed ring"

#: The words of ``size``'s output an engine's user may not know, each defined once under --why.
TERMS: Final = (
    (
        "seed",
        (
            "the runtime module this suite specifies (rollback.rs, SPEC.md): in verify-rollback"
            " mode it keeps a ring of each verify's inputs and replays the accepted ones, in"
            " place of snapshots of the state"
        ),
    ),
    ("replay ring", "what the seed keeps: k - 1 rows per slot and GDN layer (docs/sizing.md)"),
    (
        "seed-row, minimal-pre-conv, replayssm",
        (
            "the rings' designs: the seed's row; the same row without z; SGLang's ReplaySSM records"
            " (docs/replay.md)"
        ),
    ),
    (
        "MTP slots",
        (
            "the requests the seed drafts for at once (--mtp-slots, multi-token prediction);"
            " the engine views size as many requests"
        ),
    ),
    (
        "dummy slot",
        (
            "the one slot the seed's pool holds beyond the MTP slots (mtp_slots + 1), where engines"
            " pad their pools instead"
        ),
    ),
    ("k", "the verify window: num_drafts + 1 tokens (--num-intermediates for the pool)"),
    (
        "preflight reservation, pool allocation",
        "the ring the seed reserves before it builds its pool, and what the pool then takes",
    ),
    ("view", "an engine's layout of the state as size models it (--engine)"),
    (
        "base state, speculative state",
        (
            "what a view holds with no drafts, and what drafting adds: the figure a replay ring"
            " replaces"
        ),
    ),
    ("(x)", RATIO_DEFINITION),
)


#: Where a view's speculative state lies when it is not on the GPU.
_IN_HOST: Final = "in host memory, not on the GPU,"

#: The column values start at, at most: a longer label ends two spaces before its value.
_WIDEST_LABEL: Final = 42

#: How a wrapped heading's further lines begin; a wrapped value's begin at its column, further.
_GOES_ON: Final = "    "


def _wrap(text: str, width: int, /, *, then: str = "") -> list[str]:
    return textwrap.wrap(
        text, width, subsequent_indent=then, break_long_words=False, break_on_hyphens=False
    ) or [""]


def rejoined(text: str, /) -> str:
    """A review's text (:func:`text_sections`) with each wrapped row and heading on one line.

    Every line that begins with four spaces goes on from the line above, as
    :func:`text_sections` wraps them; what a script that reads rows line by line wants.
    """
    lines: list[str] = []
    for line in text.splitlines():
        if lines and line.startswith(_GOES_ON):
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
    return "\n".join(lines)


def _row_lines(label: str, value: str, /, *, indent: str, column: int) -> list[str]:
    """One row: the label, then its value from ``column``, wrapped to :data:`COLUMNS`."""
    room = max(COLUMNS - column, 30)
    pieces = _wrap(value, room)
    lead = f"{indent}{label}"
    # A label longer than the column (a huge --batch's) still ends two spaces before its value,
    # or stands alone above it when that line would be too long.
    if len(lead) < column:
        first = [f"{lead:<{column}}{pieces[0]}"]
    elif len(lead) + 2 + len(pieces[0]) <= COLUMNS:
        first = [f"{lead}  {pieces[0]}"]
    else:
        first = [lead, f"{'':<{column}}{pieces[0]}"]
    return [*first, *(f"{'':<{column}}{piece}" for piece in pieces[1:])]


def text_sections(sections: Sequence[Section], /) -> str:
    """Sections as aligned text: the first flush left, the others indented under headings.

    A value too long for its line goes on in lines of its own under the value column.
    """
    lines: list[str] = []
    width = max([25, *(len(label) + 3 for _, rows in sections[1:] for label, _ in rows)])
    # Past this a longer label takes its own room, and the values keep theirs.
    width = min(width, _WIDEST_LABEL)
    for index, (heading, rows) in enumerate(sections):
        indent = "" if index == 0 else "  "
        if index:
            lines += ["", *_wrap(heading, COLUMNS, then=_GOES_ON)]
        for label, value in rows:
            lines += _row_lines(label, value, indent=indent, column=width)
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


def _table(header: list[str], body: list[list[str]], /, *, markdown: bool) -> list[str]:
    if markdown:
        heading = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
        return heading + ["| " + " | ".join(cells) + " |" for cells in body]
    widths = [max(len(cells[i]) for cells in [header, *body]) for i in range(len(header))]
    # Columns after the first, in as few blocks as fit COLUMNS, each block led by the first.
    blocks: list[list[int]] = [[]]
    for index in range(1, len(header)):
        block = [0, *blocks[-1], index]
        if blocks[-1] and sum(widths[i] for i in block) + 2 * (len(block) - 1) > COLUMNS:
            blocks.append([])
        blocks[-1].append(index)
    lines: list[str] = []
    for block in blocks:
        shown = [0, *block]
        if lines:
            lines.append("")
        lines += ["  ".join(cells[i].rjust(widths[i]) for i in shown) for cells in [header, *body]]
    return lines


def sweep_table(
    rows: Sequence[SweepRow],
    /,
    *,
    scope: str,
    markdown: bool,
    per_request: bool,
) -> str:
    """One scope of a sweep, per GPU or per request: a caption, the rings, then the views.

    ``scope`` says what the per-GPU figures cover (TP, slots and requests).
    Each view's cell is its speculative state and the headline ratio.
    """
    views = list(rows[0].speculative)
    index = 0 if per_request else 1
    rings = [
        "num_drafts",
        f"{ReplayDesign.SEED_ROW.value} ring",
        f"{ReplayDesign.MINIMAL_PRE_CONV.value} ring",
        f"{ReplayDesign.REPLAYSSM.value} ring",
    ]
    ring_cells = [
        [
            str(row.num_drafts),
            short(row.seed_ring[index]),
            short(row.minimal_ring[index]),
            short(row.replayssm_ring[index]),
        ]
        for row in rows
    ]
    state_cells = [
        [
            str(row.num_drafts),
            *(f"{short(row.speculative[v][index])} {ratio(row.ratio(v))}" for v in views),
        ]
        for row in rows
    ]
    if per_request:
        caption = "Per request; the ratios (x) as above."
    else:
        caption = (
            f"{scope}. The rings, then each view's speculative state and its ratio (x):"
            f" {RATIO_DEFINITION}."
            " Designs: docs/replay.md; views: docs/sizing.md; exact bytes: --format json."
        )
    lines = [caption] if markdown else _wrap(caption, COLUMNS)
    lines += ["", *_table(rings, ring_cells, markdown=markdown)]
    lines += ["", *_table(["num_drafts", *views], state_cells, markdown=markdown)]
    return "\n".join(lines)


def _sweep_answer(report: SizeReport, rows: Sequence[SweepRow], /, *, markdown: bool) -> str:
    """A sweep's answer first: each view's speculative state across the drafts, and the ring's."""
    first, last = rows[0], rows[-1]
    span = (
        f"num_drafts {first.num_drafts}"
        if first is last
        else f"num_drafts {first.num_drafts} to {last.num_drafts}"
    )
    caption = (
        f"Speculative state per GPU (--tp {report.tp}, {count(report.requests, 'request')}),"
        f" {span}, and (x) over the seed's ring"
    )

    def across(low: str, high: str) -> str:
        return low if first is last else f"{low} to {high}"

    cells = [
        [
            f"{ReplayDesign.SEED_ROW.value} ring",
            across(short(first.seed_ring[1]), short(last.seed_ring[1])),
            "",
            "",
        ]
    ]
    host = _held_in_host(rows)
    cells += [
        [
            view,
            across(short(first.speculative[view][1]), short(last.speculative[view][1])),
            across(ratio(first.ratio(view)), ratio(last.ratio(view))),
            # A state held off the GPU is no GPU figure, and says so.
            _HOST_NOTE if view in host else "",
        ]
        for view in first.speculative
    ]
    if markdown:
        header = ["", "per GPU", "(x)", *(["where"] if host else [])]
        body = [cells_ if host else cells_[:3] for cells_ in cells]
        return "\n".join([caption, "", *_table(header, body, markdown=True)])
    width = max(len(cells_[0]) for cells_ in cells) + 2
    ratios = max(len(cells_[2]) for cells_ in cells) + 2
    lines = [caption]
    lines += [
        f"  {name:<{width}}{figures:<24}{times:<{ratios}}{where}".rstrip()
        for name, figures, times, where in cells
    ]
    return "\n".join(lines)


#: How a sweep marks a view whose speculative state lies in host memory.
_HOST_NOTE: Final = "in host memory, not on the GPU"


def _held_in_host(rows: Sequence[SweepRow], /) -> set[str]:
    """The views whose speculative state lies in host memory at some draft count of ``rows``."""
    return {view for row in rows for view in row.host}


def _answer(review: Review, /) -> Section:
    """One review's answer first: the engine, whether it starts, the state, the seed's ring."""
    unit, s, f = review.unit, review.snapshot, review.replay
    held = count(s.requests, "slot" if unit.seed_slots else "request")
    # A state held off the GPU (llama.cpp's saved copy for Qwen3-Next) says where it is.
    where = _IN_HOST if unit.in_host_memory(s) else "per GPU"
    state = f"{short(s.speculative_bytes)} {where} for {held}"
    if review.ratio is not None:
        state += f"; per request {ratio(review.ratio)} the seed's replay ring"
    covers = "covers" if f.preflight_covers_pool else "does not cover"
    rows: list[Row] = [("engine", f"{s.view} view: {s.engine}")]
    if review.fit is not None:
        rows.append(("will it start", review.fit.start().line()))
        fits = review.fit.requests()
        if fits is not None:
            rows.append(("requests that fit", fits))
    rows += [
        ("speculative state", state),
        (
            "seed's replay ring",
            f"{short(f.preflight_ring_bytes)} per GPU reserved at preflight; {covers} the pool",
        ),
    ]
    return ("Answer", rows)


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
    sections = [
        _answer(review),
        ("Replay ring (the contract)", _replay_section(d, f, tp)),
        (heading, snapshot),
    ]
    if review.fit is not None:
        heading, rows = review.fit.section()
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


def _scope(report: SizeReport, rows: Sequence[SweepRow], /) -> str:
    who = f"--batch {report.batch}" if report.batch else "--mtp-slots"
    requests = count(report.requests, "request")
    host = sorted(_held_in_host(rows))
    # Named once above the tables, so that no header widens past the columns.
    off = f"; {', '.join(host)}: {_HOST_NOTE}" if host else ""
    return (
        f"Per GPU (--tp {report.tp}): rings over {report.slots} seed slots, views"
        f" over {requests} ({who}) and their pools' padding{off}"
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
        # The answer, then the memory each design needs, then the detail.
        answer = [sections[0], *_need_sections(report, why=why)]
        # The terms, each defined once, under --why.
        terms: list[Section] = [("Terms", list(TERMS))] if why else []
        if markdown:
            return markdown_sections([*answer, *sections[1:], *terms])
        # The answer stands apart, flush left; the detail keeps its own columns.
        return text_sections(answer) + "\n\n" + text_sections([*sections[1:], *terms])
    rows = report.rows or []
    scope = _scope(report, rows)
    blocks = [
        _sweep_answer(report, rows, markdown=markdown),
        *(
            sweep_table(rows, scope=scope, markdown=markdown, per_request=per_request)
            for per_request in (False, True)
        ),
    ]
    if why:
        shown = [("", []), ("Terms", list(TERMS))]
        blocks.append(markdown_sections(shown[1:]) if markdown else text_sections(shown).lstrip())
    return "\n\n".join(blocks)


def model_name(report: SizeReport, /) -> str:
    """The model as ``--config`` named it: a shipped name, a file's or a snapshot folder's name."""
    typed = report.inputs["config"]
    if typed is None:
        return f"explicit dimensions ({report.model.dimensions.num_gdn_layers} GDN layers)"
    path = PurePath(typed)
    if path.name == _SNAPSHOT_CONFIG and path.parent.name:
        # A snapshot folder's config.json: the folder names the model.
        return path.parent.name
    return path.name.removesuffix(".json").removesuffix(".config")


def plot_title(report: SizeReport, /) -> str:
    """The plot's title: the model, TP, the engines' requests and what the lines compare."""
    return (
        f"{model_name(report)}, TP {report.tp}, {count(report.requests, 'request')}"
        f" ({report.slots} seed slots)\n"
        "each engine's speculative state against the replay rings"
    )
