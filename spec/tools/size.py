# SPDX-License-Identifier: MIT OR Apache-2.0
"""``ssm-rollback-spec size``: size the replay ring for a design review."""

from __future__ import annotations

import argparse
import enum
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypedDict

from spec import SPEC_VERSION

from . import sizing
from .arguments import whole_number
from .errors import CliError, ExitStatus
from .files import JsonFileError, read_json_file
from .report import write_json

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["MAX_SWEEP_VALUES", "OutputFormat", "add_size_command"]

#: The most draft counts one sweep prints.
MAX_SWEEP_VALUES: Final = 1024


class OutputFormat(enum.Enum):
    """How the figures are printed."""

    TEXT = "text"
    JSON = "json"
    MARKDOWN = "markdown"


#: Each dimension flag and the GdnDimensions field it sets.
_DIMENSION_FLAGS: Final = {
    "gdn_layers": "num_gdn_layers",
    "key_heads": "num_key_heads",
    "key_head_dim": "key_head_dim",
    "value_heads": "num_value_heads",
    "value_head_dim": "value_head_dim",
    "conv_kernel": "conv_kernel",
}

# Which flags feed each figure, so an overflow names what the user typed.
_FLAGS_OF_FIGURE: Final = {
    "row": ("--key-heads", "--key-head-dim", "--value-heads", "--value-head-dim"),
    "preflight": ("--gdn-layers", "--num-drafts", "--mtp-state-slots"),
    "pool": ("--gdn-layers", "--num-intermediates", "--mtp-slots"),
    "batch": ("--gdn-layers", "--num-intermediates", "--batch"),
    "ring": ("--gdn-layers", "--num-drafts", "--mtp-slots", "--batch"),
}
_FIGURE_NAMES: Final = {
    "row": "replay row",
    "preflight": "preflight reservation",
    "pool": "pool allocation",
    "batch": "batch's replay ring",
    "ring": "replay ring",
}

#: What each view's base state is, per request and layer.
_BASE_FORMULA: Final = {
    sizing.Engine.MODULE: "(h + (K-1) conv columns)",
    sizing.Engine.VLLM: "one block of (h + (K-1) conv columns)",
    sizing.Engine.VLLM_ALIGN: "two blocks of (h + (K-1) conv columns)",
    sizing.Engine.SGLANG: "(h + (K-1) conv columns)",
}

#: What each view adds for speculation, per request and layer.
_SPECULATIVE_FORMULA: Final = {
    sizing.Engine.MODULE: "k x (h + (K-1) conv columns), the dense layout",
    sizing.Engine.VLLM: "(1 + num_drafts) x (h + (K-1+num_drafts) columns), less the base",
    sizing.Engine.VLLM_ALIGN: "(2 + num_drafts) x (h + (K-1+num_drafts) columns), less the base",
    sizing.Engine.SGLANG: "(D x h + (D+K-2) conv columns), D = num_drafts + 1",
}

_PLOT_SUFFIXES: Final = (".png", ".svg")


class _Report(TypedDict):
    spec_version: str
    tp: int
    replay: sizing.ReplayFigures
    snapshot: sizing.SnapshotFigures
    snapshot_to_replay: float | None
    preflight_covers_pool: bool
    shortfall_bytes: int


class _SweepReport(TypedDict):
    spec_version: str
    tp: int
    requests: int
    requests_from: str
    dtypes: dict[str, dict[str, str]]
    rows: list[sizing.SweepFigures]


