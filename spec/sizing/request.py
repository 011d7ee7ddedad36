# SPDX-License-Identifier: MIT OR Apache-2.0
"""From the values of ``size``'s flags to a review's request, and back to the flags in its errors.

The command line parses the flags and reads the config; the values it
parsed (by argparse dest, as :func:`vars` gives them) are all these
functions take. :func:`memory_fit` checks that the flags make one request
and finds the memory fit they ask for, :func:`size_request` makes the
:class:`.review.SizeRequest`, and :func:`error_line` words an error of the
review by the flags as the user typed them (:func:`spelling`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from . import dimensions as dims
from .dtypes import Dtype, UnsupportedDtypeError
from .engines.replayssm import facts as replayssm
from .engines.sglang import facts as sglang
from .engines.vllm import facts as vllm
from .memory import FitFlagsError, fit_for, flags
from .options import DIMENSION_FLAGS, SPELLING
from .review import (
    STATE_FIGURE,
    FlagValue,
    OneReviewError,
    ReviewOverflowError,
    SizeRequest,
    view_name,
)
from .state import Setup

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from .unit import MemoryFit

__all__ = [
    "REVIEW_ERRORS",
    "FlagsError",
    "error_line",
    "memory_fit",
    "size_request",
    "spelling",
]

#: The review's errors that :func:`error_line` words by the flags typed.
REVIEW_ERRORS: Final = (
    ReviewOverflowError,
    UnsupportedDtypeError,
    dims.ConfigError,
    dims.TensorParallelError,
    OneReviewError,
    FitFlagsError,
)

# Which flags feed each figure, so an overflow names what the user typed:
# each entry is one input, by the flags that may give it, the first typed
# one named (a default the review took is named by the flag it came from).
_FLAGS_OF_FIGURE: Final = {
    "row": (("key_heads",), ("key_head_dim",), ("value_heads",), ("value_head_dim",)),
    "preflight": (("gdn_layers",), ("num_drafts",), ("mtp_state_slots", "mtp_slots", "batch")),
    "pool": (("gdn_layers",), ("num_intermediates", "num_drafts"), ("mtp_slots", "batch")),
    "batch": (("gdn_layers",), ("num_intermediates", "num_drafts"), ("batch",)),
    "ring": (("gdn_layers",), ("num_drafts",), ("mtp_slots",), ("batch",)),
    "state": (
        ("gdn_layers",),
        ("num_drafts",),
        ("batch", "mtp_slots"),
        ("linear_replayssm_cache_len",),
    ),
}
_FIGURE_NAMES: Final = {
    "row": "replay row",
    "preflight": "preflight reservation",
    "pool": "pool allocation",
    "batch": "batch's replay ring",
    "ring": "replay ring",
}

#: Flags that say how to print, not what to size, left out of the JSON's record.
_OUTPUT_FLAGS: Final = ("format", "json", "plot", "why", "run", "command", SPELLING)


class FlagsError(ValueError):
    """Flags that make no request; the message is the one line that says why."""


def _flag(dest: str, /) -> str:
    return f"--{dest.replace('_', '-')}"


def spelling(values: Mapping[str, object], dest: str, /) -> str:
    """The flag as the user typed it for ``dest`` (ours, or an engine's alias), else ours."""
    typed = values.get(SPELLING)
    found = typed.get(dest) if isinstance(typed, dict) else None
    return found if isinstance(found, str) else _flag(dest)


def _memory(values: Mapping[str, Any], /) -> dict[str, Any]:
    return {flag.dest: values[flag.dest] for flag in flags()}


def memory_fit(values: Mapping[str, Any], /) -> MemoryFit | None:
    """The memory fit the flags ask for (None: none), once they are seen to make one request.

    Raises:
        FlagsError: ``--context`` without ``--batch``, a memory flag in a
            sweep, or memory flags that make no fit (:func:`.memory.fit_for`).
    """
    if values["context"] is not None and values["batch"] is None:
        raise FlagsError("--context needs --batch: the requests to size the memory for")
    named = [dest for dest, value in _memory(values).items() if value is not None]
    if len(values["num_drafts"]) > 1 and named:
        raise FlagsError(
            f"{_flag(named[0])} sizes one review; leave it out of a"
            f" {spelling(values, 'num_drafts')} sweep"
        )
    try:
        return fit_for(_memory(values), view=view_name(values["engine"]))
    except FitFlagsError as error:
        raise FlagsError(str(error)) from None


def _record(values: Mapping[str, Any], /) -> dict[str, FlagValue]:
    """Every sizing flag's value, given or defaulted, by its command-line name."""
    found: dict[str, FlagValue] = {}
    for dest, value in sorted(values.items()):
        if dest in _OUTPUT_FLAGS or value is None:
            continue
        if dest == "prefix_caching":
            # The one flag stored under another name: --no-enable-prefix-caching.
            found["--no-enable-prefix-caching"] = not value
            continue
        found[_flag(dest)] = list(value) if isinstance(value, tuple) else value
    return found


def _dimensions(
    values: Mapping[str, Any], config: Mapping[str, object] | None, /
) -> dims.GdnDimensions | None:
    given = {flag: values[flag] for flag in DIMENSION_FLAGS}
    if config is not None:
        if any(value is not None for value in given.values()):
            raise FlagsError("give either --config or the explicit dimensions, not both")
        return None
    missing = [_flag(flag) for flag, value in given.items() if value is None]
    if missing:
        raise FlagsError(f"give --config, or every dimension (missing {', '.join(missing)})")
    return dims.GdnDimensions(**{DIMENSION_FLAGS[f]: v for f, v in given.items()})


def _setup(values: Mapping[str, Any], /) -> Setup:
    length = values["linear_replayssm_cache_len"]
    return Setup(
        options={
            vllm.NAME: vllm.VllmSetup(
                prefix_caching=values["prefix_caching"],
                gpu=vllm.Gpu(values["gpu"]),
                method=vllm.SpeculativeMethod(values["speculative_method"]),
                kv_cache_dtype=(
                    None if values["kv_cache_dtype"] == "auto" else values["kv_cache_dtype"]
                ),
            ),
            sglang.NAME: sglang.SglangSetup(radix_cache=not values["disable_radix_cache"]),
            replayssm.NAME: replayssm.ReplaySsmSetup(
                cache_len=length or replayssm.DEFAULT_CACHE_LEN
            ),
        },
        recurrent=None if values["state_dtype"] is None else Dtype(values["state_dtype"]),
        conv=None if values["conv_dtype"] is None else Dtype(values["conv_dtype"]),
    )


def size_request(
    values: Mapping[str, Any],
    fit: MemoryFit | None,
    /,
    *,
    config: Mapping[str, object] | None,
    config_path: Path | None,
) -> SizeRequest:
    """The request the flags make, with ``fit`` (:func:`memory_fit`) and the config read.

    Raises:
        FlagsError: both ``--config`` and explicit dimensions, or neither.
    """
    # One request unless told: a capacity question is about the engine's
    # memory, and the ring's figures are per slot anyway.
    slots = values["mtp_slots"] or values["batch"] or 1
    return SizeRequest(
        num_drafts=values["num_drafts"],
        mtp_slots=slots,
        config=config,
        dimensions=_dimensions(values, config),
        mtp_state_slots=values["mtp_state_slots"],
        num_intermediates=values["num_intermediates"],
        engine=values["engine"],
        setup=_setup(values),
        fit=fit,
        memory=_memory(values),
        tp=values["tp"],
        batch=values["batch"],
        plot=values["plot"] is not None,
        context=values["context"],
        config_name=values["config"],
        config_path=None if config_path is None else str(config_path.resolve()),
        flags=_record(values),
    )


def _overflow(error: ReviewOverflowError, values: Mapping[str, Any], /) -> str:
    shown = []
    figure, _, view = error.figure.partition(STATE_FIGURE)
    for sources in _FLAGS_OF_FIGURE[figure or "state"]:
        typed = [dest for dest in sources if values.get(dest) is not None]
        if not typed:
            continue
        dest = typed[0]
        value = values[dest]
        if dest == "num_drafts":
            # The one draft count of a sweep that overflowed, as typed if it was one value.
            value = error.num_drafts
        shown.append(f"{spelling(values, dest)} {value}")
    source = f"--config {values['config']}" if values["config"] is not None else ""
    given = ", ".join([*shown, source] if source else shown)
    if view:
        # An engine's state, not the seed's: past what any 64-bit machine addresses.
        return (
            f"the {view} view's state exceeds 2^64 - 1 bytes, a 64-bit address space, with {given}"
        )
    return f"the {_FIGURE_NAMES[error.figure]} exceeds the runtime's 64-bit usize with {given}"


def error_line(error: Exception, values: Mapping[str, Any], /) -> str:
    """The one line that names what the user typed for an error of the review."""
    if isinstance(error, ReviewOverflowError):
        return _overflow(error, values)
    if isinstance(error, UnsupportedDtypeError):
        # Name what the user typed, or else the config that named the dtype.
        for dest in ("state_dtype", "conv_dtype"):
            if values[dest] == error.dtype.value:
                return f"{spelling(values, dest)} {error.dtype.value}: {error}"
    if isinstance(error, dims.TensorParallelError):
        source = f" of --config {values['config']}" if values["config"] is not None else ""
        return (
            f"{spelling(values, 'tp')} {error.tp} does not divide the {error.count}"
            f" {error.heads}{source}"
        )
    if isinstance(error, OneReviewError):
        return (
            f"{_flag(error.name)} sizes one review; leave it out of a"
            f" {spelling(values, 'num_drafts')} sweep"
        )
    if isinstance(error, FitFlagsError):
        return str(error)
    return f"--config {values['config']}: {error}"
