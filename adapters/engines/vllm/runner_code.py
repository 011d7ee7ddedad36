# SPDX-License-Identifier: MIT OR Apache-2.0
"""vLLM's V1 runner's own classification of a step's rows, compiled from the release's file.

Two things vLLM's model runner (``v1/worker/gpu_model_runner.py``) hands its
GDN metadata builder decide which rows verify: whether the builder gets the
speculative arguments at all (``num_accepted_tokens`` and
``num_decode_draft_tokens_cpu``), and each row's draft count in the
``num_decode_draft_tokens`` buffer. Both are the runner's own code here, read
from the release's file and compiled with its name and line numbers (nothing
of vLLM's is copied into this repository):

- from ``_prepare_inputs``, its ``use_spec_decode = ...`` and the
  ``if not use_spec_decode: ... else: ...`` after it, which fills the buffer
  (vLLM 0.31.0 lines 2224-2259, the scheduled drafts deciding; 0.33.0 lines
  2188-2235, every step of a speculative runner, with its
  ``zero_draft_decode_mask``);
- from ``execute_model``, the ``use_spec_decode = ...`` it hands
  ``_build_attention_metadata`` (0.31.0 line 4346, 0.33.0 line 4093), and the
  test in ``_build_attn_group_metadata`` under which the builder is handed the
  speculative arguments (0.31.0 lines 2496-2504, 0.33.0 lines 2427-2435).

They run over stand-ins for the runner (``self``) and the scheduler's output
that hold only what that code reads (:meth:`RunnerCode.classify` says which);
where a release's code reads anything else, :class:`RunnerCodeError` is one
line naming the release and what it read. The scheduler's
``scheduled_spec_decode_tokens`` holds a request only where it scheduled
drafts (``v1/core/sched/scheduler.py``, 0.31.0 lines 830-841, 0.33.0 lines
1010-1021).
"""

from __future__ import annotations

import ast
import builtins
import functools
import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ..serve import EngineLimitError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

__all__ = ["RUNNER_FILE", "Classified", "Row", "RunnerCode", "RunnerCodeError", "runner_code"]

#: The runner's file in the release's package.
RUNNER_FILE: Final = "vllm/v1/worker/gpu_model_runner.py"
#: The flag the runner's code sets and tests.
_FLAG: Final = "use_spec_decode"
#: The parameters of the compiled ``_prepare_inputs`` part: the locals it reads.
_PREPARE_ARGS: Final = (
    "self",
    "scheduler_output",
    "num_scheduled_tokens",
    "num_reqs",
    "cu_num_tokens",
    "query_start_loc",
)
#: The parameters of the compiled builder test: the locals it reads.
_HANDED_ARGS: Final = ("self", "scheduler_output", "builder")
#: The builder class the batch runs, by the name the runner's test reads it.
_GDN_BUILDER: Final = "GDNAttentionMetadataBuilder"


class RunnerCodeError(EngineLimitError):
    """The release's runner code is not what this module stands in for (one line)."""


@dataclass(frozen=True)
class Row:
    """One row of a step, as the runner's input batch and scheduler's output hold it."""

    #: Tokens the scheduler scheduled for the row (``num_scheduled_tokens``).
    scheduled: int
    #: Of them, draft tokens (the row's ``scheduled_spec_decode_tokens``; 0 for none).
    drafts: int
    #: Tokens computed before the step (``num_computed_tokens_cpu``).
    computed: int
    #: The request's prompt length (``num_prompt_tokens``).
    prompt: int


@dataclass(frozen=True)
class Classified:
    """What the runner's code hands the GDN builder for a step."""

    #: Whether the builder is handed ``num_accepted_tokens`` and ``num_decode_draft_tokens_cpu``.
    speculative: bool
    #: Each row's ``num_decode_draft_tokens``; None where the runner's code set none.
    drafts: tuple[int, ...] | None


class _Only:
    """A stand-in holding the fields given; any other read is a :class:`RunnerCodeError`."""

    def __init__(self, name: str, release: str, /, **fields: object) -> None:
        self.__dict__.update(fields)
        self._name, self._release = name, release

    def __getattr__(self, field: str) -> Any:
        if field.startswith("__"):
            raise AttributeError(field)
        raise RunnerCodeError(
            f"vLLM {self._release}'s {RUNNER_FILE} reads {self._name}.{field},"
            " which adapters/engines/vllm/runner_code.py does not stand in for"
        )


