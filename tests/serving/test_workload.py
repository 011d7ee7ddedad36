# SPDX-License-Identifier: MIT OR Apache-2.0
"""workload: the drawn requests built for rollback, and a --prompts file read line by line."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final

import jsonschema
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ssm_rollback_spec.serving.errors import PromptsFileError
from ssm_rollback_spec.serving.workload import Workload, draw_workload, read_prompts
from tests.child import ROOT

if TYPE_CHECKING:
    from pathlib import Path

SCHEMA: Final = json.loads(
    (ROOT / "spec" / "serving" / "schemas" / "prompt-line.schema.json").read_text("utf-8")
)


def _draw(seed: int = 0, **changes: int) -> Workload:
    figures = {
        "count": 24,
        "vocab": 64,
        "num_drafts": 3,
        "block_size": 8,
        "max_tokens": 32,
        "concurrency": 4,
        "min_prompt": 1,
    } | changes
    return draw_workload(seed, **figures)


def _common(first: list[int] | str, second: list[int] | str, /) -> int:
    return next(
        (i for i, (a, b) in enumerate(zip(first, second, strict=False)) if a != b),
        min(len(first), len(second)),
    )


def test_a_drawn_workload_is_the_same_from_the_same_seed_and_another_from_another() -> None:
    assert _draw(5) == _draw(5)
    assert _draw(5).requests != _draw(6).requests


@given(
    st.integers(0, 2**32),
    st.integers(4, 40),
    st.integers(8, 200),
    st.integers(1, 6),
    st.integers(1, 16),
    st.integers(1, 64),
    st.integers(1, 8),
    st.integers(1, 20),
)
@example(0, 4, 8, 1, 1, 1, 1, 1)
def test_a_drawn_workload_keeps_to_its_vocabulary_its_lengths_and_its_concurrency(
    seed: int,
    count: int,
    vocab: int,
    num_drafts: int,
    block_size: int,
    max_tokens: int,
    concurrency: int,
    min_prompt: int,
) -> None:
    workload = draw_workload(
        seed,
        count=count,
        vocab=vocab,
        num_drafts=num_drafts,
        block_size=block_size,
        max_tokens=max_tokens,
        concurrency=concurrency,
        min_prompt=min_prompt,
    )
    assert len(workload.requests) == count
    for request in workload.requests:
        prompt = request["prompt"]
        assert isinstance(prompt, list)
        assert len(prompt) >= min_prompt
        assert all(1 <= token < vocab for token in prompt)
        assert 1 <= request["max_tokens"] <= max_tokens
    assert [i for batch in workload.batches for i in batch] == list(range(count))
    assert all(1 <= len(batch) <= concurrency for batch in workload.batches)


@given(st.integers(0, 2**32), st.integers(1, 16))
@example(0, 1)
def test_a_drawn_workload_ends_with_a_prompt_an_ngram_drafter_finds_nothing_in(
    seed: int, block_size: int
) -> None:
    # The draw's plain prompts are at most 3 blocks long: below the vocabulary, none repeats.
    workload = _draw(seed, block_size=block_size, vocab=3 * block_size + 10)
    last = workload.requests[-1]["prompt"]
    assert len(set(last)) == len(last)


@given(st.integers(0, 2**32), st.integers(1, 16))
@example(0, 1)
@example(7, 6)
def test_a_drawn_workload_shares_a_prefix_that_crosses_the_block_size(
    seed: int, block_size: int
) -> None:
    prompts = [request["prompt"] for request in _draw(seed, block_size=block_size).requests]
    longest = max(
        _common(first, second)
        for index, first in enumerate(prompts)
        for second in prompts[index + 1 :]
    )
    assert longest > 2 * block_size


def test_lengths_k_and_k_plus_one_are_drawn_often() -> None:
    workload = _draw(11, count=400, num_drafts=3, block_size=16, max_tokens=64)
    outputs = [request["max_tokens"] for request in workload.requests]
    prompts = [len(request["prompt"]) for request in workload.requests]
    # K, the verify's width, is --num-drafts + 1.
    assert sum(length in {4, 5} for length in outputs) > len(outputs) / 4
    assert sum(length in {4, 5} for length in prompts) > len(prompts) / 4
    assert 1 in prompts
    assert max(outputs) == 64


def test_a_drawn_prompt_is_never_shorter_than_the_least_asked() -> None:
    workload = _draw(3, count=200, min_prompt=9)
    assert min(len(request["prompt"]) for request in workload.requests) == 9


# --prompts files


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "prompts.jsonl"
    path.write_text(text, encoding="utf-8")
    return path


def _read(path: Path) -> Workload:
    return read_prompts(path, max_tokens=7, concurrency=2)


def test_a_prompts_file_gives_its_requests_in_order_concurrency_at_a_time(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        '{"prompt": [1, 2, 3]}\n\n{"prompt": "hello", "max_tokens": 3}\n{"prompt": [0]}\n',
    )
    workload = _read(path)
    assert workload.requests == (
        {"prompt": [1, 2, 3], "max_tokens": 7},
        {"prompt": "hello", "max_tokens": 3},
        {"prompt": [0], "max_tokens": 7},
    )
    assert workload.batches == ((0, 1), (2,))


def test_a_prompts_files_batches_are_sent_together_in_order_of_first_appearance(
    tmp_path: Path,
) -> None:
    lines = [
        {"prompt": [1], "batch": 5},
        {"prompt": [2]},
        {"prompt": [3], "batch": 1},
        {"prompt": [4], "batch": 5},
    ]
    workload = _read(_file(tmp_path, "".join(json.dumps(line) + "\n" for line in lines)))
    assert workload.batches == ((0, 3), (1,), (2,))


_BAD_LINES: Final = {
    "not JSON": (
        "{prompt",
        (
            "line 1: not JSON (Expecting property name enclosed in double quotes: "
            "line 1 column 2 (char 1))"
        ),
    ),
    "not an object": ("[1, 2]", "line 1: not a JSON object"),
    "an unknown field": (
        '{"prompt": [1], "temperature": 1}',
        "line 1: unknown field 'temperature'",
    ),
    "no prompt": (
        '{"max_tokens": 3}',
        "line 1: field 'prompt' must be a non-empty string or list of token ids",
    ),
    "an empty prompt": (
        '{"prompt": []}',
        "line 1: field 'prompt' must be a non-empty string or list of token ids",
    ),
    "an empty text prompt": (
        '{"prompt": ""}',
        "line 1: field 'prompt' must be a non-empty string or list of token ids",
    ),
    "a negative token id": (
        '{"prompt": [1, -2]}',
        "line 1: field 'prompt' must be a non-empty string or list of token ids",
    ),
    "a true token id": (
        '{"prompt": [true]}',
        "line 1: field 'prompt' must be a non-empty string or list of token ids",
    ),
    "a zero max_tokens": (
        '{"prompt": [1], "max_tokens": 0}',
        "line 1: field 'max_tokens' must be a positive integer",
    ),
    "a text max_tokens": (
        '{"prompt": [1], "max_tokens": "3"}',
        "line 1: field 'max_tokens' must be a positive integer",
    ),
    "a fractional batch": (
        '{"prompt": [1], "batch": 1.5}',
        "line 1: field 'batch' must be an integer",
    ),
    "a true batch": ('{"prompt": [1], "batch": true}', "line 1: field 'batch' must be an integer"),
}


@pytest.mark.parametrize("name", _BAD_LINES)
def test_a_bad_line_of_a_prompts_file_is_one_line_naming_the_file_and_line(
    tmp_path: Path, name: str
) -> None:
    line, message = _BAD_LINES[name]
    path = _file(tmp_path, line + "\n")
    with pytest.raises(PromptsFileError) as raised:
        _read(path)
    assert str(raised.value) == f"--prompts {path} {message}"


def test_a_bad_line_is_named_by_its_number_in_the_file(tmp_path: Path) -> None:
    path = _file(tmp_path, '{"prompt": [1]}\n\n{"prompt": 3}\n')
    with pytest.raises(PromptsFileError) as raised:
        _read(path)
    assert str(raised.value) == (
        f"--prompts {path} line 3: field 'prompt' must be a non-empty string or list of token ids"
    )


def test_a_prompts_file_with_no_request_is_refused(tmp_path: Path) -> None:
    path = _file(tmp_path, "\n  \n")
    with pytest.raises(PromptsFileError) as raised:
        _read(path)
    assert str(raised.value) == f"--prompts {path}: no request in it"


def test_a_missing_prompts_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "absent.jsonl"
    with pytest.raises(PromptsFileError) as raised:
        _read(path)
    assert str(raised.value) == f"--prompts {path}: No such file or directory"


def test_a_prompts_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_bytes(b'{"prompt": "\xff"}\n')
    with pytest.raises(PromptsFileError) as raised:
        _read(path)
    assert str(raised.value) == f"--prompts {path}: not UTF-8 text"


# The schema says what read_prompts accepts, and refuses what it refuses.

_GOOD_LINES: Final = (
    {"prompt": [0]},
    {"prompt": [1, 2, 3], "max_tokens": 1},
    {"prompt": "text", "batch": -3},
    {"prompt": "x", "max_tokens": 9, "batch": 0},
)


def test_the_prompt_line_schema_is_a_valid_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("line", _GOOD_LINES, ids=json.dumps)
def test_a_line_read_prompts_accepts_is_valid_by_the_schema(tmp_path: Path, line: object) -> None:
    _read(_file(tmp_path, json.dumps(line) + "\n"))
    assert jsonschema.Draft202012Validator(SCHEMA).is_valid(line)


@pytest.mark.parametrize("name", [name for name in _BAD_LINES if name != "not JSON"])
def test_a_line_read_prompts_refuses_is_invalid_by_the_schema(name: str) -> None:
    assert not jsonschema.Draft202012Validator(SCHEMA).is_valid(json.loads(_BAD_LINES[name][0]))
