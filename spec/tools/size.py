# SPDX-License-Identifier: MIT OR Apache-2.0
"""``ssm-rollback-spec size``: size the replay ring for a design review.

This module parses the flags, asks :func:`ssm_rollback_spec.sizing.review.size_review`
once, and prints what it reports; the engines' units say everything engine-specific.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ..harness.files import JsonFileError, read_json_file
from ..sizing import dimensions as dims
from ..sizing import replayssm, sglang, vllm
from ..sizing.dtypes import Dtype, UnsupportedDtypeError
from ..sizing.memory import FitFlagsError, fit_for
from ..sizing.memory import flags as memory_flags
from ..sizing.presentation import plot_title, report_text
from ..sizing.review import (
    FlagValue,
    OneReviewError,
    ReviewOverflowError,
    SizeRequest,
    size_review,
    view_name,
)
from ..sizing.state import Setup
from .arguments import prepare_outputs
from .errors import CliError, ExitStatus
from .report import write_json
from .shipped import EXAMPLE_SUFFIX, example_config, examples_directory
from .size_flags import (
    DIMENSION_FLAGS,
    MAX_SWEEP_VALUES,
    SPELLING,
    OutputFormat,
    SizeParser,
    add_size_arguments,
    spelling,
)

if TYPE_CHECKING:
    import argparse

__all__ = ["MAX_SWEEP_VALUES", "OutputFormat", "add_arguments"]

# Which flags feed each figure, so an overflow names what the user typed:
# each entry is one input, by the flags that may give it, the first typed
# one named (a default the review took is named by the flag it came from).
_FLAGS_OF_FIGURE: Final = {
    "row": (("key_heads",), ("key_head_dim",), ("value_heads",), ("value_head_dim",)),
    "preflight": (("gdn_layers",), ("num_drafts",), ("mtp_state_slots", "mtp_slots", "batch")),
    "pool": (("gdn_layers",), ("num_intermediates", "num_drafts"), ("mtp_slots", "batch")),
    "batch": (("gdn_layers",), ("num_intermediates", "num_drafts"), ("batch",)),
    "ring": (("gdn_layers",), ("num_drafts",), ("mtp_slots",), ("batch",)),
}
_FIGURE_NAMES: Final = {
    "row": "replay row",
    "preflight": "preflight reservation",
    "pool": "pool allocation",
    "batch": "batch's replay ring",
    "ring": "replay ring",
}

_PLOT_SUFFIXES: Final = (".png", ".svg")
#: The file a Hugging Face snapshot folder keeps its config in.
_SNAPSHOT_CONFIG: Final = "config.json"


def _flag(dest: str, /) -> str:
    return f"--{dest.replace('_', '-')}"


#: Flags that say how to print, not what to size, left out of the JSON's record.
_OUTPUT_FLAGS: Final = ("format", "json", "plot", "why", "run", "command", SPELLING)


def _suggestion(typed: str, /) -> str:
    """``; did you mean --config NAME?`` for the shipped examples a misspelt --config resembles."""
    names = sorted(
        path.name.removesuffix(EXAMPLE_SUFFIX) for path in examples_directory().glob("*.json")
    )
    stem = Path(typed).name.removesuffix(EXAMPLE_SUFFIX).removesuffix(".json")
    close = [name for name in names if stem and (stem in name or name in stem)]
    close = close or difflib.get_close_matches(stem, names, n=3, cutoff=0.6)
    return f"; did you mean --config {' or '.join(dict.fromkeys(close))}?" if close else ""


def _config_path(arguments: argparse.Namespace, /) -> Path | None:
    if arguments.config is None:
        return None
    path = Path(arguments.config)
    if not path.exists():
        # A shipped example by its name, from anywhere the package is installed.
        path = example_config(arguments.config) or path
    if path.is_dir() and (path / _SNAPSHOT_CONFIG).is_file():
        # A Hugging Face snapshot folder, as huggingface-cli download leaves it.
        path = path / _SNAPSHOT_CONFIG
    return path


def _config(arguments: argparse.Namespace, /) -> dict[str, object] | None:
    path = _config_path(arguments)
    if path is None:
        return None
    try:
        config = read_json_file(path)
    except JsonFileError as error:
        hint = "" if path.exists() else _suggestion(arguments.config)
        if path.is_dir():
            hint = f"; a model's folder would hold a {_SNAPSHOT_CONFIG}, and this one has none"
        raise CliError(f"--config {arguments.config}: {error}{hint}") from None
    if not isinstance(config, dict):
        raise CliError(f"--config {arguments.config}: not a JSON object")
    return config


def _flags(arguments: argparse.Namespace, /) -> dict[str, FlagValue]:
    """Every sizing flag's value, given or defaulted, by its command-line name."""
    found: dict[str, FlagValue] = {}
    for dest, value in sorted(vars(arguments).items()):
        if dest in _OUTPUT_FLAGS or value is None:
            continue
        if dest == "prefix_caching":
            # The one flag stored under another name: --no-enable-prefix-caching.
            found["--no-enable-prefix-caching"] = not value
            continue
        found[_flag(dest)] = list(value) if isinstance(value, tuple) else value
    return found


