# SPDX-License-Identifier: MIT OR Apache-2.0
"""``ssm-rollback-spec size``: size the replay ring for a design review."""

from __future__ import annotations

import argparse
import enum
from pathlib import Path
from typing import Final, TypedDict

from .. import SPEC_VERSION
from ..harness.files import JsonFileError, read_json_file
from ..replay.rows import ReplayDesign
from ..sizing import capacity, replayssm, rings, sglang, vllm
from ..sizing import dimensions as dims
from ..sizing.dtypes import Dtype, UnsupportedDtypeError, dtypes_from_config
from ..sizing.memory import FLAGS, FitFlagsError, FitKind, fit_kind
from ..sizing.presentation import (
    ASSUMED_DTYPES,
    BASE_FORMULA,
    RATIO_DEFINITION,
    SPECULATIVE_FORMULA,
    Section,
    count,
    fit_section,
    human,
    markdown_sections,
    plan_rows,
    sglang_fit_section,
    sweep_table,
    text_sections,
)
from ..sizing.presentation import ratio as ratio_text
from ..sizing.views import (
    Model,
    Setup,
    SnapshotFigures,
    SnapshotSizing,
    SweepFigures,
    SweepRow,
    View,
    size_view,
    sweep,
    view_dtypes,
)
from .arguments import prepare_outputs, whole_number
from .errors import CliError, ExitStatus
from .report import write_json
from .shipped import EXAMPLE_SUFFIX, example_config, examples_directory

__all__ = ["MAX_SWEEP_VALUES", "OutputFormat", "add_size_command"]

#: The most draft counts one sweep prints.
MAX_SWEEP_VALUES: Final = 1024


class OutputFormat(enum.Enum):
    """How the figures are printed."""

    TEXT = "text"
    JSON = "json"
    MARKDOWN = "markdown"


#: What each dimension flag gives, for --help.
_DIMENSION_HELP: Final = {
    "gdn_layers": "GDN layers",
    "key_heads": "GDN key heads",
    "key_head_dim": "GDN key head dimension",
    "value_heads": "GDN value heads",
    "value_head_dim": "GDN value head dimension",
    "conv_kernel": "GDN conv kernel width K",
}

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

#: Old view names that still work, and the view each now names.
_VIEW_ALIASES: Final = {"vllm-align": View.VLLM}

_PLOT_SUFFIXES: Final = (".png", ".svg")


class _Report(TypedDict):
    spec_version: str
    tp: int
    replay: rings.ReplayFigures
    snapshot: SnapshotFigures
    fit: capacity.VllmFitReport | capacity.SglangFitReport | None
    snapshot_to_replay: float | None
    preflight_covers_pool: bool
    shortfall_bytes: int


class _ViewFigures(TypedDict):
    engine: str
    setup: str
    recurrent: str
    conv: str


class _SweepReport(TypedDict):
    spec_version: str
    tp: int
    slots: int
    requests: int
    requests_from: str
    minimal_ring_is: str
    replayssm_ring_follows: str
    views: dict[str, _ViewFigures]
    rows: list[SweepFigures]


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


#: Binary units ``--kv-cache-memory-bytes`` takes after a whole number.
_BYTE_UNITS: Final = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def _bytes(text: str, /) -> int:
    """An argparse type: a whole number of bytes, or one with a KiB, MiB, GiB or TiB suffix."""
    for unit, scale in _BYTE_UNITS.items():
        if text.endswith(unit):
            return _positive(text.removesuffix(unit)) * scale
    return _positive(text)