class RunnerCode:
    """The release's runner code of a step (module docstring), compiled once."""

    def __init__(self, path: Path, release: str, gdn_builder: type, /) -> None:
        import numpy as np  # noqa: PLC0415

        self.release, self.np = release, np
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        runner = _runner_class(tree, release)
        prepare = _prepare_statements(runner, release)
        flag, test = _handed_test(runner, release)
        names: dict[str, object] = {"np": np, _GDN_BUILDER: gdn_builder}
        # The other builders the test names: none is the one the batch runs.
        names |= {
            node.id: type(node.id, (), {})
            for node in ast.walk(test)
            if isinstance(node, ast.Name)
            and node.id.endswith("MetadataBuilder")
            and node.id != _GDN_BUILDER
        }
        source = _Source(path, release)
        returned = ast.Return(ast.Name(_FLAG, ast.Load()))
        self._prepare: Callable[..., bool] = _compiled(
            source, "_prepare_inputs", _PREPARE_ARGS, [*prepare, returned], names
        )
        self._handed: Callable[..., bool] = _compiled(
            source,
            "_build_attn_group_metadata",
            _HANDED_ARGS,
            [flag, ast.Return(test)],
            names,
        )

    def classify(self, rows: Sequence[Row], builder: object, /) -> Classified:
        """What the runner's code hands ``builder`` for a step of ``rows``, in the batch's order.

        The stand-ins: ``self.speculative_config`` (set: the runner speculates),
        ``self.input_batch`` (``req_id_to_index``, ``num_computed_tokens_cpu``,
        ``num_prompt_tokens``), the ``self.num_decode_draft_tokens`` buffer
        (``np``, ``copy_to_gpu``), ``self._calc_spec_decode_metadata`` (an
        object with ``logits_indices``), and the scheduler's
        ``scheduled_spec_decode_tokens``; the locals ``num_scheduled_tokens``,
        ``num_reqs``, ``cu_num_tokens`` and ``query_start_loc`` as NumPy arrays
        and an int.
        """
        np, release = self.np, self.release
        count = len(rows)
        ids = [f"row-{index}" for index in range(count)]
        scheduled = np.array([row.scheduled for row in rows], dtype=np.int32)
        cumulative = np.cumsum(scheduled, dtype=np.int32)
        copied: list[bool] = []
        buffer = _Only(
            "self.num_decode_draft_tokens",
            release,
            np=np.zeros(count + 1, dtype=np.int32),
            copy_to_gpu=lambda: copied.append(True),
        )
        runner = _Only(
            "self",
            release,
            speculative_config=_Only("self.speculative_config", release),
            input_batch=_Only(
                "self.input_batch",
                release,
                req_id_to_index={name: index for index, name in enumerate(ids)},
                num_computed_tokens_cpu=np.array([row.computed for row in rows], dtype=np.int32),
                num_prompt_tokens=np.array([row.prompt for row in rows], dtype=np.int32),
            ),
            num_decode_draft_tokens=buffer,
            _calc_spec_decode_metadata=lambda num_draft_tokens, cu_num_tokens: _Only(  # noqa: ARG005
                "spec_decode_metadata", release, logits_indices=None
            ),
        )
        output = _Only(
            "scheduler_output",
            release,
            scheduled_spec_decode_tokens={
                name: [0] * row.drafts for name, row in zip(ids, rows, strict=True) if row.drafts
            },
        )
        starts = np.concatenate([np.zeros(1, dtype=np.int32), cumulative])
        self._prepare(runner, output, scheduled, count, cumulative, starts)
        speculative = bool(self._handed(runner, output, builder))
        drafts = tuple(int(value) for value in buffer.np[:count]) if copied else None
        if speculative and drafts is None:
            raise RunnerCodeError(
                f"vLLM {release}'s {RUNNER_FILE} hands the builder num_decode_draft_tokens"
                " that its _prepare_inputs did not set"
            )
        return Classified(speculative, drafts)


@functools.cache
def runner_code(path: Path, release: str, gdn_builder: type, /) -> RunnerCode:
    """The runner code of release ``release``'s file ``path``, compiled once.

    ``gdn_builder`` is the class the runner's test names ``GDNAttentionMetadataBuilder``.
    """
    return RunnerCode(path, release, gdn_builder)


def _missing(release: str, what: str, /) -> RunnerCodeError:
    return RunnerCodeError(f"vLLM {release}'s {RUNNER_FILE} has no {what}")


def _runner_class(tree: ast.Module, release: str, /) -> ast.ClassDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "GPUModelRunner":
            return node
    raise _missing(release, "class GPUModelRunner")