def _dimensions(
    arguments: argparse.Namespace, config: dict[str, object] | None, /
) -> dims.GdnDimensions | None:
    given = {flag: getattr(arguments, flag) for flag in DIMENSION_FLAGS}
    if config is not None:
        if any(value is not None for value in given.values()):
            raise CliError("give either --config or the explicit dimensions, not both")
        return None
    missing = [_flag(flag) for flag, value in given.items() if value is None]
    if missing:
        raise CliError(f"give --config, or every dimension (missing {', '.join(missing)})")
    return dims.GdnDimensions(**{DIMENSION_FLAGS[f]: v for f, v in given.items()})


def _setup(arguments: argparse.Namespace, /) -> Setup:
    length = arguments.linear_replayssm_cache_len
    return Setup(
        vllm=vllm.VllmSetup(
            prefix_caching=arguments.prefix_caching,
            gpu=vllm.Gpu(arguments.gpu),
            method=vllm.SpeculativeMethod(arguments.speculative_method),
            kv_cache_dtype=None if arguments.kv_cache_dtype == "auto" else arguments.kv_cache_dtype,
        ),
        sglang=sglang.SglangSetup(radix_cache=not arguments.disable_radix_cache),
        replayssm_cache_len=length or replayssm.DEFAULT_CACHE_LEN,
        recurrent=None if arguments.state_dtype is None else Dtype(arguments.state_dtype),
        conv=None if arguments.conv_dtype is None else Dtype(arguments.conv_dtype),
    )


def _request(arguments: argparse.Namespace, /) -> SizeRequest:
    """The request the flags make, refusing memory flags that make no fit."""
    counts: tuple[int, ...] = arguments.num_drafts
    # One request unless told: a capacity question is about the engine's
    # memory, and the ring's figures are per slot anyway.
    slots = arguments.mtp_slots or arguments.batch or 1
    if arguments.context is not None and arguments.batch is None:
        raise CliError("--context needs --batch: the requests to size the memory for")
    given = {flag.dest: getattr(arguments, flag.dest) for flag in memory_flags()}
    named = [dest for dest, value in given.items() if value is not None]
    if len(counts) > 1 and named:
        raise CliError(
            f"{_flag(named[0])} sizes one review; leave it out of a"
            f" {spelling(arguments, 'num_drafts')} sweep"
        )
    try:
        fit = fit_for(given, view=view_name(arguments.engine))
    except FitFlagsError as error:
        raise CliError(str(error)) from None
    config = _config(arguments)
    path = _config_path(arguments)
    return SizeRequest(
        num_drafts=counts,
        mtp_slots=slots,
        config=config,
        dimensions=_dimensions(arguments, config),
        mtp_state_slots=arguments.mtp_state_slots,
        num_intermediates=arguments.num_intermediates,
        engine=arguments.engine,
        setup=_setup(arguments),
        fit=fit,
        memory=given,
        tp=arguments.tp,
        batch=arguments.batch,
        plot=arguments.plot is not None,
        context=arguments.context,
        config_name=arguments.config,
        config_path=None if path is None else str(path.resolve()),
        flags=_flags(arguments),
    )