def _fraction(text: str, /) -> float:
    """An argparse type: a fraction above 0 and at most 1."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"a fraction above 0 and at most 1, got {text!r}")
    return value


def add_size_command(commands: argparse._SubParsersAction[argparse.ArgumentParser], /) -> None:
    """Add ``size`` and its options."""
    size = commands.add_parser(
        "size", help="size the replay ring (and the engines' snapshot state) for a design review"
    )
    size.add_argument(
        "--config",
        metavar="PATH",
        help="a Hugging Face style config.json, or the name of a shipped example: "
        + ", ".join(
            sorted(p.name.removesuffix(EXAMPLE_SUFFIX) for p in examples_directory().glob("*.json"))
        ),
    )
    for flag, help_text in _DIMENSION_HELP.items():
        size.add_argument(
            f"--{flag.replace('_', '-')}",
            type=_positive,
            metavar="N",
            help=f"{help_text} (instead of --config; the views then assume a bf16 model)",
        )
    size.add_argument(
        "--num-drafts",
        type=_draft_counts,
        required=True,
        metavar="N|A,B|A-B",
        help="drafts per step; several values (1,3,7) or a range (1-8) print a sweep",
    )
    size.add_argument(
        "--mtp-slots",
        type=whole_number,
        required=True,
        metavar="N",
        help="the module's MTP slots (its pool adds a dummy slot); the engines' requests",
    )
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
        choices=[*(view.value for view in View), *_VIEW_ALIASES],
        help="whose state layout to compare against (default: module; a sweep or plot shows "
        "every view unless this names one; vllm-align is the old name of vllm)",
    )
    dtypes = [dtype.value for dtype in Dtype]
    size.add_argument(
        "--state-dtype",
        choices=dtypes,
        help="force the h dtype (vLLM's --mamba-ssm-cache-dtype, SGLang's --mamba-ssm-dtype)",
    )
    size.add_argument(
        "--conv-dtype",
        choices=dtypes,
        help="force the conv dtype (vLLM's --mamba-cache-dtype, SGLang's SGLANG_MAMBA_CONV_DTYPE)",
    )
    size.add_argument(
        "--no-enable-prefix-caching",
        dest="prefix_caching",
        action="store_false",
        help=f"the vllm view without prefix caching (mamba_cache_mode none; {vllm.ENGINE})",
    )
    size.add_argument(
        "--gpu",
        choices=[gpu.value for gpu in vllm.Gpu],
        default=vllm.Gpu.SM90.value,
        help="the GPU generation the vllm view runs on (default: sm90)",
    )
    size.add_argument(
        "--speculative-method",
        choices=[method.value for method in vllm.SpeculativeMethod],
        default=vllm.SpeculativeMethod.MTP.value,
        help="the vllm view's drafter: mtp (default, as the Qwen model cards serve) adds the"
        " MTP layer's attention to the KV-cache grouping; ngram adds none",
    )
    for dest, (metavar, help_text) in FLAGS.items():
        kind = {"FRACTION": _fraction, "BYTES": _bytes}.get(metavar, _positive)
        size.add_argument(f"--{dest.replace('_', '-')}", type=kind, metavar=metavar, help=help_text)
    size.add_argument(
        "--disable-radix-cache",
        action="store_true",
        help=f"the sglang views without the radix cache ({sglang.ENGINE})",
    )
    size.add_argument(
        "--linear-replayssm-cache-len",
        type=_positive,
        default=None,
        metavar="L",
        help="records per slot of the sglang-replayssm ring (default: 16, as SGLang)",
    )
    size.add_argument("--tp", type=_positive, default=1, metavar="N", help="tensor-parallel GPUs")
    size.add_argument("--batch", type=_positive, metavar="N", help="concurrent requests")
    output = size.add_mutually_exclusive_group()
    output.add_argument(
        "--format",
        choices=[f.value for f in OutputFormat],
        default="text",
        help="text (default), json (exact integers) or markdown tables",
    )
    output.add_argument(
        "--json",
        metavar="PATH",
        help="write the figures as JSON (- for stdout; missing folders are made)",
    )
    size.add_argument(
        "--plot",
        metavar="PATH",
        help="draw bytes against num_drafts (.png, .svg; missing folders are made)",
    )
    size.set_defaults(run=_size)


def _config(arguments: argparse.Namespace, /) -> dict[str, object] | None:
    if arguments.config is None:
        return None
    path = Path(arguments.config)
    if not path.exists():
        # A shipped example by its name, from anywhere the package is installed.
        path = example_config(arguments.config) or path
    try:
        config = read_json_file(path)
    except JsonFileError as error:
        raise CliError(f"--config {arguments.config}: {error}") from None
    if not isinstance(config, dict):
        raise CliError(f"--config {arguments.config}: not a JSON object")
    return config


def _model(arguments: argparse.Namespace, config: dict[str, object] | None, /) -> Model:
    given = {flag: getattr(arguments, flag) for flag in _DIMENSION_FLAGS}
    attention = None
    found = None
    architecture = None
    attention_layers, drafter_layers, sglang_layers = 0, 1, None
    if config is not None:
        if any(value is not None for value in given.values()):
            raise CliError("give either --config or the explicit dimensions, not both")
        try:
            dimensions = dims.dimensions_from_config(config)
            attention = dims.attention_from_config(config)
            found = dtypes_from_config(config)
            attention_layers = dims.attention_layers_from_config(config)
            drafter_layers = dims.drafter_layers_from_config(config)
            sglang_layers = dims.interval_gdn_layers_from_config(config)
        except dims.ConfigError as error:
            raise CliError(f"--config {arguments.config}: {error}") from None
        architecture = dims.architecture_from_config(config)
    else:
        missing = [f"--{flag.replace('_', '-')}" for flag, value in given.items() if value is None]
        if missing:
            raise CliError(f"give --config, or every dimension (missing {', '.join(missing)})")
        dimensions = dims.GdnDimensions(**{_DIMENSION_FLAGS[f]: v for f, v in given.items()})
    try:
        dimensions = dimensions.per_gpu(arguments.tp)
    except dims.TensorParallelError as error:
        source = f" of --config {arguments.config}" if config is not None else ""
        raise CliError(
            f"--tp {error.tp} does not divide the {error.count} {error.heads}{source}"
        ) from None
    return Model(
        dimensions=dimensions,
        attention=None if attention is None else attention.per_gpu(arguments.tp),
        architecture=architecture,
        attention_layers=attention_layers,
        drafter_layers=drafter_layers,
        sglang_gdn_layers=sglang_layers,
        **({} if found is None else {"dtypes": found}),
    )


def _setup(arguments: argparse.Namespace, /) -> Setup:
    length = arguments.linear_replayssm_cache_len
    return Setup(
        vllm=vllm.VllmSetup(
            prefix_caching=arguments.prefix_caching,
            gpu=vllm.Gpu(arguments.gpu),
            method=vllm.SpeculativeMethod(arguments.speculative_method),
        ),
        sglang=sglang.SglangSetup(radix_cache=not arguments.disable_radix_cache),
        replayssm_cache_len=length or replayssm.DEFAULT_CACHE_LEN,
        recurrent=None if arguments.state_dtype is None else Dtype(arguments.state_dtype),
        conv=None if arguments.conv_dtype is None else Dtype(arguments.conv_dtype),
    )


def _unsupported(error: UnsupportedDtypeError, arguments: argparse.Namespace, /) -> CliError:
    # Name what the user typed, or else the config that named the dtype.
    for flag in ("state_dtype", "conv_dtype"):
        if getattr(arguments, flag) == error.dtype.value:
            return CliError(f"--{flag.replace('_', '-')} {error.dtype.value}: {error}")
    return CliError(f"--config {arguments.config}: {error}")


def _overflow(error: rings.SizingOverflowError, arguments: argparse.Namespace, /) -> CliError:
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


def _view(arguments: argparse.Namespace, /) -> View:
    name = arguments.engine or View.MODULE.value
    return _VIEW_ALIASES.get(name) or View(name)


def _requests(arguments: argparse.Namespace, /) -> int:
    # The engines' own requests: the seed's dummy slot is the module's, and
    # each engine adds its own pool padding instead.
    return int(arguments.batch or arguments.mtp_slots)


def _size(arguments: argparse.Namespace, /) -> int:
    _check_plot_path(arguments)
    prepare_outputs(("--plot", arguments.plot), ("--json", arguments.json))
    kind = _fit_kind(arguments)
    config = _config(arguments)
    model = _model(arguments, config)
    setup = _setup(arguments)
    counts: tuple[int, ...] = arguments.num_drafts
    if len(counts) > 1:
        return _sweep(arguments, model, setup, counts)
    # Overflow messages show the value the user typed, not a one-element tuple.
    arguments.num_drafts = counts[0]
    if arguments.mtp_state_slots is None:
        arguments.mtp_state_slots = arguments.mtp_slots + 1
    if arguments.num_intermediates is None:
        arguments.num_intermediates = arguments.num_drafts + 1
    view = _view(arguments)
    try:
        replay = rings.size_replay(
            model.dimensions,
            num_drafts=arguments.num_drafts,
            mtp_slots=arguments.mtp_slots,
            mtp_state_slots=arguments.mtp_state_slots,
            num_intermediates=arguments.num_intermediates,
            batch=arguments.batch,
        )
    except rings.SizingOverflowError as error:
        raise _overflow(error, arguments) from None
    slots = arguments.batch or replay.pool_slots
    try:
        snapshot = size_view(
            view,
            model,
            num_drafts=arguments.num_drafts,
            requests=slots if view is View.MODULE else _requests(arguments),
            setup=setup,
            num_intermediates=arguments.num_intermediates,
        )
    except UnsupportedDtypeError as error:
        raise _unsupported(error, arguments) from None
    # The headline ratio, per request on both sides so that no count of
    # requests or slots changes it: what one request's drafting holds over
    # one slot's ring.
    ring = replay.pool_ring_bytes // replay.pool_slots
    ratio = snapshot.speculative_bytes_per_request / ring if ring else None
    fits = _fits(arguments, model, setup, kind)
    # Drawn first, so that a plot that cannot be written leaves no report behind.
    if arguments.plot is not None:
        _plot(arguments, model, setup, counts)
    output = OutputFormat.JSON if arguments.json else OutputFormat(arguments.format)
    if output is OutputFormat.JSON:
        report = _Report(
            spec_version=SPEC_VERSION,
            tp=arguments.tp,
            replay=replay.as_dict(),
            snapshot=snapshot.as_dict(),
            fit=None
            if fits is None
            else capacity.sglang_fit_report(fits[1], fits[0])
            if isinstance(fits, tuple)
            else capacity.vllm_fit_report(fits, _utilization(arguments)),
            snapshot_to_replay=ratio,
            preflight_covers_pool=replay.preflight_covers_pool,
            shortfall_bytes=replay.shortfall_bytes,
        )
        write_json(arguments.json or "-", report)
    else:
        sections = _sections(model.dimensions, replay, snapshot, ratio, arguments)
        if isinstance(fits, tuple):
            sections.append(sglang_fit_section(fits[1], fits[0]))
        elif fits is not None:
            sections.append(fit_section(fits, _utilization(arguments)))
        print(
            markdown_sections(sections)
            if output is OutputFormat.MARKDOWN
            else text_sections(sections)
        )
    return ExitStatus.OK


def _fit_kind(arguments: argparse.Namespace, /) -> FitKind:
    given = [dest for dest in FLAGS if getattr(arguments, dest) is not None]
    if len(arguments.num_drafts) > 1 and given:
        raise CliError(f"--{given[0].replace('_', '-')} sizes one review; leave it out of a sweep")
    try:
        return fit_kind({d: getattr(arguments, d) for d in FLAGS}, view=_view(arguments).value)
    except FitFlagsError as error:
        raise CliError(str(error)) from None


def _utilization(arguments: argparse.Namespace, /) -> capacity.VllmUtilization | None:
    if arguments.gpu_memory_utilization is None:
        return None
    flags = ("gpu_memory_utilization", "gpu_memory_bytes", "weights_bytes", "activation_bytes")
    return capacity.VllmUtilization(*(getattr(arguments, flag) for flag in flags))


def _fits(
    arguments: argparse.Namespace, model: Model, setup: Setup, kind: FitKind, /
) -> list[capacity.Fit] | tuple[sglang.SglangMemory, list[capacity.SglangFit]] | None:
    memory = {d: getattr(arguments, d) for d in ("gpu_memory_bytes", "weights_bytes")}
    used = _utilization(arguments)
    if used is not None:
        if used.kv_cache_bytes <= 0:
            utilization = used.gpu_memory_utilization
            raise CliError(f"--gpu-memory-utilization {utilization} leaves no KV-cache memory")
        arguments.kv_cache_memory_bytes = used.kv_cache_bytes
    try:
        if kind is FitKind.SGLANG:
            given = sglang.SglangMemory(
                **memory,
                mem_fraction_static=arguments.mem_fraction_static,
                context_length=arguments.context_length,
                max_running_requests=arguments.max_running_requests,
            )
            return given, capacity.sglang_fit(model, setup, given, num_drafts=arguments.num_drafts)
        if kind is FitKind.NONE:
            return None
        return capacity.vllm_fit(
            model,
            setup,
            num_drafts=arguments.num_drafts,
            kv_cache_bytes=arguments.kv_cache_memory_bytes,
            max_model_len=arguments.max_model_len,
        )
    except rings.SizingOverflowError as error:
        raise _overflow(error, arguments) from None
    except UnsupportedDtypeError as error:
        raise _unsupported(error, arguments) from None


def _replay_section(
    d: dims.GdnDimensions, f: rings.ReplaySizing, arguments: argparse.Namespace, /
) -> list[tuple[str, str]]:
    covers = "yes" if f.preflight_covers_pool else f"no: short by {human(f.shortfall_bytes)}"
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


def _sections(
    d: dims.GdnDimensions,
    f: rings.ReplaySizing,
    s: SnapshotSizing,
    ratio: float | None,
    arguments: argparse.Namespace,
    /,
) -> list[Section]:
    layers = f"{count(s.requests, 'slot' if s.view is View.MODULE else 'request')} x"
    if s.view is not View.VLLM:
        layers += f" {f.num_gdn_layers} layers x"
    snapshot = [
        ("follows", s.view.engine),
        ("setup", s.setup),
        *([] if arguments.config is not None else [("dtypes assumed", ASSUMED_DTYPES)]),
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
    ]
    if s.plan is not None:
        snapshot += plan_rows(s.plan)
    if s.replayssm_record_bytes is not None:
        snapshot.append(
            (
                "ReplaySSM record",
                (
                    f"{human(s.replayssm_record_bytes)} per record per layer,"
                    f" {s.replayssm_cache_len} records per slot"
                ),
            )
        )
    padding = s.base_padding_bytes + s.speculative_padding_bytes
    snapshot += [
        (
            "base state",
            f"{human(s.base_bytes)}  ({layers} {BASE_FORMULA[s.view]})",
        ),
        (
            "speculative state",
            f"{human(s.speculative_bytes)}  ({layers} {SPECULATIVE_FORMULA[s.view]})",
        ),
        ("base + speculative", human(s.total_bytes)),
    ]
    if s.view is not View.MODULE:
        snapshot.append(("of which pool padding", human(padding)))
    snapshot.append(
        (
            "speculative / ring",
            f"{ratio_text(ratio)}  (per request: {RATIO_DEFINITION})",
        )
    )
    heading = (
        "Estimate, not part of the module's contract: "
        f"snapshot state, {s.view.value} view, {s.view.engine} (docs/sizing.md)"
    )
    return [("Replay ring (the contract)", _replay_section(d, f, arguments)), (heading, snapshot)]


def _views(arguments: argparse.Namespace, /) -> list[View]:
    if arguments.engine is None:
        return list(View)
    return [_view(arguments)]


def _sweep(
    arguments: argparse.Namespace,
    model: Model,
    setup: Setup,
    counts: tuple[int, ...],
    /,
) -> int:
    for flag in ("num_intermediates", "mtp_state_slots"):
        if getattr(arguments, flag) is not None:
            raise CliError(
                f"--{flag.replace('_', '-')} sizes one review; leave it out of a --num-drafts sweep"
            )
    rows = _sweep_rows(arguments, model, setup, counts)
    if arguments.plot is not None:
        _plot(arguments, model, setup, counts, rows=rows)
    output = OutputFormat.JSON if arguments.json else OutputFormat(arguments.format)
    if output is OutputFormat.JSON:
        views = {}
        for view in _views(arguments):
            chosen = view_dtypes(view, model, setup)
            views[view.value] = _ViewFigures(
                engine=view.engine,
                setup=setup.describe(view),
                recurrent=chosen.recurrent.value,
                conv=chosen.conv.value,
            )
        report = _SweepReport(
            spec_version=SPEC_VERSION,
            tp=arguments.tp,
            slots=_slots(arguments),
            requests=_requests(arguments),
            requests_from="--batch" if arguments.batch else "--mtp-slots",
            minimal_ring_is=rings.MINIMAL_RING_SCOPE,
            replayssm_ring_follows=f"{sglang.ENGINE}, {setup.describe(View.SGLANG_REPLAYSSM)}",
            views=views,
            rows=[row.as_dict() for row in rows],
        )
        write_json(arguments.json or "-", report)
    else:
        markdown = output is OutputFormat.MARKDOWN
        tables = [
            sweep_table(rows, scope=_scope(arguments), markdown=markdown, per_request=per_request)
            for per_request in (False, True)
        ]
        print("\n\n".join(tables))
    return ExitStatus.OK


def _scope(arguments: argparse.Namespace, /) -> str:
    who = f"--batch {arguments.batch}" if arguments.batch else "--mtp-slots"
    requests = count(_requests(arguments), "request")
    return (
        f"Per GPU (--tp {arguments.tp}): rings over {_slots(arguments)} seed slots, views"
        f" over {requests} ({who}) and their pools' padding"
    )


def _slots(arguments: argparse.Namespace, /) -> int:
    return int(arguments.batch or arguments.mtp_slots + 1)


def _sweep_rows(
    arguments: argparse.Namespace,
    model: Model,
    setup: Setup,
    counts: tuple[int, ...],
    /,
) -> list[SweepRow]:
    rows = []
    for drafts in counts:
        try:
            rows += sweep(
                model,
                num_drafts=[drafts],
                slots=_slots(arguments),
                requests=_requests(arguments),
                views=_views(arguments),
                setup=setup,
            )
        except rings.SizingOverflowError as error:
            # Name the one draft count that overflowed, as a single review would.
            arguments.num_drafts = drafts
            raise _overflow(error, arguments) from None
        except UnsupportedDtypeError as error:
            raise _unsupported(error, arguments) from None
    return rows


def _plot(
    arguments: argparse.Namespace,
    model: Model,
    setup: Setup,
    counts: tuple[int, ...],
    /,
    *,
    rows: list[SweepRow] | None = None,
) -> None:
    # Imported here so that nothing but --plot ever loads matplotlib.
    from ..sizing.plot import PlotError, plot_sweep  # noqa: PLC0415

    if rows is None:
        rows = _sweep_rows(arguments, model, setup, counts)
    try:
        plot_sweep(
            rows,
            arguments.plot,
            title=(
                f"Speculative state per GPU (TP {arguments.tp}),"
                f" {count(_requests(arguments), 'request')} ({_slots(arguments)} seed slots)"
            ),
        )
    except PlotError as error:
        raise CliError(str(error)) from None
