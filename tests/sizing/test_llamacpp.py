# SPDX-License-Identifier: MIT OR Apache-2.0
"""The llama.cpp view, pinned: llama.cpp 0c1e57098, as llama-cpp-python 0.3.36 vendors it.

Per sequence and GDN layer llama.cpp holds h and (K-1) conv columns in FP32
(src/llama-model.cpp:2756-2773; src/llama-hparams.cpp:229, 257) in
``1 + n_rs_seq`` planes (src/llama-memory-recurrent.cpp:101-104), with
``n_rs_seq`` = the drafts where the architecture has snapshots
(src/llama-arch.cpp:1123-1140; common/common.h:396-402) and clamped to 0
otherwise (src/llama-context.cpp:105-110). A saved sequence
(llama_state_seq_get_size_ext, PARTIAL_ONLY) is its current plane and 28 + 24
bytes a layer of headers. tests/llamacpp/test_memory_figures.py checks these
figures against the built library.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ssm_rollback_spec.releases import LLAMA_CPP, LLAMA_CPP_COMMIT
from ssm_rollback_spec.sizing.dimensions import GdnDimensions
from ssm_rollback_spec.sizing.engines.llamacpp import facts as llamacpp
from ssm_rollback_spec.sizing.engines.llamacpp.unit import LLAMA_CPP_VIEW, LlamaCppSizing
from ssm_rollback_spec.sizing.presentation import rejoined
from ssm_rollback_spec.sizing.review import model_from_config, model_from_dimensions
from ssm_rollback_spec.sizing.state import Drafting, Setup
from ssm_rollback_spec.tools.cli import main

if TYPE_CHECKING:
    import pytest

EXAMPLES: Final = Path(__file__).resolve().parents[2] / "examples"
QWEN3_NEXT: Final = EXAMPLES / "qwen3-next-80b-a3b-instruct.config.json"
QWEN3_5_27B: Final = EXAMPLES / "qwen3.5-27b.config.json"
ENGINE: Final = "llama.cpp 0c1e57098 (llama-cpp-python 0.3.36)"
#: Qwen3.5-27B, one plane: 48 layers x (48 x 128 x 128 + 3 x 10,240) x 4 bytes.
QWEN3_5_PLANE: Final = 48 * (786_432 + 3 * 10_240) * 4
#: Qwen3-Next-80B-A3B, one plane: 36 layers x (32 x 128 x 128 + 3 x 8,192) x 4 bytes.
QWEN3_NEXT_PLANE: Final = 36 * (524_288 + 3 * 8_192) * 4


def _sized(path: Path, drafts: int, requests: int = 1) -> LlamaCppSizing:
    model = model_from_config(json.loads(path.read_text(encoding="utf-8")), 1)
    return LLAMA_CPP_VIEW.size(model, Setup(), Drafting(drafts, requests))


def _size(capsys: pytest.CaptureFixture[str], *arguments: str) -> tuple[int, str, str]:
    code = main(["size", *arguments])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_release_is_written_once_and_named_with_its_commit() -> None:
    assert (LLAMA_CPP.distribution, LLAMA_CPP.version, LLAMA_CPP.license) == (
        "llama-cpp-python",
        "0.3.36",
        "MIT",
    )
    assert LLAMA_CPP_COMMIT == "0c1e57098"
    assert LLAMA_CPP_VIEW.engine == ENGINE
    assert LLAMA_CPP_VIEW.release is LLAMA_CPP


def test_qwen3_5_keeps_one_fp32_snapshot_plane_per_draft() -> None:
    sized = _sized(QWEN3_5_27B, 3, requests=2)
    assert QWEN3_5_PLANE == 156_893_184
    assert (sized.architecture, sized.n_rs_seq, sized.speculative_checkpoint) == (
        "qwen35",
        3,
        False,
    )
    assert sized.base_bytes_per_request == QWEN3_5_PLANE
    assert sized.speculative_bytes_per_request == 3 * QWEN3_5_PLANE == 470_679_552
    # mem_size = n_seq_max cells: no padding beyond the sequences.
    assert sized.speculative_bytes == 2 * 470_679_552
    assert (sized.recurrent_bytes_per_layer, sized.conv_column_bytes_per_layer) == (
        3_145_728,
        40_960,
    )


def test_a_saved_sequence_is_its_plane_and_the_headers() -> None:
    # 28 bytes once (magic, seq id, cell count, one cell, s_trans, n_layer),
    # then 2 x (type + row size) = 24 bytes per GDN layer.
    assert _sized(QWEN3_5_27B, 3).checkpoint_bytes == QWEN3_5_PLANE + 28 + 48 * 24 == 156_894_364
    assert _sized(QWEN3_NEXT, 3).checkpoint_bytes == QWEN3_NEXT_PLANE + 28 + 36 * 24


def test_qwen3_next_has_no_snapshots_and_saves_the_whole_state_per_verify() -> None:
    sized = _sized(QWEN3_NEXT, 3)
    assert (sized.architecture, sized.n_rs_seq, sized.speculative_checkpoint) == (
        "qwen3next",
        0,
        True,
    )
    assert sized.base_bytes_per_request == QWEN3_NEXT_PLANE == 79_036_416
    # Whatever the drafts: one spec_ckpt of the slot.
    assert sized.speculative_bytes_per_request == 79_037_308
    assert _sized(QWEN3_NEXT, 7).speculative_bytes_per_request == 79_037_308


def test_no_drafts_hold_no_snapshot_and_no_checkpoint() -> None:
    assert _sized(QWEN3_5_27B, 0).speculative_bytes_per_request == 0
    assert _sized(QWEN3_NEXT, 0).speculative_bytes_per_request == 0


def test_explicit_dimensions_are_sized_with_snapshots() -> None:
    # The llamacpp tier's model: 1 GDN layer, h = 2 x 128 x 128, conv_dim = 768.
    tier = GdnDimensions(
        num_gdn_layers=1,
        num_key_heads=2,
        key_head_dim=128,
        num_value_heads=2,
        value_head_dim=128,
        conv_kernel=4,
    )
    sized = LLAMA_CPP_VIEW.size(model_from_dimensions(tier, 1), Setup(), Drafting(2, 1))
    plane = (32_768 + 3 * 768) * 4
    assert (sized.architecture, sized.n_rs_seq) == (None, 2)
    assert sized.speculative_bytes_per_request == 2 * plane == 280_576
    assert sized.checkpoint_bytes == plane + 28 + 24 == 140_340


def test_the_context_checkpoints_hold_32_saved_states_per_slot() -> None:
    sized = _sized(QWEN3_NEXT, 3, requests=4)
    assert sized.ctx_checkpoints == llamacpp.CTX_CHECKPOINTS == 32
    assert sized.ctx_checkpoint_bytes_per_request == 32 * 79_037_308 == 2_529_193_856


def test_the_rings_beside_it_are_the_seeds_and_replayssms() -> None:
    sized = _sized(QWEN3_NEXT, 3)
    # 3 rows of 24,832 B x 36 layers; 16 records of 24,704 B x 36 layers.
    assert sized.seed_ring_bytes_per_slot == 3 * 24_832 * 36 == 2_681_856
    assert sized.replayssm_ring_bytes_per_request == 16 * 24_704 * 36 == 14_229_504


def test_a_forced_dtype_other_than_fp32_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    review = ["--config", str(QWEN3_5_27B), "--num-drafts", "3", "--mtp-slots", "1"]
    code, out, err = _size(capsys, *review, "--engine", "llama.cpp", "--conv-dtype", "bf16")
    assert (code, out) == (2, "")
    assert err == (
        f"ssm-rollback-spec: error: --conv-dtype bf16: {ENGINE} offers no bf16 state dtype"
        " (only fp32)\n"
    )
    code, out, err = _size(capsys, *review, "--engine", "llama.cpp", "--state-dtype", "fp32")
    assert (code, err) == (0, "")


def test_the_text_report_words_snapshots_checkpoints_and_rings(
    capsys: pytest.CaptureFixture[str],
) -> None:
    review = ["--config", str(QWEN3_NEXT), "--num-drafts", "3", "--mtp-slots", "1"]
    code, out, err = _size(capsys, *review, "--engine", "llama.cpp")
    assert (code, err) == (0, "")
    lines = rejoined(out).splitlines()
    assert f"  follows                {ENGINE}" in lines
    assert (
        "  n_rs_seq               0: llama.cpp clamps it, qwen3next is not in"
        " llm_arch_supports_rs_rollback"
    ) in lines
    assert (
        "  context checkpoints    up to 32 per slot (--ctx-checkpoints): 2,529,193,856 B"
        " (2.4 GiB) per slot, 2,529,193,856 B (2.4 GiB) for 1 request, host memory"
    ) in lines
    assert (
        "  beside the rings       seed ring 2,681,856 B (2.6 MiB) per slot (k = num_drafts + 1),"
        " ReplaySSM ring 14,229,504 B (13.6 MiB) per request: the speculative state is 29.5x"
        " and 5.6x them"
    ) in lines
    # What Qwen3-Next holds instead of snapshots, where and for how long; and
    # the GPU's memory apart from the host's, never summed.
    assert (
        "  speculative state      79,037,308 B (75.4 MiB)  (1 request x 36 layers x"
        " (h + (K-1) conv columns) and headers, FP32: one saved copy in host memory, from before"
        " each verify until its acceptance is known (spec_ckpt))"
    ) in lines
    assert "  on the GPU             79,036,416 B (75.4 MiB)  (the base state)" in lines
    assert "  in host memory         79,037,308 B (75.4 MiB)  (the saved copy)" in lines
    assert not any(line.startswith("  base + speculative") for line in lines)
    assert not any("n_rs_seq x" in line for line in lines)
    # llama.cpp pads no pool: mem_size is n_seq_max.
    assert not any("pool padding" in line for line in lines)


def test_qwen3_nexts_answer_puts_the_saved_copy_in_host_memory_not_on_the_gpu(
    capsys: pytest.CaptureFixture[str],
) -> None:
    review = ["--config", str(QWEN3_NEXT), "--num-drafts", "3", "--mtp-slots", "1"]
    code, out, _ = _size(capsys, *review, "--engine", "llama.cpp")
    assert code == 0
    assert rejoined(out).splitlines()[1] == (
        "speculative state        75.4 MiB in host memory, not on the GPU, for 1 request;"
        " per request 29.5x the seed's replay ring"
    )
    # Qwen3.5 takes snapshots: they are on the GPU.
    code, out, _ = _size(capsys, "--config", str(QWEN3_5_27B), *review[2:], "--engine", "llama.cpp")
    assert code == 0
    assert out.splitlines()[1].startswith("speculative state        448.9 MiB per GPU for 1 ")


def test_a_sweep_marks_qwen3_nexts_saved_copy_as_host_memory(
    capsys: pytest.CaptureFixture[str],
) -> None:
    sweep = ["--num-drafts", "1-8", "--mtp-slots", "1"]
    code, out, _ = _size(capsys, "--config", str(QWEN3_NEXT), *sweep)
    assert code == 0
    lines = out.splitlines()
    assert (
        "  llama.cpp         75.4 MiB to 75.4 MiB    88.4x to 11.1x"
        "   in host memory, not on the GPU"
    ) in lines
    assert "llama.cpp: in host memory, not on the GPU." in rejoined(out).replace("\n", " ")
    assert all(len(line) <= 100 for line in lines)
    # No other view, and no view of a model with snapshots, is marked.
    assert sum("in host memory" in line for line in lines[:8]) == 1
    code, out, _ = _size(capsys, "--config", str(QWEN3_5_27B), *sweep)
    assert code == 0
    assert "host memory" not in out


def test_the_json_report_holds_llama_cpps_own_figures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    review = ["--config", str(QWEN3_5_27B), "--num-drafts", "3", "--mtp-slots", "1"]
    code, out, _ = _size(capsys, *review, "--engine", "llama.cpp", "--format", "json")
    assert code == 0
    snapshot = json.loads(out)["snapshot"]
    assert snapshot["engine"] == ENGINE
    assert (snapshot["recurrent_dtype"], snapshot["conv_dtype"]) == ("fp32", "fp32")
    assert snapshot["speculative_bytes"] == 470_679_552
    assert snapshot["n_rs_seq"] == 3
    assert snapshot["checkpoint_bytes"] == 156_894_364
    assert snapshot["ctx_checkpoint_bytes_per_request"] == 32 * 156_894_364


def test_every_fact_cites_a_file_and_lines_of_the_vendored_tree() -> None:
    assert set(LLAMA_CPP_VIEW.sources) >= {"n_rs_seq", "planes", "row sizes", "clamp"}
    for source in LLAMA_CPP_VIEW.sources.values():
        assert not source.path.startswith(("/", "vendor/"))
        assert source.lines[0].isdigit()
        assert source.says


def test_a_seed_ring_past_the_usize_range_is_said_not_raised(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The review's ring at k = num_intermediates fits; the one beside the
    # saved copy, at k = num_drafts + 1, does not. (Qwen3-Next saves one copy
    # whatever the drafts; Qwen3.5's snapshots at such drafts are past 2^64
    # bytes themselves, which is one line, tests/sizing/test_views.py.)
    code, out, err = _size(
        capsys,
        *("--config", str(QWEN3_NEXT), "--num-drafts", str(2**62), "--mtp-slots", "1"),
        *("--mtp-state-slots", "0", "--num-intermediates", "1", "--engine", "llama.cpp"),
    )
    assert (code, err) == (0, "")
    assert "  beside the rings       seed ring past the 64-bit usize range per slot" in rejoined(
        out
    )
