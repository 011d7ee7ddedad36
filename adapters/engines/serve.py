# SPDX-License-Identifier: MIT OR Apache-2.0
"""What every engine adapter shares: the protocol loop, describe, and the replay request.

An engine adapter answers ``describe`` with its name and what its ``replay``
computes (docs/protocol-replay.md, "What an adapter's replay computes"), answers
``replay`` with its engine's kernels, and leaves every other operation to the
package's Python reference adapter (``ssm_rollback_spec.harness.adapter``):
an engine has no mode cell of its own to test, so the contract's operations
are the reference's answers. Torch and the kernels load on the first
``replay``, so the contract's operations answer at once.

An engine is one :class:`EngineAdapter` (its module's ``ADAPTER``), listed in
``registry.py``. Command line, the same for each adapter, from the repository
root::

    python -m adapters.engines.vllm [--device cpu|cuda] [--control off-by-one]
        [--version RELEASE]

``--device cuda`` runs the kernels compiled on a CUDA device instead of under
Triton's interpreter. ``--control off-by-one`` is the wrong build: it hands
the engine an accepted count one off from the request's (one more where the
window has room, else one fewer), so every replay case of a partial accept
must fail. ``--version`` drives another release of the engine than its pinned
one (``wheels.py``: fetched and cached by version); ``describe`` names the
release driven.

An adapter whose engine has a batch form (vLLM's, SGLang's) also answers
``replay_batch`` with the engine's own bookkeeping, chosen by the batch
options its registry row declares (:class:`BatchOption`): both have
``--cache-mode`` (vLLM: ``align``, the default, or ``none``; SGLang:
``snapshot``, the default, or ``replayssm``), and vLLM also ``--runner``, the
model runner whose accepted counts it takes (``v1``, the default, or ``v2``:
vllm/batch.py). The others answer ``unknown-op``, as the reference adapter
does, and the batch cases are reported as not offered.
"""

from __future__ import annotations

import argparse
import enum
import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from ssm_rollback_spec.harness import adapter, protocol
from ssm_rollback_spec.harness.protocol import ErrorKind, Op
from ssm_rollback_spec.harness.python_impl import REFERENCE, load_python_implementation
from ssm_rollback_spec.harness.replay_wire import (
    BatchForm,
    ReplayLayout,
    decode_replay,
    decode_replay_batch,
    encode_replay_states,
)

from . import kernels, wheels

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from ssm_rollback_spec.harness.replay_wire import (
        ReplayBatchRequest,
        ReplayDims,
        ReplayRequest,
        ReplayState,
    )


__all__ = [
    "Arrays",
    "BatchOption",
    "Build",
    "EngineAdapter",
    "EngineLimitError",
    "arrays",
    "control_accepted",
    "layer_dims",
    "main",
]


class EngineLimitError(ValueError):
    """A request the engine's kernels cannot take (answered ``bad-request``, naming the limit)."""


class Build(enum.Enum):
    """Which build of an adapter runs: the real one, or the control that must fail."""

    REAL = "real"
    #: The accepted count handed to the engine is one off (:func:`control_accepted`).
    OFF_BY_ONE = "off-by-one"

    def accepted(self, accepted: int, window: int, /) -> int:
        """The accepted count this build hands to the engine."""
        if self is Build.REAL:
            return accepted
        return control_accepted(accepted, window)


if TYPE_CHECKING:
    #: An engine's batch form: (request, device, build, batch options by flag) -> each
    #: entry's state.
    BatchReplay: TypeAlias = Callable[
        [ReplayBatchRequest, kernels.Device, Build, Mapping[str, str]], list[ReplayState]
    ]


@dataclass(frozen=True)
class BatchOption:
    """One flag an engine's batch form takes (``--cache-mode``, ``--runner``), and its values."""

    #: The flag without its dashes: the command line's ``--NAME`` and the options' key.
    name: str
    #: The values it takes, the default first.
    choices: tuple[str, ...]
    #: What it chooses, for ``--help``.
    chooses: str


@dataclass(frozen=True)
class Serving:
    """How this process serves: the device, the build, and the batch options given."""

    device: kernels.Device
    build: Build
    #: Each of the engine's batch options, by name: the value given or its default.
    batch_options: Mapping[str, str]