def _is_flag(node: ast.stmt, /) -> bool:
    """Whether ``node`` is ``use_spec_decode = ...``."""
    return (
        isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id == _FLAG
    )


def _prepare_statements(runner: ast.ClassDef, release: str, /) -> list[ast.stmt]:
    """``use_spec_decode = ...`` and the ``if not use_spec_decode:`` after it, in one method."""
    found: list[list[ast.stmt]] = []
    for method in runner.body:
        if not isinstance(method, ast.FunctionDef):
            continue
        body = method.body
        for first, second in itertools.pairwise(body):
            test = second.test if isinstance(second, ast.If) else None
            if (
                _is_flag(first)
                and isinstance(test, ast.UnaryOp)
                and isinstance(test.op, ast.Not)
                and isinstance(test.operand, ast.Name)
                and test.operand.id == _FLAG
            ):
                found.append([first, second])
    if len(found) != 1:
        raise _missing(release, "one method with use_spec_decode = ... then if not use_spec_decode")
    return found[0]


def _handed_test(runner: ast.ClassDef, release: str, /) -> tuple[ast.stmt, ast.expr]:
    """The flag handed to ``_build_attention_metadata``, and its test for the builder's arguments.

    The flag: the last ``use_spec_decode = ...`` before the one call that
    hands its ``use_spec_decode`` on. The test: that of the ``if`` in
    ``_build_attention_metadata`` whose body is handed ``num_decode_draft_tokens_cpu``.
    """
    flags: list[ast.stmt] = []
    tests: list[ast.expr] = []
    for method in runner.body:
        if not isinstance(method, ast.FunctionDef):
            continue
        for call in ast.walk(method):
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "_build_attention_metadata"
                and any(
                    keyword.arg == _FLAG
                    and isinstance(keyword.value, ast.Name)
                    and keyword.value.id == _FLAG
                    for keyword in call.keywords
                )
            ):
                before = [
                    node
                    for node in ast.walk(method)
                    if isinstance(node, ast.stmt) and _is_flag(node) and node.lineno < call.lineno
                ]
                flags.extend(sorted(before, key=lambda node: node.lineno)[-1:])
        if method.name == "_build_attention_metadata":
            tests.extend(
                node.test
                for node in ast.walk(method)
                if isinstance(node, ast.If)
                and any(
                    isinstance(keyword, ast.keyword)
                    and keyword.arg == "num_decode_draft_tokens_cpu"
                    for statement in node.body
                    for keyword in ast.walk(statement)
                )
            )
    if len(flags) != 1:
        raise _missing(release, "one use_spec_decode = ... handed to _build_attention_metadata")
    if len(tests) != 1:
        raise _missing(release, "one test handing the builder num_decode_draft_tokens_cpu")
    return flags[0], tests[0]


@dataclass(frozen=True)
class _Source:
    """The runner's file, and the release it is of."""

    path: Path
    release: str


def _compiled(
    source: _Source,
    name: str,
    arguments: tuple[str, ...],
    body: list[ast.stmt],
    names: dict[str, object],
    /,
) -> Callable[..., bool]:
    """``body`` as a function of ``arguments``, with its file and lines, reading ``names``.

    Raises:
        RunnerCodeError: ``body`` reads a name that is neither an argument,
            one of its own, one of ``names`` nor a builtin.
    """
    path, release = source.path, source.release
    stored = {
        node.id
        for statement in body
        for node in ast.walk(statement)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
    }
    for statement in body:
        for node in ast.walk(statement):
            if (
                isinstance(node, ast.Name)
                and isinstance(node.ctx, ast.Load)
                and node.id not in {*arguments, *stored, *names}
                and not hasattr(builtins, node.id)
            ):
                raise RunnerCodeError(
                    f"vLLM {release}'s {RUNNER_FILE} line {node.lineno} reads {node.id},"
                    " which adapters/engines/vllm/runner_code.py does not stand in for"
                )
    function = ast.parse(f"def {name}({', '.join(arguments)}): pass").body[0]
    assert isinstance(function, ast.FunctionDef)
    function.body = body
    ast.copy_location(function, body[0])
    module = ast.fix_missing_locations(ast.Module(body=[function], type_ignores=[]))
    scope: dict[str, Any] = dict(names)
    exec(compile(module, str(path), "exec", dont_inherit=True), scope)  # noqa: S102 - the release's own code, parsed above
    compiled: Callable[..., bool] = scope[name]
    return compiled
