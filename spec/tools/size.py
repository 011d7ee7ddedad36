# SPDX-License-Identifier: MIT OR Apache-2.0
"""``ssm-rollback-spec size``: size the replay ring for a design review.

This module parses the flags and reads the config, makes the request with
:mod:`ssm_rollback_spec.sizing.request`, asks
:func:`ssm_rollback_spec.sizing.review.size_review` once, and prints what it
reports; the engines' units say everything engine-specific.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ..harness.files import JsonFileError, read_json_file
from ..sizing.options import MAX_SWEEP_VALUES, OutputFormat
from ..sizing.presentation import plot_title, report_text
from ..sizing.request import REVIEW_ERRORS, FlagsError, error_line, memory_fit, size_request
from ..sizing.review import SizeRequest, size_review
from .arguments import prepare_outputs
from .errors import CliError, ExitStatus
from .outcomes import write_json
from .shipped import EXAMPLE_SUFFIX, example_config, examples_directory
from .size_flags import SizeParser, add_size_arguments

if TYPE_CHECKING:
    import argparse

__all__ = ["MAX_SWEEP_VALUES", "OutputFormat", "add_arguments"]

_PLOT_SUFFIXES: Final = (".png", ".svg")
#: The file a Hugging Face snapshot folder keeps its config in.
_SNAPSHOT_CONFIG: Final = "config.json"


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


def _request(arguments: argparse.Namespace, /) -> SizeRequest:
    """The request the flags make, refusing flags that make none, the config read between."""
    try:
        fit = memory_fit(vars(arguments))
        config = _config(arguments)
        path = _config_path(arguments)
        return size_request(vars(arguments), fit, config=config, config_path=path)
    except FlagsError as error:
        raise CliError(str(error)) from None


def _size(arguments: argparse.Namespace, /) -> int:
    if arguments.plot is not None and Path(arguments.plot).suffix.lower() not in _PLOT_SUFFIXES:
        raise CliError(f"--plot {arguments.plot}: give a .png or .svg path")
    prepare_outputs(("--plot", arguments.plot), ("--json", arguments.json))
    request = _request(arguments)
    output = OutputFormat.JSON if arguments.json else OutputFormat(arguments.format)
    try:
        report = size_review(request)
        figures = report.as_dict() if output is OutputFormat.JSON else None
    except REVIEW_ERRORS as error:
        raise CliError(error_line(error, vars(arguments))) from None
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
