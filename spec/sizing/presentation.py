# SPDX-License-Identifier: MIT OR Apache-2.0
"""How ``size`` words and lays out the sizing figures: units, report rows, tables.

The command line (``ssm_rollback_spec.tools.size``) parses flags and picks the
figures; this module turns figures into text, Markdown and table rows, so
the wording a reviewer reads lives beside the figures it describes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ..replay.rows import ReplayDesign
from . import capacity, sglang, vllm
from .views import View

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .views import SweepRow

__all__ = [
    "ASSUMED_DTYPES",
    "BASE_FORMULA",
    "RATIO_DEFINITION",
    "SPECULATIVE_FORMULA",
    "Section",
    "count",
    "fit_section",
    "human",
    "markdown_sections",
    "plan_rows",
    "ratio",
    "sglang_fit_section",
    "short",
    "sweep_table",
    "text_sections",
]

#: A report section: a heading and its (label, value) rows.
Section = tuple[str, list[tuple[str, str]]]

#: What each view's base state is, per request and layer.
BASE_FORMULA: Final = {
    View.MODULE: "(h + (K-1) conv columns)",
    View.VLLM: "the resident blocks with no drafts (GDN groups x blocks of the pool)",
    View.SGLANG: "R x (h + (K-1) conv columns), R states per running request",
    View.SGLANG_REPLAYSSM: "R x (h + (K-1) conv columns), R states per running request",
}

#: What each view adds for speculation, per request and layer.
SPECULATIVE_FORMULA: Final = {
    View.MODULE: "k x (h + (K-1) conv columns), the dense layout",
    View.VLLM: "the resident blocks at these drafts, less the base",
    View.SGLANG: "(D x h + (D+K-2) conv columns), D = num_drafts + 1",
    View.SGLANG_REPLAYSSM: "((D+K-2) conv columns + L ReplaySSM records), D = num_drafts + 1",
}

#: What explicit dimensions leave each view to assume.
ASSUMED_DTYPES: Final = (
    "a bf16 model: explicit dimensions name no dtype (--state-dtype and --conv-dtype say otherwise)"
)

#: The headline ratio, said once wherever it is shown.
RATIO_DEFINITION: Final = "one request's speculative state over one slot's seed ring"


def human(size: int, /) -> str:
    """Exact bytes with a binary unit beside them."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{size:,} B" if unit == "B" else f"{size:,} B ({value:.1f} {unit})"
        value /= 1024
    raise AssertionError  # pragma: no cover - the loop always returns


def short(size: int, /) -> str:
    """Bytes in a binary unit, one decimal."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:,.1f} TiB"


def count(number: int, noun: str, /) -> str:
    """A number and its noun, plural unless one."""
    return f"{number:,} {noun}" if number == 1 else f"{number:,} {noun}s"


def ratio(value: float | None, /) -> str:
    """A ratio as ``N.Nx``; a dash when there is none."""
    return "-" if value is None else f"{value:,.1f}x"


def plan_rows(plan: vllm.VllmPlan, /) -> list[tuple[str, str]]:
    """VLLM's page, grouping, pool block and per-request blocks, as report rows."""
    page = plan.layout
    padded = (
        "not padded: no attention layers (explicit dimensions)"
        if page.padded_page_bytes is None
        else f"padded to {human(page.padded_page_bytes)} (attention block of"
        f" {page.block_size} tokens)"
    )
    return [
        ("page", f"{human(page.page_bytes)} per layer, {padded}"),
        (
            "grouping",
            (
                f"{plan.gdn_layers} GDN and {plan.attention_layers} attention layers in groups"
                f" of {plan.group_size}: {plan.gdn_groups} GDN and"
                f" {plan.attention_groups} attention groups"
            ),
        ),
        (
            "pool block",
            f"{human(plan.block_bytes)}  ({plan.group_size} pages); the null block is one",
        ),
        (
            "resident per request",
            (
                f"{human(plan.resident_bytes_per_request)}"
                f"  ({count(plan.gdn_groups, 'group')} x"
                f" {plan.resident_blocks} blocks, what decoding holds)"
            ),
        ),
        (
            "admission per request",
            (
                f"{human(plan.admission_bytes_per_request)}"
                f"  ({count(plan.gdn_groups, 'group')} x"
                f" {plan.admission_blocks} blocks, what vLLM counts to admit)"
            ),
        ),
    ]


#: How each design is named in the fit section.
_DESIGN_LABELS: Final = {
    capacity.Design.SNAPSHOT: f"{vllm.ENGINE} as it runs",
    capacity.Design.SEED_ROW: "with the seed's replay ring",
    capacity.Design.REPLAYSSM: "with ReplaySSM's ring",
}