@dataclass(frozen=True)
class EngineAdapter:
    """One engine's adapter, its row in the registry: its wheel, pipeline, design, and replay."""

    #: The engine's release and the files its kernels import (its module's ``WHEEL``).
    wheel: wheels.EngineWheel
    #: The replay pipeline its kernels compute.
    pipeline: str
    #: The design its replay follows (docs/engines.md).
    design: str
    #: (request as arrays, device, build) -> the state after each round.
    replay: Callable[[Arrays, kernels.Device, Build], list[ReplayState]]
    #: Which of the engine's kernels, where it has a choice (FLA's rule).
    variant: str = ""
    #: (request, device, build, batch options) -> each entry's state after its step,
    #: where the engine has a batch form; None answers replay_batch ``unknown-op``.
    replay_batch: BatchReplay | None = None
    #: The flags its batch form takes, each its own command-line option.
    batch_options: tuple[BatchOption, ...] = ()
    #: The forms of batch request beyond the first its batch form takes (docs/protocol.md).
    batch_forms: tuple[BatchForm, ...] = ()
    #: The forms it takes besides, with the batch options given, by name.
    forms_with: Callable[[Mapping[str, str]], tuple[BatchForm, ...]] = lambda _: ()

    @property
    def engine(self) -> str:
        """The engine's name: its module's, and what ``describe`` and errors call it."""
        return self.wheel.name

    def describe(self, build: Build, options: Mapping[str, str], /) -> dict[str, object]:
        """The describe reply's value, with what its replay computes and the release driven.

        ``options`` are the batch options given, which may add forms (:attr:`forms_with`).
        """
        variant = f", {self.variant}" if self.variant else ""
        wrong = "" if build is Build.REAL else ", control build: off by one in the accepted count"
        release = wheels.selected(self.wheel)
        supported = "" if release.version in self.wheel.supported else ", unsupported release"
        forms = (*self.batch_forms, *self.forms_with(options))
        return {
            "name": f"{self.engine} engine kernels (adapters/engines){variant}{wrong}{supported}",
            "usize_bits": 64,
            # The engine's release whose kernels these are (the results page's column).
            "release": release.requirement,
            "replay": {
                "pipelines": [self.pipeline],
                "layouts": [ReplayLayout.PRE_CONV.value],
                "designs": [self.design],
            }
            | ({"batch": [form.value for form in forms]} if forms else {}),
        }


@dataclass(frozen=True)
class Arrays:
    """A replay request as float64 numpy arrays, in the protocol's layouts."""

    dims: tuple[int, int, int, int, int]
    conv_weight: Any
    a_log: Any
    dt_bias: Any
    conv: Any
    h: Any
    #: Per round: qkv (K x conv_dim), a (K x nv), b (K x nv), accepted.
    rounds: list[tuple[Any, Any, Any, int]]


def layer_dims(dims: ReplayDims, /) -> tuple[int, int, int, int, int]:
    """A request's layer shape: key heads and size, value heads and size, conv kernel."""
    return (
        dims["num_key_heads"],
        dims["key_head_dim"],
        dims["num_value_heads"],
        dims["value_head_dim"],
        dims["conv_kernel"],
    )


def arrays(request: ReplayRequest, /) -> Arrays:
    """The request's numbers as numpy arrays (the kernels' inputs, before the dtype they take)."""
    import numpy as np  # noqa: PLC0415 - the kernels venv's

    dims = request["dims"]
    shape = layer_dims(dims)
    rounds = [
        (
            np.array([row["values"] for row in item["rows"]]),
            np.array([row.get("a", []) for row in item["rows"]]),
            np.array([row.get("b", []) for row in item["rows"]]),
            item["accepted"],
        )
        for item in request["rounds"]
    ]
    return Arrays(
        dims=shape,
        conv_weight=np.array(request["conv_weight"]),
        a_log=np.array(request.get("a_log", [])),
        dt_bias=np.array(request.get("dt_bias", [])),
        conv=np.array(request["checkpoint"]["conv"]),
        h=np.array(request["checkpoint"]["h"]),
        rounds=rounds,
    )


def control_accepted(accepted: int, window: int, /) -> int:
    """The off-by-one control's accepted count: one more where the window has room, else one less.

    A window of one token has no other count, so it keeps its one.
    """
    if accepted < window:
        return accepted + 1
    return accepted - 1 if accepted > 1 else accepted


def _replay(
    engine: EngineAdapter, request: dict[str, object], device: kernels.Device, build: Build, /
) -> object:
    decoded = decode_replay(request)
    if decoded["pipeline"] == engine.pipeline and decoded["layout"] is not ReplayLayout.PRE_CONV:
        raise protocol.ProtocolError(
            ErrorKind.BAD_REQUEST, f"{engine.engine}'s adapter replays pre-conv rows only"
        )
    _pipeline_offered(engine, decoded["pipeline"], "a_log" in decoded)
    kernels.prepare(device)
    try:
        return encode_replay_states(engine.replay(arrays(decoded), device, build))
    except EngineLimitError as error:
        raise protocol.ProtocolError(ErrorKind.BAD_REQUEST, str(error)) from None