def _positive(text: str, /) -> int:
    value = whole_number(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1, got 0")
    return value


def _draft_counts(text: str, /) -> tuple[int, ...]:
    """An argparse type: ``N``, ``A,B,C`` or a range ``A-B`` (or a mix)."""
    spans = []
    for part in text.split(","):
        # A leading minus is a negative number, refused as such, not a range.
        if "-" not in part[1:]:
            value = whole_number(part)
            spans.append((value, value))
            continue
        first, _, last = part.partition("-")
        try:
            low, high = whole_number(first), whole_number(last)
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(f"not a whole number or range: {part!r}") from None
        if low > high:
            raise argparse.ArgumentTypeError(f"a range runs upward, got {part!r}")
        spans.append((low, high))
    # Counted before any list is built, so a huge range fails at once.
    if sum(high - low + 1 for low, high in spans) > MAX_SWEEP_VALUES:
        raise argparse.ArgumentTypeError(f"at most {MAX_SWEEP_VALUES} values, got {text!r}")
    return tuple(sorted({value for low, high in spans for value in range(low, high + 1)}))


def add_size_command(commands: argparse._SubParsersAction[argparse.ArgumentParser], /) -> None:
    """Add ``size`` and its options."""
    size = commands.add_parser(
        "size", help="size the replay ring (and the engines' snapshot state) for a design review"
    )
    size.add_argument("--config", metavar="PATH", help="a Hugging Face style config.json")
    for flag in _DIMENSION_FLAGS:
        size.add_argument(f"--{flag.replace('_', '-')}", type=_positive, metavar="N")
    size.add_argument(
        "--num-drafts",
        type=_draft_counts,
        required=True,
        metavar="N|A,B|A-B",
        help="drafts per step; several values (1,3,7) or a range (1-8) print a sweep",
    )
    size.add_argument("--mtp-slots", type=whole_number, required=True, metavar="N")
    size.add_argument(
        "--mtp-state-slots",
        type=whole_number,
        metavar="N",
        help="slots preflight reserves for (default: --mtp-slots plus the dummy slot)",
    )
    size.add_argument(
        "--num-intermediates",
        type=whole_number,
        metavar="N",
        help="the pool's verify window (default: --num-drafts + 1)",
    )
    size.add_argument(
        "--engine",
        choices=[engine.value for engine in sizing.Engine],
        help="whose snapshot-state layout to compare against (default: module; "
        "a sweep or plot shows every view unless this names one)",
    )
    size.add_argument("--state-dtype", choices=sizing.DTYPE_BYTES, help="override the h dtype")
    size.add_argument("--conv-dtype", choices=sizing.DTYPE_BYTES, help="override the conv dtype")
    size.add_argument("--tp", type=_positive, default=1, metavar="N", help="tensor-parallel GPUs")
    size.add_argument("--batch", type=_positive, metavar="N", help="concurrent requests")
    output = size.add_mutually_exclusive_group()
    output.add_argument("--format", choices=[f.value for f in OutputFormat], default="text")
    output.add_argument("--json", metavar="PATH", help="write the figures as JSON (- for stdout)")
    size.add_argument("--plot", metavar="PATH", help="draw bytes against num_drafts (.png, .svg)")
    size.set_defaults(run=_size)


def _human(size: int, /) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{size:,} B" if unit == "B" else f"{size:,} B ({value:.1f} {unit})"
        value /= 1024
    raise AssertionError  # pragma: no cover - the loop always returns


def _short(size: int, /) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:,.1f} TiB"


def _ratio(value: float | None, /) -> str:
    return "-" if value is None else f"{value:,.1f}x"


def _config(arguments: argparse.Namespace, /) -> dict[str, object] | None:
    if arguments.config is None:
        return None
    try:
        config = read_json_file(Path(arguments.config))
    except JsonFileError as error:
        raise CliError(f"--config {arguments.config}: {error}") from None
    if not isinstance(config, dict):
        raise CliError(f"--config {arguments.config}: not a JSON object")
    return config


def _dimensions(
    arguments: argparse.Namespace, config: dict[str, object] | None, /
) -> sizing.GdnDimensions:
    given = {flag: getattr(arguments, flag) for flag in _DIMENSION_FLAGS}
    if config is not None:
        if any(value is not None for value in given.values()):
            raise CliError("give either --config or the explicit dimensions, not both")
        try:
            dimensions = sizing.dimensions_from_config(config)
        except sizing.ConfigError as error:
            raise CliError(f"--config {arguments.config}: {error}") from None
    else:
        missing = [f"--{flag.replace('_', '-')}" for flag, value in given.items() if value is None]
        if missing:
            raise CliError(f"give --config, or every dimension (missing {', '.join(missing)})")
        dimensions = sizing.GdnDimensions(**{_DIMENSION_FLAGS[f]: v for f, v in given.items()})
    try:
        return dimensions.per_gpu(arguments.tp)
    except sizing.TensorParallelError as error:
        source = f" of --config {arguments.config}" if config is not None else ""
        raise CliError(
            f"--tp {error.tp} does not divide the {error.count} {error.heads}{source}"
        ) from None