def _overflow(error: ReviewOverflowError, arguments: argparse.Namespace, /) -> CliError:
    shown = []
    for sources in _FLAGS_OF_FIGURE[error.figure]:
        typed = [dest for dest in sources if getattr(arguments, dest, None) is not None]
        if not typed:
            continue
        dest = typed[0]
        value = getattr(arguments, dest)
        if dest == "num_drafts":
            # The one draft count of a sweep that overflowed, as typed if it was one value.
            value = error.num_drafts
        shown.append(f"{spelling(arguments, dest)} {value}")
    source = f"--config {arguments.config}" if arguments.config is not None else ""
    given = ", ".join([*shown, source] if source else shown)
    return CliError(
        f"the {_FIGURE_NAMES[error.figure]} exceeds the runtime's 64-bit usize with {given}"
    )


def _error(error: Exception, arguments: argparse.Namespace, /) -> CliError:
    """The one line that names what the user typed for an error of the review."""
    if isinstance(error, ReviewOverflowError):
        return _overflow(error, arguments)
    if isinstance(error, UnsupportedDtypeError):
        # Name what the user typed, or else the config that named the dtype.
        for dest in ("state_dtype", "conv_dtype"):
            if getattr(arguments, dest) == error.dtype.value:
                return CliError(f"{spelling(arguments, dest)} {error.dtype.value}: {error}")
    if isinstance(error, dims.TensorParallelError):
        source = f" of --config {arguments.config}" if arguments.config is not None else ""
        return CliError(
            f"{spelling(arguments, 'tp')} {error.tp} does not divide the {error.count}"
            f" {error.heads}{source}"
        )
    if isinstance(error, OneReviewError):
        return CliError(
            f"{_flag(error.name)} sizes one review; leave it out of a"
            f" {spelling(arguments, 'num_drafts')} sweep"
        )
    if isinstance(error, FitFlagsError):
        return CliError(str(error))
    return CliError(f"--config {arguments.config}: {error}")


def _size(arguments: argparse.Namespace, /) -> int:
    if arguments.plot is not None and Path(arguments.plot).suffix.lower() not in _PLOT_SUFFIXES:
        raise CliError(f"--plot {arguments.plot}: give a .png or .svg path")
    prepare_outputs(("--plot", arguments.plot), ("--json", arguments.json))
    request = _request(arguments)
    output = OutputFormat.JSON if arguments.json else OutputFormat(arguments.format)
    try:
        report = size_review(request)
        figures = report.as_dict() if output is OutputFormat.JSON else None
    except (
        ReviewOverflowError,
        UnsupportedDtypeError,
        dims.ConfigError,
        dims.TensorParallelError,
        OneReviewError,
        FitFlagsError,
    ) as error:
        raise _error(error, arguments) from None
    # Drawn first, so that a plot that cannot be written leaves no report behind.
    if arguments.plot is not None and report.rows is not None:
        # Imported here so that nothing but --plot ever loads matplotlib.
        from ..sizing.plot import PlotError, plot_sweep  # noqa: PLC0415

        try:
            plot_sweep(report.rows, arguments.plot, title=plot_title(report))
        except PlotError as error:
            raise CliError(str(error)) from None
    if figures is not None:
        write_json(arguments.json or "-", figures)
    else:
        print(report_text(report, markdown=output is OutputFormat.MARKDOWN, why=arguments.why))
    return ExitStatus.OK


def add_arguments(size: argparse.ArgumentParser, /) -> None:
    """Give ``size`` its options, and its one-line errors."""
    # A bad flag is one line, as a bad config is (SizeParser adds no state).
    size.__class__ = SizeParser
    add_size_arguments(size)
    size.set_defaults(run=_size)
