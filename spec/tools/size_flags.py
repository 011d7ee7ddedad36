# SPDX-License-Identifier: MIT OR Apache-2.0
"""The flags of ``ssm-rollback-spec size`` and their help; ``sizing.options`` reads their values."""

from __future__ import annotations

import argparse
import textwrap
from typing import TYPE_CHECKING, Final, TypeVar

from ..sizing import units
from ..sizing.dtypes import Dtype
from ..sizing.engines.vllm import facts as vllm
from ..sizing.memory import flags as memory_flags
from ..sizing.options import (
    DIMENSION_FLAGS,
    ENGINE_ALIASES,
    READERS,
    SPELLING,
    OutputFormat,
    draft_counts,
    engine_dtype,
    positive,
    whole_number,
)
from ..sizing.registry import ALIASES, DEFAULT, ENGINES
from .errors import OneLineParser
from .shipped import EXAMPLE_SUFFIX, examples_directory

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["SizeParser", "add_size_arguments"]

_T = TypeVar("_T")


def _typed(read: Callable[[str], _T], /) -> Callable[[str], _T]:
    """``read`` (:mod:`.sizing.options`) as an argparse type: its refusal is the flag's error."""

    def typed(text: str, /) -> _T:
        try:
            return read(text)
        except units.SizeTextError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return typed


_positive: Final = _typed(positive)
_whole_number: Final = _typed(whole_number)
_draft_counts: Final = _typed(draft_counts)
_engine_dtype: Final = _typed(engine_dtype)
_tokens: Final = _typed(units.token_count)


#: Three commands that answer what serving teams ask, shown at the end of --help.
_EXAMPLES: Final = """\
examples:
  will vLLM start with 10G of KV cache at 128K tokens?
    %(prog)s --config qwen3.5-27b --num-drafts 3 --engine vllm \\
      --kv-cache-memory-bytes 10G --max-model-len 128K
  what memory do 64 requests of 32K tokens need, per engine and design?
    %(prog)s --config qwen3.5-27b --num-drafts 3 --batch 64 --context 32K
  how does the speculative state grow with the drafts?
    %(prog)s --config qwen3.5-27b --num-drafts 1-8 --mtp-slots 1 --plot sizing.svg
"""


