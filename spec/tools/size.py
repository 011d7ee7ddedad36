# SPDX-License-Identifier: MIT OR Apache-2.0
"""``ssm-rollback-spec size``: size the replay ring for a design review."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Final

from spec import SPEC_VERSION

from . import sizing
from .arguments import whole_number
from .errors import CliError, ExitStatus
from .files import JsonFileError, read_json_file
from .report import write_json

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["add_size_command"]

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
}
_FIGURE_NAMES: Final = {
    "row": "replay row",
    "preflight": "preflight reservation",
    "pool": "pool allocation",
}


def _positive(text: str, /) -> int:
    value = whole_number(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1, got 0")
    return value


def add_size_command(commands: argparse._SubParsersAction[argparse.ArgumentParser], /) -> None:
    """Add ``size`` and its options."""
    size = commands.add_parser(
        "size", help="size the replay ring (and estimate snapshot state) for a design review"
    )
    size.add_argument("--config", metavar="PATH", help="a Hugging Face style config.json")
    for flag in _DIMENSION_FLAGS:
        size.add_argument(f"--{flag.replace('_', '-')}", type=_positive, metavar="N")
    size.add_argument("--num-drafts", type=whole_number, required=True, metavar="N")
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
    size.add_argument("--state-dtype", choices=sizing.DTYPE_BYTES, default="fp32")
    size.add_argument("--conv-dtype", choices=sizing.DTYPE_BYTES, default="bf16")
    size.add_argument("--json", metavar="PATH", help="write the figures as JSON (- for stdout)")
    size.set_defaults(run=_size)


def _human(size: int, /) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{size:,} B" if unit == "B" else f"{size:,} B ({value:.1f} {unit})"
        value /= 1024
    raise AssertionError  # pragma: no cover - the loop always returns


def _dimensions(arguments: argparse.Namespace, /) -> sizing.GdnDimensions:
    given = {flag: getattr(arguments, flag) for flag in _DIMENSION_FLAGS}
    if arguments.config is not None:
        if any(value is not None for value in given.values()):
            raise CliError("give either --config or the explicit dimensions, not both")
        try:
            config = read_json_file(Path(arguments.config))
        except JsonFileError as error:
            raise CliError(f"--config {arguments.config}: {error}") from None
        if not isinstance(config, dict):
            raise CliError(f"--config {arguments.config}: not a JSON object")
        try:
            return sizing.dimensions_from_config(config)
        except sizing.ConfigError as error:
            raise CliError(f"--config {arguments.config}: {error}") from None
    missing = [f"--{flag.replace('_', '-')}" for flag, value in given.items() if value is None]
    if missing:
        raise CliError(f"give --config, or every dimension (missing {', '.join(missing)})")
    return sizing.GdnDimensions(**{_DIMENSION_FLAGS[f]: v for f, v in given.items()})


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


def _size(arguments: argparse.Namespace, /) -> int:
    dimensions = _dimensions(arguments)
    if arguments.mtp_state_slots is None:
        arguments.mtp_state_slots = arguments.mtp_slots + 1
    if arguments.num_intermediates is None:
        arguments.num_intermediates = arguments.num_drafts + 1
    try:
        figures = sizing.size_replay(
            dimensions,
            num_drafts=arguments.num_drafts,
            mtp_slots=arguments.mtp_slots,
            mtp_state_slots=arguments.mtp_state_slots,
            num_intermediates=arguments.num_intermediates,
            state_dtype=arguments.state_dtype,
            conv_dtype=arguments.conv_dtype,
        )
    except sizing.SizingOverflowError as error:
        raise _overflow(error, arguments) from None
    if arguments.json:
        write_json(arguments.json, {"spec_version": SPEC_VERSION, **figures.as_dict()})
        return ExitStatus.OK
    print(_text(dimensions, figures, arguments))
    return ExitStatus.OK


def _text(d: sizing.GdnDimensions, f: sizing.ReplaySizing, arguments: argparse.Namespace, /) -> str:
    covers = "yes" if f.preflight_covers_pool else f"no: short by {_human(f.shortfall_bytes)}"
    qkvz = (
        f"2 x {d.num_key_heads} x {d.key_head_dim} + 2 x {d.num_value_heads} x {d.value_head_dim}"
    )
    recurrent = f"{d.recurrent_state_values:,} x {arguments.state_dtype}"
    conv = f"{d.conv_state_values:,} x {arguments.conv_dtype}"
    rows: Mapping[str, str] = {
        "GDN layers": f"{f.num_gdn_layers}",
        "qkvz row elements": f"{f.qkvz_elems:,}  ({qkvz})",
        "replay row": (
            f"{_human(f.row_bytes)} per token per layer"
            f"  ({f.qkvz_elems:,} BF16 + {d.num_value_heads} x 2 FP32)"
        ),
        "preflight reservation": (
            f"{_human(f.preflight_ring_bytes)}"
            f"  (k = num_drafts + 1 = {f.preflight_k}, mtp_state_slots = {f.preflight_slots})"
        ),
        "pool allocation": (
            f"{_human(f.pool_ring_bytes)}"
            f"  (k = num_intermediates = {f.pool_k}, mtp_slots + 1 = {f.pool_slots})"
        ),
        "preflight covers pool": covers,
    }
    lines = [f"{label:<25}{value}" for label, value in rows.items()]
    recurrent_per = _human(f.snapshot_recurrent_bytes_per_token_layer)
    conv_per = _human(f.snapshot_conv_bytes_per_token_layer)
    window = f"{f.pool_slots} x {f.pool_k} x {f.num_gdn_layers}"
    lines += [
        "",
        "Estimate, not part of the module's contract: snapshot mode for the pool's window",
        f"  recurrent state          {recurrent_per} per token per layer ({recurrent})",
        f"  conv state               {conv_per} per token per layer ({conv})",
        f"  slots x k x layers       {window} = {_human(f.snapshot_estimate_bytes)}",
    ]
    return "\n".join(lines)
