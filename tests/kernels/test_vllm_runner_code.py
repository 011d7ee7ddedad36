# SPDX-License-Identifier: MIT OR Apache-2.0
"""vLLM's runner's own classification of a step's rows (adapters/engines/vllm/runner_code.py).

Compiled from each release's unpacked ``v1/worker/gpu_model_runner.py``: in
0.31.0 a step in which no row drafts is not speculative (line 2224), so the
GDN builder is handed no draft counts and a decode with none is -1 (lines
2241-2250); in 0.33.0 every step of a speculative runner is (line 2188), and
such a decode is a row of zero drafts (lines 2215-2227). A release whose code
reads what the stand-ins do not hold is refused in one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import pytest

from adapters.engines import wheels
from adapters.engines.vllm.load import WHEEL
from adapters.engines.vllm.runner_code import (
    RUNNER_FILE,
    Classified,
    Row,
    RunnerCodeError,
    runner_code,
)

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.kernels


class GDNAttentionMetadataBuilder:
    """Stands in for vLLM's GDN builder class, which the runner's test names."""


#: A step with drafts: a verify of 3 drafts, a decode of none, a prompt chunk of 5.
_WITH_DRAFTS: Final = (Row(4, 3, 10, 10), Row(1, 0, 12, 12), Row(5, 0, 0, 5))
#: A step in which no row drafts: two decodes of one token each, after their prompts.
_NO_DRAFTS: Final = (Row(1, 0, 13, 10), Row(1, 0, 14, 12))


def _source(version: str, /) -> Path:
    return wheels.fetch(wheels.release(WHEEL, version)) / RUNNER_FILE


def _classified(version: str, rows: tuple[Row, ...], /) -> Classified:
    code = runner_code(_source(version), version, GDNAttentionMetadataBuilder)
    return code.classify(rows, GDNAttentionMetadataBuilder())


def test_a_decode_with_no_drafts_beside_drafts_is_minus_1_in_0_31_0_and_0_in_0_33_0() -> None:
    assert _classified("0.31.0", _WITH_DRAFTS) == Classified(speculative=True, drafts=(3, -1, -1))
    assert _classified("0.33.0", _WITH_DRAFTS) == Classified(speculative=True, drafts=(3, 0, -1))


def test_a_step_in_which_no_row_drafts_hands_the_builder_counts_from_0_33_0_only() -> None:
    assert _classified("0.31.0", _NO_DRAFTS) == Classified(speculative=False, drafts=None)
    assert _classified("0.33.0", _NO_DRAFTS) == Classified(speculative=True, drafts=(0, 0))


def test_a_builder_that_is_not_a_linear_attention_one_gets_no_counts() -> None:
    # The runner's own isinstance test: only its linear-attention builders get them.
    code = runner_code(_source("0.33.0"), "0.33.0", GDNAttentionMetadataBuilder)
    assert code.classify(_NO_DRAFTS, object()) == Classified(speculative=False, drafts=(0, 0))


def _mutated(tmp_path: Path, old: str, new: str, /) -> Path:
    text = _source("0.33.0").read_text(encoding="utf-8")
    assert text.count(old) == 1
    path = tmp_path / "gpu_model_runner.py"
    path.write_text(text.replace(old, new), encoding="utf-8")
    return path


def test_a_release_whose_runner_reads_a_field_not_stood_in_for_is_one_line(
    tmp_path: Path,
) -> None:
    path = _mutated(
        tmp_path,
        "self.input_batch.num_prompt_tokens[:num_reqs]",
        "self.input_batch.num_tokens_no_spec[:num_reqs]",
    )
    code = runner_code(path, "9.9.9", GDNAttentionMetadataBuilder)
    with pytest.raises(RunnerCodeError) as raised:
        code.classify(_NO_DRAFTS, GDNAttentionMetadataBuilder())
    assert str(raised.value) == (
        "vLLM 9.9.9's vllm/v1/worker/gpu_model_runner.py reads"
        " self.input_batch.num_tokens_no_spec, which"
        " adapters/engines/vllm/runner_code.py does not stand in for"
    )


def test_a_release_whose_runner_reads_a_name_not_stood_in_for_is_refused_at_compile(
    tmp_path: Path,
) -> None:
    path = _mutated(
        tmp_path,
        "use_spec_decode = self.speculative_config is not None\n        if",
        "use_spec_decode = self.speculative_config is not None and lora_ok\n        if",
    )
    with pytest.raises(RunnerCodeError) as raised:
        runner_code(path, "9.9.9", GDNAttentionMetadataBuilder)
    assert str(raised.value) == (
        "vLLM 9.9.9's vllm/v1/worker/gpu_model_runner.py line 2188 reads lora_ok,"
        " which adapters/engines/vllm/runner_code.py does not stand in for"
    )
