# SPDX-License-Identifier: MIT OR Apache-2.0
"""Design-review sizing, checked against arithmetic worked by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pytest

from ssm_rollback_spec.sizing import dimensions as sizing
from ssm_rollback_spec.sizing import rings, views
from ssm_rollback_spec.sizing.presentation import rejoined
from tests.child import run_module

if TYPE_CHECKING:
    import subprocess

ROOT: Final = Path(__file__).resolve().parents[2]
QWEN3_NEXT: Final = ROOT / "examples" / "qwen3-next-80b-a3b-instruct.config.json"


def _config() -> dict[str, object]:
    loaded: dict[str, object] = json.loads(QWEN3_NEXT.read_text(encoding="utf-8"))
    return loaded


def test_the_sample_config_gives_qwen3_next_dimensions_by_hand() -> None:
    dimensions = sizing.dimensions_from_config(_config())
    # 48 layers, every 4th full attention: 48 - 48 / 4 = 36 GDN layers.
    assert dimensions.num_gdn_layers == 36
    # q and k: 16 heads x 128; v and z: 32 heads x 128. 2*2048 + 2*4096.
    assert dimensions.qkvz_elems == 12_288
    # (4 - 1) kernel columns of q, k, v: 3 * (2048 + 2048 + 4096).
    assert dimensions.conv_state_values == 24_576
    # One 128 x 128 matrix per value head: 32 * 16384.
    assert dimensions.recurrent_state_values == 524_288


def test_the_sample_config_sizes_by_hand() -> None:
    figures = rings.size_replay(
        sizing.dimensions_from_config(_config()),
        num_drafts=3,
        mtp_slots=1,
        mtp_state_slots=2,
        num_intermediates=4,
    )
    # 12288 BF16 values (24576 B) + 32 heads x (gate, beta) FP32 (256 B).
    assert figures.row_bytes == 24_832
    # 2 slots x (4 - 1) rows x 36 layers x 24832 B.
    assert figures.preflight_ring_bytes == 5_363_712
    assert (figures.pool_k, figures.pool_slots) == (4, 2)
    assert figures.pool_ring_bytes == 5_363_712
    assert figures.preflight_covers_pool
    assert figures.shortfall_bytes == 0


def test_the_module_view_is_the_dense_snapshot_layout_by_hand() -> None:
    snapshot = views.size_view(
        views.View.MODULE,
        views.Model(sizing.dimensions_from_config(_config())),
        num_drafts=3,
        requests=2,
        num_intermediates=4,
    )
    # Per token and layer: 524288 x 4 B + 24576 x 2 B = 2146304 B; x 2 x 4 x 36.
    assert snapshot.speculative_bytes == 618_135_552


def test_a_preflight_without_the_dummy_slot_falls_short_by_one_slot() -> None:
    figures = rings.size_replay(
        sizing.dimensions_from_config(_config()),
        num_drafts=3,
        mtp_slots=1,
        mtp_state_slots=1,
        num_intermediates=4,
    )
    assert figures.preflight_ring_bytes == 2_681_856
    assert not figures.preflight_covers_pool
    # One slot's worth: 3 x 36 x 24832.
    assert figures.shortfall_bytes == 2_681_856


def test_layer_types_win_over_the_interval() -> None:
    config = _config() | {"layer_types": ["linear_attention", "full_attention"] * 24}
    assert sizing.dimensions_from_config(config).num_gdn_layers == 24


def test_layer_types_must_list_every_layer() -> None:
    config = _config() | {"layer_types": ["linear_attention", "full_attention"] * 3}
    with pytest.raises(sizing.ConfigError) as raised:
        sizing.dimensions_from_config(config)
    assert str(raised.value) == (
        "the config's 'layer_types' has 6 entries but 'num_hidden_layers' is 48"
    )


@pytest.mark.parametrize("layers", [10**15, 2**64 - 1])
def test_the_interval_counts_any_number_of_layers_at_once(layers: int) -> None:
    config = _config() | {"num_hidden_layers": layers}
    assert sizing.dimensions_from_config(config).num_gdn_layers == layers - layers // 4


def test_a_multimodal_config_is_read_through_its_text_config() -> None:
    assert sizing.dimensions_from_config({"text_config": _config()}).num_gdn_layers == 36


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"linear_num_value_heads": None}, "the config has no 'linear_num_value_heads'"),
        ({"linear_key_head_dim": 0}, "'linear_key_head_dim' must be a positive integer, got 0"),
        ({"linear_conv_kernel_dim": True}, "'linear_conv_kernel_dim' must be a positive integer"),
        ({"full_attention_interval": None}, "neither 'layer_types' nor 'full_attention_interval'"),
        (
            {"full_attention_interval": 1},
            "not a Gated DeltaNet config: no linear_attention (GDN) layer among its 48 layers",
        ),
        ({"layer_types": "linear_attention"}, "'layer_types' must be a list of strings"),
    ],
)
def test_a_config_without_gdn_layers_is_refused_by_name(
    change: dict[str, object], message: str
) -> None:
    config = {k: v for k, v in (_config() | change).items() if v is not None}
    with pytest.raises(sizing.ConfigError) as raised:
        sizing.dimensions_from_config(config)
    assert message in str(raised.value)


def _size(*arguments: str) -> subprocess.CompletedProcess[str]:
    return run_module("ssm_rollback_spec.tools.cli", "size", *arguments, timeout=60)


def test_the_command_prints_the_review_in_human_units() -> None:
    finished = _size("--config", str(QWEN3_NEXT), "--num-drafts", "3", "--mtp-slots", "1")
    assert finished.returncode == 0, finished.stderr
    assert "GDN layers               36" in rejoined(finished.stdout)
    assert "replay row               24,832 B (24.2 KiB)" in rejoined(finished.stdout)
    assert "32 x 2 FP32), design seed-row" in rejoined(finished.stdout)
    assert "preflight reservation    5,363,712 B (5.1 MiB)" in rejoined(finished.stdout)
    assert "preflight covers pool    yes" in rejoined(finished.stdout)
    assert "Estimate, not part of the module's contract" in rejoined(finished.stdout)
    assert "  speculative state      618,135,552 B (589.5 MiB)" in rejoined(finished.stdout)


def test_the_command_reports_a_shortfall_and_json() -> None:
    finished = _size(
        "--gdn-layers", "36", "--key-heads", "16", "--key-head-dim", "128",
        "--value-heads", "32", "--value-head-dim", "128", "--conv-kernel", "4",
        "--num-drafts", "3", "--mtp-slots", "1", "--mtp-state-slots", "1", "--json", "-",
    )  # fmt: skip
    assert finished.returncode == 0, finished.stderr
    report = json.loads(finished.stdout)
    assert report["preflight_covers_pool"] is False
    assert report["shortfall_bytes"] == 2_681_856


_REVIEW: Final = ["--num-drafts", "3", "--mtp-slots", "1"]
_SAMPLE: Final = ["--config", str(QWEN3_NEXT)]


def test_size_reports_the_minimal_replay_row_as_a_review_note() -> None:
    finished = _size(*_SAMPLE, *_REVIEW, "--json", "-")
    assert finished.returncode == 0, finished.stderr
    replay = json.loads(finished.stdout)["replay"]
    # q, k and v before the conv (2 x 2048 + 4096 BF16) and g, beta (32 x 2 FP32): no z.
    assert replay["minimal_replay_row_bytes"] == 8_192 * 2 + 32 * 8 == 16_640
    assert replay["row_bytes"] == 24_832
    # 2 slots x (4 - 1) rows x 36 layers x 16640 B.
    assert replay["minimal_pool_ring_bytes"] == 3_594_240
    text = rejoined(_size(*_SAMPLE, *_REVIEW).stdout)
    assert "review note: minimal row 16,640 B (16.2 KiB) per token per layer without z" in text
    # Wherever a figure says minimal, it says what for.
    assert replay["minimal_for"] == (
        "design minimal-pre-conv: minimal among rows of pre-conv inputs that rebuild both the"
        " conv state and h from a per-verify checkpoint (the seed's row without z);"
        " RB-REPLAY-5; not minimal for replayssm, whose ring is L records whatever K"
    )
    assert f"; {replay['minimal_for']} (docs/replay.md)" in text


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            _REVIEW,
            ("give --config, or every dimension (missing --gdn-layers, --key-heads, "
            "--key-head-dim, --value-heads, --value-head-dim, --conv-kernel)"),
        ),
        (
            ["--config", "/nonexistent.json", *_REVIEW],
            "--config /nonexistent.json: No such file or directory",
        ),
        (
            [*_SAMPLE, "--gdn-layers", "3", *_REVIEW],
            "give either --config or the explicit dimensions, not both",
        ),
        (
            [*_SAMPLE, "--num-drafts", "x", "--mtp-slots", "1"],
            "--num-drafts: not a whole number: 'x'",
        ),
        (
            [*_SAMPLE, "--num-drafts", str(2**64 - 1), "--mtp-slots", "1"],
            ("the preflight reservation exceeds the runtime's 64-bit usize with "
            f"--num-drafts {2**64 - 1}, --mtp-slots 1, --config {QWEN3_NEXT}"),
        ),
        (
            [*_SAMPLE, "--num-drafts", "1", "--mtp-slots", str(2**64), "--mtp-state-slots", "1"],
            ("the pool allocation exceeds the runtime's 64-bit usize with "
            f"--num-drafts 1, --mtp-slots {2**64}, --config {QWEN3_NEXT}"),
        ),
        (
            [
                "--gdn-layers", "36", "--key-heads", "16", "--key-head-dim", "128",
                "--value-heads", "32", "--value-head-dim", "128", "--conv-kernel", "0",
                *_REVIEW,
            ],
            "--conv-kernel: must be at least 1, got 0",
        ),
        (
            ["--config", "/dev/zero", *_REVIEW],
            "--config /dev/zero: not a regular file",
        ),
        (
            ["--config", "/", *_REVIEW],
            ("--config /: not a regular file; a model's folder would hold a config.json,"
            " and this one has none"),
        ),
    ],
)  # fmt: skip
def test_bad_input_gets_one_clear_line_and_no_traceback(arguments: list[str], message: str) -> None:
    finished = _size(*arguments)
    assert finished.returncode == 2, finished.stdout + finished.stderr
    # One line: a bad flag as argparse finds it, or a bad value as the review finds it.
    assert finished.stderr in {
        f"ssm-rollback-spec: error: {message} (see ssm-rollback-spec size --help)\n",
        f"ssm-rollback-spec: error: {message}\n",
    }
    assert "Traceback" not in finished.stderr
