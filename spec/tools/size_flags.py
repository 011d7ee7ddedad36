# SPDX-License-Identifier: MIT OR Apache-2.0
"""The flags of ``ssm-rollback-spec size``: their types and help, memory flags from the engines."""

from __future__ import annotations

import argparse
import enum
import re
import sys
from typing import TYPE_CHECKING, Final, NoReturn

from ..sizing import sglang, vllm
from ..sizing.dtypes import Dtype
from ..sizing.memory import flags as memory_flags
from ..sizing.registry import ALIASES, ENGINES
from .arguments import whole_number
from .shipped import EXAMPLE_SUFFIX, examples_directory

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = [
    "DIMENSION_FLAGS",
    "MAX_SWEEP_VALUES",
    "OutputFormat",
    "SizeParser",
    "add_size_arguments",
    "human_readable_int",
]

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
DIMENSION_FLAGS: Final = {
    "gdn_layers": "num_gdn_layers",
    "key_heads": "num_key_heads",
    "key_head_dim": "key_head_dim",
    "value_heads": "num_value_heads",
    "value_head_dim": "value_head_dim",
    "conv_kernel": "conv_kernel",
}


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


#: Binary units the byte flags take after a whole number.
_BYTE_UNITS: Final = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def _bytes(text: str, /) -> int:
    """An argparse type: a whole number of bytes, or one with a KiB, MiB, GiB or TiB suffix."""
    for unit, scale in _BYTE_UNITS.items():
        if text.endswith(unit):
            number = text.removesuffix(unit)
            if not number.isdigit() or int(number) == 0:
                raise argparse.ArgumentTypeError(f"not a whole number of {unit} above 0: {text!r}")
            return int(number) * scale
    return _positive(text)


def human_readable_int(text: str, /) -> int:
    """An argparse type: a whole number as vLLM reads it (``10G``, ``128K``, ``25.6k``), >= 1.

    Bytes may also end in KiB to TiB, as the other byte flags take them.
    """
    if text.endswith(tuple(_BYTE_UNITS)):
        return _bytes(text)
    try:
        value = vllm.human_readable_int(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{error}: {text!r}") from None
    if value is None:
        return _positive(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return value


def _fraction(text: str, /, *, most: float = 1.0) -> float:
    """An argparse type: a fraction above 0 and at most 1 (or ``most``)."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value <= most:
        bound = "a fraction above 0 and at most 1" if most == 1 else "a number above 0"
        raise argparse.ArgumentTypeError(f"{bound}, got {text!r}")
    return value


def _ratio(text: str, /) -> float:
    return _fraction(text, most=sys.float_info.max)


def add_size_arguments(size: argparse.ArgumentParser, /) -> None:
    """Add ``size``'s options to its parser."""
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
        type=_positive,
        metavar="N",
        help="the module's MTP slots (its pool adds a dummy slot); the engines' requests"
        " (default: --batch; one of them is needed)",
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
        choices=[*ENGINES, *ALIASES],
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
    size.add_argument(
        "--kv-cache-dtype",
        choices=["auto", *vllm.KV_CACHE_DTYPES],
        default="auto",
        help="vLLM's flag: the attention cache's dtype, which sets the vllm view's attention"
        " page and so its block (default: auto, the model dtype)",
    )
    for memory in memory_flags():
        readers: dict[str, Callable[[str], float]] = {
            "FRACTION": _fraction,
            "BYTES": _bytes,
            "RATIO": _ratio,
        }
        kind = readers.get(memory.metavar, _positive)
        if memory.human:
            kind = human_readable_int
        size.add_argument(
            f"--{memory.dest.replace('_', '-')}",
            type=kind,
            metavar=memory.metavar,
            help=memory.help,
        )
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
    size.add_argument(
        "--context",
        type=human_readable_int,
        metavar="TOKENS",
        help="with --batch: the memory each engine and design needs for that many requests of"
        " this many tokens, attention KV included",
    )
    size.add_argument(
        "--why",
        action="store_true",
        help="give each startup figure's reason in a line (the JSON always has them)",
    )
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


class SizeParser(argparse.ArgumentParser):
    """``size``'s parser: a bad flag is one line, ``PROG: FLAG: WHAT (see --help)``, exit 2."""

    def error(self, message: str) -> NoReturn:  # noqa: D102 - the class says it
        found = re.fullmatch(r"argument (\S+?)(?:/\S+)?: (.*)", message, flags=re.DOTALL)
        line = " ".join((message if found is None else f"{found[1]}: {found[2]}").split())
        self.exit(2, f"{self.prog}: {line} (see --help)\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Parse, refusing what ``size`` does not know itself, as one line."""
        parsed, extra = super().parse_known_args(args, namespace)
        if extra:
            self.error(f"unrecognized arguments: {' '.join(extra)}")
        return parsed, extra
