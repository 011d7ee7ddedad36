# SPDX-License-Identifier: MIT OR Apache-2.0
"""The requests the judge sends: drawn for rollback, seeded, or read from a file.

A drawn workload is reproducible from its seed alone. It is built so that a
speculating engine verifies, accepts in part and rolls back often, in steps
that mix work of every kind:

- prompts that repeat a cycle or an n-gram, so that ngram and draft models
  propose drafts that are accepted in part;
- prompts with no repeat, on which an ngram drafter proposes nothing, among
  and after prompts on which it does (steps in which no request drafts);
- prompt and output lengths from 1 up, K and K + 1 drawn often (K, the
  verify's width, is ``--num-drafts`` + 1);
- a prefix shared by several requests that crosses the engine's block size,
  so that prefix caching hits in the middle of a sequence;
- requests of different lengths sent at once, so that one engine step holds
  prompts, verifies and plain decodes together.

A ``--prompts`` file holds one JSON object a line (:class:`PromptLine`).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, NotRequired, TypedDict

from .errors import PromptsFileError

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "PromptLine",
    "Request",
    "Workload",
    "draw_workload",
    "read_prompts",
]

#: The most bytes a prompts file may hold, and the most requests.
_MOST_BYTES: Final = 16 << 20
_MOST_REQUESTS: Final = 10_000


class Request(TypedDict):
    """One completion request: a prompt of token ids (or text) and how many tokens to generate."""

    prompt: list[int] | str
    max_tokens: int


class PromptLine(TypedDict):
    """One line of a ``--prompts`` file (schema: ``serving/schemas/prompt-line.schema.json``)."""

    prompt: list[int] | str
    max_tokens: NotRequired[int]
    #: Requests with the same ``batch`` are sent at once, in file order of first appearance.
    batch: NotRequired[int]


@dataclass(frozen=True)
class Workload:
    """The requests, and the groups of them sent at once (indices into ``requests``)."""

    requests: tuple[Request, ...]
    batches: tuple[tuple[int, ...], ...]


def _cycle(rng: random.Random, length: int, vocab: int, /) -> list[int]:
    period = rng.randint(1, 6)
    cycle = [rng.randrange(1, vocab) for _ in range(period)]
    return [cycle[i % period] for i in range(length)]


def _ngram(rng: random.Random, length: int, vocab: int, /) -> list[int]:
    gram = [rng.randrange(1, vocab) for _ in range(rng.randint(2, 4))]
    prompt: list[int] = []
    while len(prompt) < length:
        prompt += gram if rng.random() < 0.6 else [rng.randrange(1, vocab)]
    return prompt[:length]


def _plain(rng: random.Random, length: int, vocab: int, /) -> list[int]:
    # No token twice, as far as the vocabulary allows: nothing for an ngram drafter to match.
    pool = list(range(1, vocab))
    rng.shuffle(pool)
    return [pool[i % len(pool)] for i in range(length)]


def _length(rng: random.Random, width: int, block_size: int, /) -> int:
    return rng.choice(
        [1, width, width, width + 1, width + 1, width + 2, rng.randint(2, 3 * block_size)]
    )


def draw_workload(  # noqa: PLR0913 - the draw's parameters, each a flag
    seed: int,
    /,
    *,
    count: int,
    vocab: int,
    num_drafts: int,
    block_size: int,
    max_tokens: int,
    concurrency: int,
    min_prompt: int = 1,
) -> Workload:
    """``count`` requests drawn from ``seed``, sent ``concurrency`` at a time.

    Token ids are drawn below ``vocab`` (and above 0); outputs are at most
    ``max_tokens`` long, with K = ``num_drafts`` + 1 and K + 1 drawn often and
    some long enough to cross ``block_size``; prompts are at least ``min_prompt`` long.
    """
    rng = random.Random(seed)  # noqa: S311 - a reproducible draw, not a secret
    width = num_drafts + 1
    lengths = [width, width + 1, block_size + 1, 2 * block_size + width, max_tokens, max_tokens]
    shared = _cycle(rng, 2 * block_size + rng.randint(1, max(1, block_size - 1)), vocab)
    kinds = ("cycle", "ngram", "plain", "shared")
    # Each kind first, and a second shared prompt: the prefix is shared from five requests on.
    opening = (*kinds, "shared")
    drawn: list[tuple[str, Request]] = []
    for index in range(count):
        kind = opening[index] if index < len(opening) else rng.choice(kinds)
        length = max(min_prompt, _length(rng, width, block_size))
        if kind == "shared":
            prompt = shared + _ngram(rng, length, vocab)
        else:
            prompt = {"cycle": _cycle, "ngram": _ngram, "plain": _plain}[kind](rng, length, vocab)
        tokens = max(1, min(max_tokens, rng.choice(lengths)))
        drawn.append((kind, {"prompt": prompt, "max_tokens": tokens}))
    # Plain prompts last, together where there are enough: after steps that
    # accepted drafts, steps in which no request drafts.
    drawn.sort(key=lambda item: item[0] == "plain")
    requests = tuple(request for _, request in drawn)
    return Workload(requests, _in_order(len(requests), concurrency))


def _line(value: object, number: int, where: str, default_tokens: int, /) -> PromptLine:
    here = f"{where} line {number}"
    if not isinstance(value, dict):
        raise PromptsFileError(f"{here}: not a JSON object")
    unknown = sorted(set(value) - {"prompt", "max_tokens", "batch"})
    if unknown:
        raise PromptsFileError(f"{here}: unknown field {unknown[0]!r}")
    prompt = value.get("prompt")
    ids = isinstance(prompt, list) and all(
        isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in prompt
    )
    if not ((isinstance(prompt, str) and prompt) or (ids and prompt)):
        raise PromptsFileError(
            f"{here}: field 'prompt' must be a non-empty string or list of token ids"
        )
    tokens = value.get("max_tokens", default_tokens)
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
        raise PromptsFileError(f"{here}: field 'max_tokens' must be a positive integer")
    line: PromptLine = {"prompt": prompt, "max_tokens": tokens}
    if "batch" in value:
        batch = value["batch"]
        if isinstance(batch, bool) or not isinstance(batch, int):
            raise PromptsFileError(f"{here}: field 'batch' must be an integer")
        line["batch"] = batch
    return line


def _decoded(path: Path, where: str, /) -> str:
    try:
        with path.open("rb") as file:
            raw = file.read(_MOST_BYTES + 1)
    except OSError as error:
        raise PromptsFileError(f"{where}: {error.strerror or error}") from None
    if len(raw) > _MOST_BYTES:
        raise PromptsFileError(f"{where}: larger than {_MOST_BYTES >> 20} MiB")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise PromptsFileError(f"{where}: not UTF-8 text") from None


def _in_order(count: int, concurrency: int, /) -> tuple[tuple[int, ...], ...]:
    size = max(1, concurrency)
    return tuple(tuple(range(start, min(start + size, count))) for start in range(0, count, size))


def read_prompts(path: Path, /, *, max_tokens: int, concurrency: int) -> Workload:
    """The requests of a ``--prompts`` file, in its batches (or ``concurrency`` at a time).

    Raises:
        PromptsFileError: the file cannot be read, or a line is not a request.
    """
    where = f"--prompts {path}"
    lines: list[PromptLine] = []
    for number, content in enumerate(_decoded(path, where).splitlines(), start=1):
        if not content.strip():
            continue
        try:
            value = json.loads(content)
        except ValueError as error:
            raise PromptsFileError(f"{where} line {number}: not JSON ({error})") from None
        lines.append(_line(value, number, where, max_tokens))
        if len(lines) > _MOST_REQUESTS:
            raise PromptsFileError(f"{where}: more than {_MOST_REQUESTS} requests")
    if not lines:
        raise PromptsFileError(f"{where}: no request in it")
    requests = tuple(
        Request(prompt=line["prompt"], max_tokens=line.get("max_tokens", max_tokens))
        for line in lines
    )
    if not any("batch" in line for line in lines):
        return Workload(requests, _in_order(len(lines), concurrency))
    groups: dict[int, list[int]] = {}
    for index, line in enumerate(lines):
        groups.setdefault(line.get("batch", -1 - index), []).append(index)
    return Workload(requests, tuple(tuple(group) for group in groups.values()))