def fit_section(
    fits: Sequence[capacity.Fit], utilization: capacity.VllmUtilization | None = None, /
) -> Section:
    """How many requests fit: vLLM's startup line for each design, as rows under a heading.

    The heading names the memory flags given: ``--kv-cache-memory-bytes``, or
    ``utilization``'s flags and the KV memory they leave.
    """
    length = fits[0].capacity.max_model_len
    memory = fits[0].capacity.kv_cache_bytes
    rows = []
    for fit in fits:
        ring = (
            ""
            if not fit.ring_bytes_per_request
            else f", ring {human(fit.ring_bytes_per_request)} per request"
        )
        verdict = "" if fit.fits else "; vLLM refuses to start: one request does not fit"
        rows.append(
            (
                _DESIGN_LABELS[fit.design],
                (
                    f"GPU KV cache size: {fit.tokens:,} tokens, Maximum concurrency for"
                    f" {length:,} tokens per request: {fit.concurrency:.2f}x"
                    f"  ({fit.capacity.num_blocks:,} blocks of {human(fit.plan.block_bytes)},"
                    f" {fit.capacity.blocks_per_request} per request{ring}){verdict}"
                ),
            )
        )
    given = f"in --kv-cache-memory-bytes {memory:,} per GPU"
    if utilization is not None:
        u = utilization
        given = (
            f"in the KV memory left by --gpu-memory-utilization {u.gpu_memory_utilization} of"
            f" --gpu-memory-bytes {u.gpu_memory_bytes:,} less --weights-bytes"
            f" {u.weights_bytes:,} and --activation-bytes {u.activation_bytes:,}"
            f" ({memory:,} B per GPU)"
        )
    heading = (
        f"How many requests fit {given} at --max-model-len {length:,} ({vllm.ENGINE};"
        " the replay lines are estimates)"
    )
    return heading, rows


#: How each design is named in SGLang's fit section.
_SGLANG_DESIGN_LABELS: Final = {
    capacity.Design.SNAPSHOT: f"{sglang.ENGINE} as it runs",
    capacity.Design.SEED_ROW: "with the seed's replay ring",
    capacity.Design.REPLAYSSM: "with ReplaySSM's ring",
}


def sglang_fit_section(
    fits: Sequence[capacity.SglangFit], memory: sglang.SglangMemory, /
) -> Section:
    """SGLang's startup figures for each design, as rows under a heading."""
    rows = []
    for fit in fits:
        label = _SGLANG_DESIGN_LABELS[fit.design]
        if fit.design is capacity.Design.REPLAYSSM:
            label += " (--enable-linear-replayssm-spec)"
        up = fit.startup
        if up is None:
            rows.append((label, f"SGLang refuses to start: {fit.refused}"))
            continue
        ring = (
            f", ring {human(fit.ring_bytes_per_request)} per request slot"
            if fit.ring_bytes_per_request
            else ""
        )
        whole = up.max_total_num_tokens // memory.context_length
        rows.append(
            (
                label,
                (
                    f"max_total_num_tokens={up.max_total_num_tokens},"
                    f" max_running_requests={up.max_running_requests},"
                    f" max_mamba_cache_size={up.max_mamba_cache_size}"
                    f"  (KV pool {human(up.kv_pool_bytes)} at"
                    f" {human(up.kv_bytes_per_token)} per token; mamba state"
                    f" {human(up.mamba_bytes_per_state)} per slot{ring};"
                    f" {count(whole, 'request')} of {memory.context_length:,} tokens fit)"
                ),
            )
        )
    running = (
        ""
        if memory.max_running_requests is None
        else f" and --max-running-requests {memory.max_running_requests}"
    )
    heading = (
        f"What {sglang.ENGINE} sizes at startup with --mem-fraction-static"
        f" {memory.mem_fraction_static}, --gpu-memory-bytes {memory.gpu_memory_bytes:,}"
        f" and --weights-bytes {memory.weights_bytes:,} per GPU, at --context-length"
        f" {memory.context_length:,}{running} (the replay lines are estimates)"
    )
    return heading, rows


def text_sections(sections: Sequence[Section], /) -> str:
    """Sections as aligned text: the first flush left, the others indented under headings."""
    lines: list[str] = []
    width = max(25, *(len(label) + 3 for _, rows in sections[1:] for label, _ in rows))
    for index, (heading, rows) in enumerate(sections):
        indent = "" if index == 0 else "  "
        if index:
            lines += ["", heading]
        lines += [f"{indent}{label:<{width - len(indent)}}{value}" for label, value in rows]
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
        *(f"{view.value} speculative" for view in views),
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