def _dtypes(
    arguments: argparse.Namespace, config: dict[str, object] | None, engine: sizing.Engine, /
) -> sizing.StateDtypes:
    found = sizing.ConfigDtypes()
    if config is not None:
        try:
            found = sizing.dtypes_from_config(config)
        except sizing.ConfigError as error:
            raise CliError(f"--config {arguments.config}: {error}") from None
    return sizing.engine_dtypes(
        engine, found, recurrent=arguments.state_dtype, conv=arguments.conv_dtype
    )


def _overflow(error: sizing.SizingOverflowError, arguments: argparse.Namespace, /) -> CliError:
    shown = []
    for flag in _FLAGS_OF_FIGURE[error.figure]:
        value = getattr(arguments, flag.removeprefix("--").replace("-", "_"))
        if value is not None:
            shown.append(f"{flag} {value}")
    source = f"--config {arguments.config}" if arguments.config is not None else ""
    given = ", ".join([*shown, source] if source else shown)
    return CliError(
        f"the {_FIGURE_NAMES[error.figure]} exceeds the runtime's 64-bit usize with {given}"
    )


def _check_plot_path(arguments: argparse.Namespace, /) -> None:
    if arguments.plot is not None and Path(arguments.plot).suffix.lower() not in _PLOT_SUFFIXES:
        raise CliError(f"--plot {arguments.plot}: give a .png or .svg path")


def _size(arguments: argparse.Namespace, /) -> int:
    _check_plot_path(arguments)
    config = _config(arguments)
    dimensions = _dimensions(arguments, config)
    counts: tuple[int, ...] = arguments.num_drafts
    if len(counts) > 1:
        return _sweep(arguments, config, dimensions, counts)
    # Overflow messages show the value the user typed, not a one-element tuple.
    arguments.num_drafts = counts[0]
    if arguments.mtp_state_slots is None:
        arguments.mtp_state_slots = arguments.mtp_slots + 1
    if arguments.num_intermediates is None:
        arguments.num_intermediates = arguments.num_drafts + 1
    engine = sizing.Engine(arguments.engine or sizing.Engine.MODULE.value)
    try:
        replay = sizing.size_replay(
            dimensions,
            num_drafts=arguments.num_drafts,
            mtp_slots=arguments.mtp_slots,
            mtp_state_slots=arguments.mtp_state_slots,
            num_intermediates=arguments.num_intermediates,
            batch=arguments.batch,
        )
    except sizing.SizingOverflowError as error:
        raise _overflow(error, arguments) from None
    snapshot = sizing.size_snapshot(
        dimensions,
        engine,
        num_drafts=arguments.num_drafts,
        slots=replay.pool_slots,
        dtypes=_dtypes(arguments, config, engine),
        num_intermediates=arguments.num_intermediates,
        batch=arguments.batch,
    )
    ratio = snapshot.speculative_bytes / replay.pool_ring_bytes if replay.pool_ring_bytes else None
    # Drawn first, so that a plot that cannot be written leaves no report behind.
    if arguments.plot is not None:
        _plot(arguments, config, dimensions, counts)
    output = OutputFormat.JSON if arguments.json else OutputFormat(arguments.format)
    if output is OutputFormat.JSON:
        report = _Report(
            spec_version=SPEC_VERSION,
            tp=arguments.tp,
            replay=replay.as_dict(),
            snapshot=snapshot.as_dict(),
            snapshot_to_replay=ratio,
            preflight_covers_pool=replay.preflight_covers_pool,
            shortfall_bytes=replay.shortfall_bytes,
        )
        write_json(arguments.json or "-", report)
    else:
        sections = _sections(dimensions, replay, snapshot, ratio, arguments)
        print(_markdown(sections) if output is OutputFormat.MARKDOWN else _text(sections))
    return ExitStatus.OK


_Section = tuple[str, list[tuple[str, str]]]


