# SPDX-License-Identifier: MIT OR Apache-2.0
"""Engine views, per-GPU and batch figures, sweeps, output formats and plots.

Every worked figure is Qwen3-Next-80B-A3B with 3 drafts (k = 4), the 2 state
slots that ``--mtp-slots 1`` gives, and TP 1 unless said otherwise: 36 GDN
layers, conv_dim = 2 x 16 x 128 + 32 x 128 = 8192, h = 32 x 128 x 128 = 524288.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

from spec.tools import sizing
from tests.child import run_module

ROOT: Final = Path(__file__).resolve().parents[1]
EXAMPLES: Final = ROOT / "examples"
QWEN3_NEXT: Final = EXAMPLES / "qwen3-next-80b-a3b-instruct.config.json"
QWEN3_5_27B: Final = EXAMPLES / "qwen3.5-27b.config.json"
QWEN3_5_35B_A3B: Final = EXAMPLES / "qwen3.5-35b-a3b.config.json"

BF16: Final = sizing.StateDtypes(recurrent="bf16", conv="bf16")
FP32_H: Final = sizing.StateDtypes(recurrent="fp32", conv="bf16")
UNEVEN_VALUE_HEADS: Final = [
    "--gdn-layers", "36", "--key-heads", "16", "--key-head-dim", "128",
    "--value-heads", "24", "--value-head-dim", "128", "--conv-kernel", "4",
    "--num-drafts", "3", "--mtp-slots", "1", "--tp", "16",
]  # fmt: skip
REVIEW: Final = ["--config", str(QWEN3_NEXT), "--num-drafts", "3", "--mtp-slots", "1"]


def _load(path: Path) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def _snapshot(
    engine: sizing.Engine, dtypes: sizing.StateDtypes, *, tp: int = 1
) -> sizing.SnapshotSizing:
    dimensions = sizing.dimensions_from_config(_load(QWEN3_NEXT)).per_gpu(tp)
    return sizing.size_snapshot(dimensions, engine, num_drafts=3, slots=2, dtypes=dtypes)


def _size(*arguments: str) -> subprocess.CompletedProcess[str]:
    return run_module("spec.tools.cli", "size", *arguments, timeout=120)


# The worked figures, against the public arithmetic.


def test_vllm_with_bf16_states_holds_four_widened_blocks() -> None:
    # Per block and layer: (3 + 3) x 8192 x 2 + 524288 x 2 = 1146880 B;
    # x (1 + 3) blocks x 36 layers x 2 slots.
    assert _snapshot(sizing.Engine.VLLM, BF16).total_bytes == 330_301_440


def test_vllm_with_an_fp32_h_state() -> None:
    # (98304 + 524288 x 4) x 4 x 36 x 2.
    assert _snapshot(sizing.Engine.VLLM, FP32_H).total_bytes == 632_291_328


def test_vllm_align_mode_holds_one_block_more() -> None:
    # 2195456 x (2 + 3) x 36 x 2.
    assert _snapshot(sizing.Engine.VLLM_ALIGN, FP32_H).total_bytes == 790_364_160


def test_sglang_keeps_d_h_states_and_one_shared_conv_window() -> None:
    snapshot = _snapshot(sizing.Engine.SGLANG, FP32_H)
    # D = 4: (4 x 524288 x 4 + (4 + 4 - 2) x 8192 x 2) x 36 x 2.
    assert snapshot.speculative_bytes == 611_057_664
    # (524288 x 4 + 3 x 8192 x 2) x 36 x 2.
    assert snapshot.base_bytes == 154_533_888


def test_the_dense_layout_is_the_module_view() -> None:
    assert _snapshot(sizing.Engine.MODULE, FP32_H).speculative_bytes == 618_135_552


def test_tp_2_halves_sglangs_figure() -> None:
    assert _snapshot(sizing.Engine.SGLANG, FP32_H, tp=2).speculative_bytes == 305_528_832


def test_the_vllm_base_is_one_unwidened_block_and_the_rest_is_speculation() -> None:
    snapshot = _snapshot(sizing.Engine.VLLM, BF16)
    # (524288 x 2 + 3 x 8192 x 2) x 36 x 2.
    assert snapshot.base_bytes == 79_036_416
    assert snapshot.speculative_bytes == 330_301_440 - 79_036_416


# Dtypes: what each engine reads from the config.


def test_vllm_takes_the_model_dtype_for_both_states() -> None:
    found = sizing.ConfigDtypes(model="fp16", ssm="fp32")
    assert sizing.engine_dtypes(sizing.Engine.VLLM, found) == sizing.StateDtypes("fp16", "fp16")


def test_vllm_assumes_bf16_when_the_config_names_no_dtype() -> None:
    chosen = sizing.engine_dtypes(sizing.Engine.VLLM_ALIGN, sizing.ConfigDtypes())
    assert chosen == BF16


def test_sglang_takes_mamba_ssm_dtype_for_h_and_bf16_for_conv() -> None:
    found = sizing.ConfigDtypes(model="fp16", ssm="bf16")
    assert sizing.engine_dtypes(sizing.Engine.SGLANG, found) == BF16
    assert sizing.engine_dtypes(sizing.Engine.SGLANG, sizing.ConfigDtypes()) == FP32_H


def test_the_flags_override_every_engine() -> None:
    chosen = sizing.engine_dtypes(
        sizing.Engine.SGLANG, sizing.ConfigDtypes(ssm="fp32"), recurrent="fp8", conv="fp16"
    )
    assert chosen == sizing.StateDtypes(recurrent="fp8", conv="fp16")


def test_a_qwen3_5_config_gives_its_dtypes_through_text_config() -> None:
    found = sizing.dtypes_from_config(_load(QWEN3_5_27B))
    assert found == sizing.ConfigDtypes(model="bf16", ssm="fp32")


def test_an_unknown_config_dtype_is_refused_by_name() -> None:
    with pytest.raises(sizing.ConfigError) as raised:
        sizing.dtypes_from_config({"torch_dtype": "float64"})
    assert str(raised.value) == (
        "the config's 'torch_dtype' is 'float64', not one of "
        "'float32', 'bfloat16', 'float16', 'float8_e4m3fn'"
    )


# Configs.


def test_the_qwen3_5_27b_example_by_hand() -> None:
    dimensions = sizing.dimensions_from_config(_load(QWEN3_5_27B))
    # 64 layers, every 4th full attention: 48 GDN layers.
    assert dimensions.num_gdn_layers == 48
    # 2 x 16 x 128 + 2 x 48 x 128.
    assert dimensions.qkvz_elems == 16_384
    assert dimensions.conv_dim == 10_240
    assert dimensions.recurrent_state_values == 786_432


def test_the_qwen3_5_35b_a3b_example_by_hand() -> None:
    dimensions = sizing.dimensions_from_config(_load(QWEN3_5_35B_A3B))
    assert dimensions.num_gdn_layers == 30
    assert dimensions.qkvz_elems == 12_288
    assert dimensions.recurrent_state_values == 524_288


@pytest.mark.parametrize("path", [QWEN3_NEXT, QWEN3_5_27B, QWEN3_5_35B_A3B])
def test_every_example_config_cites_its_source(path: Path) -> None:
    source = _load(path)["_source"]
    assert isinstance(source, str)
    assert "Qwen/" in source


def test_kimi_linear_is_refused_as_another_family() -> None:
    kimi = {"model_type": "kimi_linear", "linear_attn_config": {"kda_layers": [1, 2, 3]}}
    with pytest.raises(sizing.NotGatedDeltaNetError) as raised:
        sizing.dimensions_from_config(kimi)
    assert str(raised.value) == (
        "not a Gated DeltaNet config: it has 'linear_attn_config' "
        "(Kimi Linear's KDA layers), which this sizing does not model"
    )


def test_a_config_without_any_gdn_field_is_refused_naming_its_model_type() -> None:
    with pytest.raises(sizing.NotGatedDeltaNetError) as raised:
        sizing.dimensions_from_config({"model_type": "llama", "num_hidden_layers": 32})
    assert str(raised.value) == (
        "not a Gated DeltaNet config: none of the linear_* GDN fields (model_type 'llama')"
    )


def test_layer_types_without_linear_attention_are_refused() -> None:
    config = _load(QWEN3_NEXT) | {"layer_types": ["full_attention"] * 48}
    with pytest.raises(sizing.NotGatedDeltaNetError) as raised:
        sizing.dimensions_from_config(config)
    assert str(raised.value) == (
        "not a Gated DeltaNet config: no linear_attention (GDN) layer among its 48 layers"
    )


def test_tp_splits_heads_and_refuses_an_uneven_split() -> None:
    dimensions = sizing.dimensions_from_config(_load(QWEN3_NEXT))
    assert dimensions.per_gpu(4).conv_dim == 2_048
    with pytest.raises(sizing.TensorParallelError) as raised:
        dimensions.per_gpu(32)
    assert str(raised.value) == "32 does not divide the 16 key heads"


# Sweeps.


def test_a_sweep_row_holds_the_ring_and_every_view() -> None:
    dimensions = sizing.dimensions_from_config(_load(QWEN3_NEXT))
    dtypes = dict.fromkeys(sizing.Engine, FP32_H)
    (row,) = sizing.sweep(dimensions, num_drafts=[3], requests=2, dtypes=dtypes)
    assert row.replay_ring_bytes == 5_363_712
    assert row.snapshot_bytes[sizing.Engine.MODULE] == 618_135_552
    assert row.snapshot_bytes[sizing.Engine.SGLANG] == 611_057_664
    assert row.ratio(sizing.Engine.MODULE) == 618_135_552 / 5_363_712


def test_no_drafts_means_no_ring_and_no_ratio() -> None:
    dimensions = sizing.dimensions_from_config(_load(QWEN3_NEXT))
    (row,) = sizing.sweep(dimensions, num_drafts=[0], requests=2, dtypes={sizing.Engine.VLLM: BF16})
    assert row.replay_ring_bytes == 0
    assert row.ratio(sizing.Engine.VLLM) is None


# The command, once per format.


def test_the_text_report_shows_the_chosen_engine_view() -> None:
    finished = _size(*REVIEW, "--engine", "vllm")
    assert finished.returncode == 0, finished.stderr
    assert "snapshot state, vllm view" in finished.stdout
    assert "  base + speculative     330,301,440 B (315.0 MiB)" in finished.stdout
    assert "  recurrent state h      1,048,576 B (1.0 MiB) per layer (524,288 x bf16)" in (
        finished.stdout
    )


def test_the_markdown_report_is_a_table_of_the_same_figures() -> None:
    finished = _size(*REVIEW, "--engine", "vllm", "--state-dtype", "fp32", "--format", "markdown")
    assert finished.returncode == 0, finished.stderr
    assert "| figure | value |" in finished.stdout
    assert "| base + speculative | 632,291,328 B (603.0 MiB) |" in finished.stdout


def test_the_json_report_gives_base_and_speculation_apart_per_gpu() -> None:
    finished = _size(*REVIEW, "--engine", "sglang", "--tp", "2", "--format", "json")
    assert finished.returncode == 0, finished.stderr
    report = json.loads(finished.stdout)
    assert report["tp"] == 2
    assert report["snapshot"]["speculative_bytes"] == 305_528_832
    assert report["snapshot"]["base_bytes"] == 154_533_888 // 2
    assert report["replay"]["pool_ring_bytes"] == 5_363_712 // 2


def test_json_path_writes_the_file_and_batch_scales_per_request(tmp_path: Path) -> None:
    target = tmp_path / "figures.json"
    finished = _size(
        *REVIEW, "--engine", "vllm-align", "--state-dtype", "fp32", "--batch", "8",
        "--json", str(target),
    )  # fmt: skip
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout == ""
    report = json.loads(target.read_text(encoding="utf-8"))
    # 790364160 B is two requests (slots); a batch of 8 is four times that.
    snapshot = report["snapshot"]
    assert snapshot["batch_base_bytes"] + snapshot["batch_speculative_bytes"] == 4 * 790_364_160
    assert report["replay"]["batch_ring_bytes"] == 4 * 5_363_712


def test_a_sweep_prints_one_row_per_draft_count() -> None:
    finished = _size(*REVIEW[:2], "--num-drafts", "1,3,7", "--mtp-slots", "1")
    assert finished.returncode == 0, finished.stderr
    lines = finished.stdout.splitlines()
    assert lines[2].split() == [
        "num_drafts", "replay", "ring", "module", "snapshot", "vllm", "snapshot",
        "vllm-align", "snapshot", "sglang", "snapshot",
    ]  # fmt: skip
    assert [line.split()[0] for line in lines[3:]] == ["1", "3", "7"]
    assert "5.1 MiB  589.5 MiB (115.2x)" in lines[4]


def test_a_sweep_shows_only_the_view_engine_names() -> None:
    finished = _size(*REVIEW[:2], "--num-drafts", "3,4", "--mtp-slots", "1", "--engine", "vllm")
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.splitlines()[2].split() == [
        "num_drafts", "replay", "ring", "vllm", "snapshot",
    ]  # fmt: skip


def test_a_sweep_in_markdown_is_a_table() -> None:
    finished = _size(*REVIEW[:2], "--num-drafts", "2-3", "--mtp-slots", "1", "--format", "markdown")
    assert finished.returncode == 0, finished.stderr
    lines = finished.stdout.splitlines()
    assert lines[2] == (
        "| num_drafts | replay ring | module snapshot | vllm snapshot "
        "| vllm-align snapshot | sglang snapshot |"
    )
    assert lines[5].startswith("| 3 | 5.1 MiB | 589.5 MiB (115.2x) |")


def test_a_sweep_in_json_gives_exact_bytes() -> None:
    finished = _size(*REVIEW[:2], "--num-drafts", "1,3", "--mtp-slots", "1", "--json", "-")
    assert finished.returncode == 0, finished.stderr
    report = json.loads(finished.stdout)
    assert [row["num_drafts"] for row in report["rows"]] == [1, 3]
    row = report["rows"][1]
    assert row["replay_ring_bytes"] == 5_363_712
    assert row["snapshot_bytes"]["module"] == 618_135_552
    assert row["snapshot_bytes"]["sglang"] == 611_057_664
    assert row["snapshot_bytes"]["vllm"] == 330_301_440 - 79_036_416


# Plots.


@pytest.mark.parametrize(("suffix", "magic"), [(".png", b"\x89PNG\r\n\x1a\n"), (".svg", b"<svg")])
def test_the_plot_is_a_real_image(tmp_path: Path, suffix: str, magic: bytes) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / f"sweep{suffix}"
    finished = _size(*REVIEW[:2], "--num-drafts", "1-8", "--mtp-slots", "1", "--plot", str(target))
    assert finished.returncode == 0, finished.stderr
    data = target.read_bytes()
    assert len(data) > 10_000
    if suffix == ".png":
        assert data.startswith(magic)
    else:
        assert magic in data[:2_000]
        # matplotlib keeps each text as a comment beside its glyph paths.
        assert b"drafts per step (num_drafts)" in data
        assert b"bytes per GPU (log scale)" in data


def test_a_plot_that_cannot_be_written_gets_one_line_and_no_report(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / "missing" / "sweep.png"
    finished = _size(*REVIEW, "--plot", str(target))
    assert finished.returncode == 2
    assert finished.stdout == ""
    assert finished.stderr == (
        f"ssm-rollback-spec: error: --plot {target}: No such file or directory\n"
    )


def test_nothing_but_plot_loads_matplotlib() -> None:
    code = (
        "import sys, spec.rollback, spec.tools.cli, spec.tools.check, spec.tools.size; "
        "print('matplotlib' in sys.modules)"
    )
    finished = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert finished.stdout.strip() == "False", finished.stderr


def test_a_plot_without_matplotlib_says_what_to_install(tmp_path: Path) -> None:
    arguments = ["size", *REVIEW, "--plot", str(tmp_path / "p.png")]
    code = (
        "import sys; sys.modules['matplotlib'] = None; "
        f"from spec.tools.cli import main; sys.exit(main({arguments!r}))"
    )
    finished = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert finished.returncode == 2
    assert finished.stderr == (
        "ssm-rollback-spec: error: --plot needs matplotlib: install ssm-rollback-spec[plot]\n"
    )


# Bad input: one line, exit 2, naming what the user typed.


def _kimi(tmp_path: Path) -> str:
    path = tmp_path / "kimi.json"
    path.write_text(json.dumps({"linear_attn_config": {"kda_layers": [1]}}), encoding="utf-8")
    return str(path)


def _bad_dtype(tmp_path: Path) -> str:
    path = tmp_path / "f64.json"
    path.write_text(json.dumps(_load(QWEN3_NEXT) | {"torch_dtype": "float64"}), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            [*REVIEW, "--tp", "3"],
            f"--tp 3 does not divide the 16 key heads of --config {QWEN3_NEXT}",
        ),
        (
            UNEVEN_VALUE_HEADS,
            "--tp 16 does not divide the 24 value heads",
        ),
        ([*REVIEW, "--tp", "0"], "argument --tp: must be at least 1, got 0"),
        ([*REVIEW, "--batch", "0"], "argument --batch: must be at least 1, got 0"),
        (
            [*REVIEW[:2], "--num-drafts", "8-1", "--mtp-slots", "1"],
            "argument --num-drafts: a range runs upward, got '8-1'",
        ),
        (
            [*REVIEW[:2], "--num-drafts", "1-x", "--mtp-slots", "1"],
            "argument --num-drafts: not a whole number or range: '1-x'",
        ),
        (
            [*REVIEW[:2], "--num-drafts", "0-1024", "--mtp-slots", "1"],
            "argument --num-drafts: at most 1024 values, got '0-1024'",
        ),
        (
            [*REVIEW[:2], "--num-drafts", "1,3", "--mtp-slots", "1", "--num-intermediates", "4"],
            "--num-intermediates sizes one review; leave it out of a --num-drafts sweep",
        ),
        (
            [*REVIEW, "--format", "markdown", "--json", "-"],
            "argument --json: not allowed with argument --format",
        ),
        ([*REVIEW, "--plot", "sweep.pdf"], "--plot sweep.pdf: give a .png or .svg path"),
        (
            [*REVIEW[:2], "--num-drafts", f"1,{2**64}", "--mtp-slots", "1"],
            (
                "the replay ring exceeds the runtime's 64-bit usize with "
                f"--num-drafts {2**64}, --mtp-slots 1, --config {QWEN3_NEXT}"
            ),
        ),
    ],
)
def test_bad_flags_get_one_clear_line(arguments: list[str], message: str) -> None:
    finished = _size(*arguments)
    assert finished.returncode == 2, finished.stdout + finished.stderr
    assert finished.stderr.splitlines()[-1].partition(": error: ")[2] == message
    assert "Traceback" not in finished.stderr


def test_a_kimi_linear_config_gets_one_clear_line(tmp_path: Path) -> None:
    path = _kimi(tmp_path)
    finished = _size("--config", path, "--num-drafts", "3", "--mtp-slots", "1")
    assert finished.returncode == 2
    assert finished.stderr == (
        f"ssm-rollback-spec: error: --config {path}: not a Gated DeltaNet config: it has "
        "'linear_attn_config' (Kimi Linear's KDA layers), which this sizing does not model\n"
    )


def test_an_unknown_config_dtype_gets_one_clear_line(tmp_path: Path) -> None:
    path = _bad_dtype(tmp_path)
    finished = _size("--config", path, "--num-drafts", "3", "--mtp-slots", "1")
    assert finished.returncode == 2
    assert finished.stderr == (
        f"ssm-rollback-spec: error: --config {path}: the config's 'torch_dtype' is 'float64', "
        "not one of 'float32', 'bfloat16', 'float16', 'float8_e4m3fn'\n"
    )