def _pipeline_offered(engine: EngineAdapter, pipeline: str, gates: bool, /) -> None:  # noqa: FBT001
    if pipeline != engine.pipeline:
        raise protocol.ProtocolError(
            ErrorKind.BAD_REQUEST,
            f"{engine.engine}'s kernels compute pipeline {engine.pipeline}, "
            f"not {pipeline} (see its describe)",
        )
    if not gates:
        raise protocol.ProtocolError(
            ErrorKind.BAD_REQUEST,
            f"pipeline {engine.pipeline} needs the raw gate inputs: a_log, dt_bias, and a and b "
            "on every row",
        )


def _replay_batch(
    engine: EngineAdapter,
    request: Mapping[str, object],
    serving: Serving,
    /,
) -> object:
    assert engine.replay_batch is not None
    decoded = decode_replay_batch(request)
    _pipeline_offered(engine, decoded["pipeline"], "a_log" in decoded)
    rows = [row for step in decoded["steps"] for entry in step for row in entry["rows"]]
    if any("a" not in row or "b" not in row for row in rows):
        raise protocol.ProtocolError(
            ErrorKind.BAD_REQUEST, f"pipeline {engine.pipeline} needs a and b on every row"
        )
    kernels.prepare(serving.device)
    try:
        states = engine.replay_batch(decoded, serving.device, serving.build, serving.batch_options)
        return encode_replay_states(states)
    except EngineLimitError as error:
        raise protocol.ProtocolError(ErrorKind.BAD_REQUEST, str(error)) from None


def _respond(
    engine: EngineAdapter, api: object, line: str, serving: Serving, /
) -> dict[str, object]:
    try:
        request = protocol.decode_request(line)
        op = protocol.op_named(str(request["op"]))
        if op is Op.DESCRIBE:
            return protocol.ok_reply(engine.describe(serving.build, serving.batch_options))
        if op is Op.REPLAY:
            # decode_request keeps only the contract's fields; the replay fields are the line's.
            whole = json.loads(line)
            return protocol.ok_reply(_replay(engine, whole, serving.device, serving.build))
        if op is Op.REPLAY_BATCH and engine.replay_batch is not None:
            return protocol.ok_reply(_replay_batch(engine, json.loads(line), serving))
    except protocol.ProtocolError as error:
        return protocol.error_reply(error.kind, str(error))
    return adapter.respond(api, line)  # type: ignore[arg-type]


def _parser(engine: EngineAdapter, /) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"python -m adapters.engines.{engine.engine}",
        description=f"Serve {engine.engine}'s released kernels over the adapter protocol's "
        "replay operation (docs/engines.md).",
    )
    parser.add_argument(
        "--device",
        choices=[device.value for device in kernels.Device],
        default=kernels.Device.CPU.value,
        help="cpu: Triton's interpreter, patched (default); cuda: compiled, on the GPU",
    )
    parser.add_argument(
        "--control",
        choices=[Build.OFF_BY_ONE.value],
        help="the wrong build: the accepted count handed to the engine is one off",
    )
    for option in engine.batch_options:
        parser.add_argument(
            f"--{option.name}",
            choices=option.choices,
            default=option.choices[0],
            help=f"{option.chooses} for replay_batch (default: {option.choices[0]})",
        )
    pinned = engine.wheel.version
    parser.add_argument(
        "--version",
        default=pinned,
        help=f"the {engine.engine} release to drive, fetched and cached by version "
        f"(default: the pinned {pinned}; supported: "
        f"{', '.join(engine.wheel.supported)})",
    )
    return parser


def main(engine: EngineAdapter, argv: Sequence[str] | None = None, /) -> int:
    """Serve ``engine`` on standard input and output; return the exit status."""
    arguments = _parser(engine).parse_args(argv)
    try:
        wheels.select(wheels.release(engine.wheel, arguments.version))
    except wheels.EngineFetchError as error:
        sys.stderr.write(f"adapters.engines.{engine.engine}: {error}\n")
        return 2
    build = Build(arguments.control or Build.REAL.value)
    device = kernels.Device(arguments.device)
    given = vars(arguments)
    serving = Serving(
        device,
        build,
        {option.name: given[option.name.replace("-", "_")] for option in engine.batch_options},
    )
    api = load_python_implementation(REFERENCE).api
    try:
        adapter.serve_lines(
            lambda text: _respond(engine, api, text, serving), sys.stdin.buffer, sys.stdout.buffer
        )
    except (BrokenPipeError, KeyboardInterrupt):
        return 1
    return 0