def _sections(
    d: sizing.GdnDimensions,
    f: sizing.ReplaySizing,
    s: sizing.SnapshotSizing,
    ratio: float | None,
    arguments: argparse.Namespace,
    /,
) -> list[_Section]:
    covers = "yes" if f.preflight_covers_pool else f"no: short by {_human(f.shortfall_bytes)}"
    qkvz = (
        f"2 x {d.num_key_heads} x {d.key_head_dim} + 2 x {d.num_value_heads} x {d.value_head_dim}"
    )
    replay = [
        ("GDN layers", f"{f.num_gdn_layers}"),
        ("per GPU of", f"--tp {arguments.tp}"),
        ("qkvz row elements", f"{f.qkvz_elems:,}  ({qkvz})"),
        (
            "replay row",
            (
                f"{_human(f.row_bytes)} per token per layer"
                f"  ({f.qkvz_elems:,} BF16 + {d.num_value_heads} x 2 FP32)"
            ),
        ),
        (
            "preflight reservation",
            (
                f"{_human(f.preflight_ring_bytes)}"
                f"  (k = num_drafts + 1 = {f.preflight_k}, mtp_state_slots = {f.preflight_slots})"
            ),
        ),
        (
            "pool allocation",
            (
                f"{_human(f.pool_ring_bytes)}"
                f"  (k = num_intermediates = {f.pool_k}, mtp_slots + 1 = {f.pool_slots})"
            ),
        ),
        ("preflight covers pool", covers),
    ]
    if f.batch is not None and f.batch_ring_bytes is not None:
        replay.append((f"batch of {f.batch} requests", f"{_human(f.batch_ring_bytes)} ring"))
    replay.append(
        (
            "review note: minimal row",
            (
                f"{_human(f.minimal_replay_row_bytes)} per token per layer without z"
                f" ({d.conv_dim:,} BF16 + {d.num_value_heads} x 2 FP32), pool ring"
                f" {_human(f.minimal_pool_ring_bytes)} (docs/replay.md)"
            ),
        )
    )
    layers = f"{s.slots} slots x {f.num_gdn_layers} layers"
    snapshot = [
        (
            "recurrent state h",
            (
                f"{_human(s.recurrent_bytes_per_layer)} per layer"
                f" ({d.recurrent_state_values:,} x {s.dtypes.recurrent})"
            ),
        ),
        (
            "conv column",
            (
                f"{_human(s.conv_column_bytes_per_layer)} per layer"
                f" ({d.conv_dim:,} x {s.dtypes.conv}), K = {d.conv_kernel}"
            ),
        ),
        ("base state", f"{_human(s.base_bytes)}  ({layers} x {_BASE_FORMULA[s.engine]})"),
        (
            "speculative state",
            f"{_human(s.speculative_bytes)}  ({layers} x {_SPECULATIVE_FORMULA[s.engine]})",
        ),
        ("base + speculative", _human(s.total_bytes)),
        ("speculative / ring", f"{_ratio(ratio)}  (over the pool allocation)"),
    ]
    if s.batch is not None:
        batch = s.as_dict()
        snapshot.append(
            (
                f"batch of {s.batch} requests",
                (
                    f"base {_human(batch['batch_base_bytes'] or 0)},"
                    f" speculative {_human(batch['batch_speculative_bytes'] or 0)}"
                ),
            )
        )
    heading = (
        "Estimate, not part of the module's contract: "
        f"snapshot state, {s.engine.value} view (docs/sizing.md)"
    )
    return [("Replay ring (the contract)", replay), (heading, snapshot)]


def _text(sections: Sequence[_Section], /) -> str:
    lines: list[str] = []
    for index, (heading, rows) in enumerate(sections):
        indent = "" if index == 0 else "  "
        if index:
            lines += ["", heading]
        lines += [f"{indent}{label:<{25 - len(indent)}}{value}" for label, value in rows]
    return "\n".join(lines)


def _cell(text: str, /) -> str:
    # A bare | would end the Markdown table cell.
    return text.replace("|", "\\|")


def _markdown(sections: Sequence[_Section], /) -> str:
    lines: list[str] = []
    for heading, rows in sections:
        if lines:
            lines.append("")
        lines += [f"**{heading}**", "", "| figure | value |", "| --- | --- |"]
        lines += [f"| {label} | {_cell(value)} |" for label, value in rows]
    return "\n".join(lines)