class _Spelt(argparse.Action):
    """Stores the value and how the flag was spelt; two spellings of one flag are refused."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        typed = getattr(namespace, SPELLING, None)
        if not isinstance(typed, dict):
            typed = {}
            setattr(namespace, SPELLING, typed)
        earlier = typed.get(self.dest)
        if option_string is not None:
            if earlier is not None and earlier != option_string:
                parser.error(f"give {earlier} or {option_string}, not both")
            typed[self.dest] = option_string
        setattr(namespace, self.dest, values)


def _add_aliases(
    group: argparse._ArgumentGroup,
    dest: str,
    /,
    *,
    kind: Callable[[str], object],
    metavar: str,
) -> None:
    """The engines' names for ``dest``, kept out of --help (its own line names them).

    Each is an action of its own, so that argparse's errors name the one typed.
    """
    for alias in ENGINE_ALIASES[dest]:
        group.add_argument(
            alias,
            dest=dest,
            type=kind,
            metavar=metavar,
            action=_Spelt,
            default=argparse.SUPPRESS,
            help=argparse.SUPPRESS,
        )


def _also(dest: str, /) -> str:
    return "; also " + ", ".join(ENGINE_ALIASES[dest])


def _model_arguments(size: argparse.ArgumentParser, /) -> None:
    flags = [f"--{flag.replace('_', '-')}" for flag in DIMENSION_FLAGS]
    model = size.add_argument_group(
        "model",
        f"give --config, or else each of {' '.join(flags[:3])}"
        f"\n{' '.join(flags[3:])} N (a bf16 model)",
    )
    shipped = sorted(
        path.name.removesuffix(EXAMPLE_SUFFIX) for path in examples_directory().glob("*.json")
    )
    model.add_argument(
        "--config",
        metavar="PATH",
        help="a config.json, its snapshot folder, or a shipped name: " + ", ".join(shipped),
    )
    for flag in DIMENSION_FLAGS:
        model.add_argument(f"--{flag.replace('_', '-')}", type=_positive, help=argparse.SUPPRESS)
    model.add_argument(
        "--tp",
        type=_positive,
        default=1,
        metavar="N",
        action=_Spelt,
        help="TP GPUs, default 1" + _also("tp"),
    )
    _add_aliases(model, "tp", kind=_positive, metavar="N")


def _engine_arguments(size: argparse.ArgumentParser, /) -> None:
    engine = size.add_argument_group("engine")
    engine.add_argument(
        "--engine",
        choices=[*ENGINES, *ALIASES],
        metavar="NAME",
        help=", ".join(f"{name} (default)" if name == DEFAULT else name for name in ENGINES),
    )
    dtypes = [dtype.value for dtype in Dtype]
    for dest, says in (("state_dtype", "h"), ("conv_dtype", "conv state")):
        engine.add_argument(
            f"--{dest.replace('_', '-')}",
            choices=dtypes,
            metavar="DTYPE",
            action=_Spelt,
            help=f"the {says} dtype, {' '.join(dtypes)} (default the config's){_also(dest)}",
        )
        _add_aliases(engine, dest, kind=_engine_dtype, metavar="DTYPE")
    engine.add_argument(
        "--gpu",
        choices=[gpu.value for gpu in vllm.Gpu],
        default=vllm.Gpu.SM90.value,
        help="the GPU generation vLLM runs on (default sm90)",
    )
    engine.add_argument(
        "--no-enable-prefix-caching",
        dest="prefix_caching",
        action="store_false",
        help="vLLM without prefix caching (mamba_cache_mode none)",
    )
    engine.add_argument(
        "--speculative-method",
        choices=[method.value for method in vllm.SpeculativeMethod],
        default=vllm.SpeculativeMethod.MTP.value,
        help="vLLM's drafter (default mtp: its attention joins the KV cache)",
    )
    engine.add_argument(
        "--kv-cache-dtype",
        choices=["auto", *vllm.KV_CACHE_DTYPES],
        default="auto",
        metavar="DTYPE",
        help="vLLM's: auto (model's) " + " ".join(vllm.KV_CACHE_DTYPES),
    )
    engine.add_argument(
        "--disable-radix-cache",
        action="store_true",
        help="SGLang without its radix cache (one state per request)",
    )
    engine.add_argument(
        "--linear-replayssm-cache-len",
        type=_positive,
        default=None,
        metavar="L",
        help="records per slot of SGLang's ReplaySSM ring (default 16)",
    )


def _memory_arguments(size: argparse.ArgumentParser, /) -> None:
    memory = size.add_argument_group(
        "memory",
        f"per GPU. Bytes: {units.BYTE_SPELLINGS}.\nTokens: {units.LENGTH_SPELLINGS}.",
    )
    for flag in memory_flags():
        memory.add_argument(
            f"--{flag.dest.replace('_', '-')}",
            type=_typed(READERS[flag.metavar]) if flag.metavar in READERS else _positive,
            metavar=flag.metavar,
            help=flag.help,
        )
    memory.add_argument(
        "--batch", type=_positive, metavar="N", help="concurrent requests (totals for N)"
    )
    memory.add_argument(
        "--context",
        type=_tokens,
        metavar="TOKENS",
        help="with --batch: the memory each engine needs for them",
    )


def _speculation_arguments(size: argparse.ArgumentParser, /) -> None:
    speculation = size.add_argument_group("speculation")
    speculation.add_argument(
        "--num-drafts",
        type=_draft_counts,
        metavar="N|A,B|A-B",
        action=_Spelt,
        help="draft tokens per step (1,3,7 or 1-8: a sweep over every engine)"
        + _also("num_drafts"),
    )
    _add_aliases(speculation, "num_drafts", kind=_draft_counts, metavar="N")
    speculation.add_argument(
        "--mtp-slots",
        type=_positive,
        metavar="N",
        help="requests (the seed module's MTP slots); default --batch, else 1",
    )
    speculation.add_argument(
        "--mtp-state-slots",
        type=_whole_number,
        metavar="N",
        help="slots the seed's preflight reserves (default --mtp-slots + 1)",
    )
    speculation.add_argument(
        "--num-intermediates",
        type=_whole_number,
        metavar="N",
        help="the seed pool's verify window (default --num-drafts + 1)",
    )


def _output_arguments(size: argparse.ArgumentParser, /) -> None:
    output = size.add_argument_group("output")
    output.add_argument(
        "--why", action="store_true", help="each startup figure's reason, and the terms"
    )
    exclusive = output.add_mutually_exclusive_group()
    exclusive.add_argument(
        "--format",
        choices=[f.value for f in OutputFormat],
        default="text",
        help="text (default), json (exact integers) or markdown",
    )
    exclusive.add_argument(
        "--json", metavar="PATH", help="write the figures as JSON (- for stdout)"
    )
    output.add_argument(
        "--plot", metavar="PATH", help="draw memory against the drafts (.png or .svg)"
    )


def _help_among_output(size: argparse.ArgumentParser, /) -> None:
    """``-h`` listed with the output flags, not under a heading of its own."""
    (shown,) = [a for a in size._actions if isinstance(a, argparse._HelpAction)]  # noqa: SLF001
    size._optionals._group_actions.remove(shown)  # noqa: SLF001
    (output,) = [g for g in size._action_groups if g.title == "output"]  # noqa: SLF001
    output._group_actions.insert(0, shown)  # noqa: SLF001


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help within 100 columns, the examples as written, flag names never split at a hyphen.

    A group's description runs straight into its flags, with no blank line between.
    """

    def __init__(self, prog: str) -> None:
        # Wide enough for the longest flag and its metavar (--gpu-memory-utilization FRACTION).
        super().__init__(prog, max_help_position=38, width=100)

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)

    def _format_text(self, text: str) -> str:
        formatted = super()._format_text(text)
        # Within a group (below the parser's own description), one line break, not two.
        inside = self._current_indent > 0
        return formatted.removesuffix("\n") if inside else formatted


def add_size_arguments(size: argparse.ArgumentParser, /) -> None:
    """Add ``size``'s options to its parser, grouped as --help shows them, with its examples."""
    size.usage = "%(prog)s (--config PATH | dimensions) --num-drafts N [options]"
    size.description = (
        "Will the engine start, how many requests fit, what each design holds (docs/sizing.md)."
    )
    size.epilog = _EXAMPLES
    size.formatter_class = _HelpFormatter
    _model_arguments(size)
    _speculation_arguments(size)
    _engine_arguments(size)
    _memory_arguments(size)
    _output_arguments(size)
    _help_among_output(size)


class SizeParser(OneLineParser):
    """``size``'s parser: a bad flag is one line, exit 2, as for every command.

    ``--num-drafts`` is required under any of its names, which argparse
    cannot say of a flag with aliases.
    """

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Parse as every command does, then require ``--num-drafts`` under one of its names."""
        parsed, extra = super().parse_known_args(args, namespace)
        if getattr(parsed, "num_drafts", None) is None:
            self.error("the following arguments are required: --num-drafts")
        return parsed, extra