def _views(arguments: argparse.Namespace, /) -> list[sizing.Engine]:
    if arguments.engine is None:
        return list(sizing.Engine)
    return [sizing.Engine(arguments.engine)]


def _sweep(
    arguments: argparse.Namespace,
    config: dict[str, object] | None,
    dimensions: sizing.GdnDimensions,
    counts: tuple[int, ...],
    /,
) -> int:
    for flag in ("num_intermediates", "mtp_state_slots"):
        if getattr(arguments, flag) is not None:
            raise CliError(
                f"--{flag.replace('_', '-')} sizes one review; leave it out of a --num-drafts sweep"
            )
    requests = arguments.batch or arguments.mtp_slots + 1
    dtypes = {engine: _dtypes(arguments, config, engine) for engine in _views(arguments)}
    rows = _sweep_rows(arguments, dimensions, counts, requests, dtypes)
    if arguments.plot is not None:
        _plot(arguments, config, dimensions, counts, rows=rows)
    output = OutputFormat.JSON if arguments.json else OutputFormat(arguments.format)
    if output is OutputFormat.JSON:
        report = _SweepReport(
            spec_version=SPEC_VERSION,
            tp=arguments.tp,
            requests=requests,
            requests_from="--batch" if arguments.batch else "--mtp-slots + 1",
            dtypes={
                engine.value: {"recurrent": chosen.recurrent, "conv": chosen.conv}
                for engine, chosen in dtypes.items()
            },
            rows=[row.as_dict() for row in rows],
        )
        write_json(arguments.json or "-", report)
    else:
        print(_sweep_table(rows, requests, arguments, markdown=output is OutputFormat.MARKDOWN))
    return ExitStatus.OK


def _sweep_rows(
    arguments: argparse.Namespace,
    dimensions: sizing.GdnDimensions,
    counts: tuple[int, ...],
    requests: int,
    dtypes: dict[sizing.Engine, sizing.StateDtypes],
    /,
) -> list[sizing.SweepRow]:
    rows = []
    for drafts in counts:
        try:
            rows += sizing.sweep(dimensions, num_drafts=[drafts], requests=requests, dtypes=dtypes)
        except sizing.SizingOverflowError as error:
            # Name the one draft count that overflowed, as a single review would.
            arguments.num_drafts = drafts
            raise _overflow(error, arguments) from None
    return rows


def _sweep_table(
    rows: Sequence[sizing.SweepRow],
    requests: int,
    arguments: argparse.Namespace,
    /,
    *,
    markdown: bool,
) -> str:
    engines = list(rows[0].snapshot_bytes)
    header = ["num_drafts", "replay ring", *(f"{e.value} snapshot" for e in engines)]
    body = [
        [
            str(row.num_drafts),
            _short(row.replay_ring_bytes),
            *(f"{_short(row.snapshot_bytes[e])} ({_ratio(row.ratio(e))})" for e in engines),
        ]
        for row in rows
    ]
    who = f"--batch {arguments.batch}" if arguments.batch else "--mtp-slots + 1"
    caption = (
        f"Speculative state per GPU (--tp {arguments.tp}) for {requests} requests ({who}); "
        "snapshot figures are estimates (docs/sizing.md), each with its ratio to the "
        "replay ring; exact bytes with --format json"
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


def _plot(
    arguments: argparse.Namespace,
    config: dict[str, object] | None,
    dimensions: sizing.GdnDimensions,
    counts: tuple[int, ...],
    /,
    *,
    rows: list[sizing.SweepRow] | None = None,
) -> None:
    # Imported here so that nothing but --plot ever loads matplotlib.
    from .plot import plot_sweep  # noqa: PLC0415

    requests = arguments.batch or arguments.mtp_slots + 1
    if rows is None:
        dtypes = {engine: _dtypes(arguments, config, engine) for engine in _views(arguments)}
        rows = sizing.sweep(dimensions, num_drafts=counts, requests=requests, dtypes=dtypes)
    plot_sweep(
        rows,
        arguments.plot,
        title=f"Speculative state per GPU (TP {arguments.tp}), {requests} requests",
    )
