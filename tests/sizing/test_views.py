# SPDX-License-Identifier: MIT OR Apache-2.0
"""Engine views, per-GPU and batch figures, sweeps, output formats and plots.

Each engine fact is pinned as an exact integer on the example configs, with
the line of the released engine (vLLM 0.33.0, SGLang 0.5.23) it comes from.
The worked case is Qwen3-Next-80B-A3B with 3 drafts, ``--mtp-slots 1`` (the
module's 2 slots, the engines' 1 request) and TP 1 unless said otherwise: 36
GDN layers, conv_dim = 2 x 16 x 128 + 32 x 128 = 8192, h = 32 x 128 x 128 = 524288.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

from ssm_rollback_spec.sizing import dimensions as dims
from ssm_rollback_spec.sizing.dtypes import ConfigDtypes, Dtype, StateDtypes, dtypes_from_config
from ssm_rollback_spec.sizing.engines.replayssm import facts as replayssm
from ssm_rollback_spec.sizing.engines.sglang import facts as sglang
from ssm_rollback_spec.sizing.engines.vllm import facts as vllm
from ssm_rollback_spec.sizing.presentation import COLUMNS, rejoined
from ssm_rollback_spec.sizing.views import Model, Setup, View, size_view, sweep
from tests.child import run_module

ROOT: Final = Path(__file__).resolve().parents[2]
EXAMPLES: Final = ROOT / "examples"
QWEN3_NEXT: Final = EXAMPLES / "qwen3-next-80b-a3b-instruct.config.json"
QWEN3_5_27B: Final = EXAMPLES / "qwen3.5-27b.config.json"
QWEN3_5_35B_A3B: Final = EXAMPLES / "qwen3.5-35b-a3b.config.json"

BF16: Final = StateDtypes(recurrent=Dtype.BF16, conv=Dtype.BF16)
FP32_H: Final = StateDtypes(recurrent=Dtype.FP32, conv=Dtype.BF16)
UNEVEN_VALUE_HEADS: Final = [
    "--gdn-layers", "36", "--key-heads", "16", "--key-head-dim", "128",
    "--value-heads", "24", "--value-head-dim", "128", "--conv-kernel", "4",
    "--num-drafts", "3", "--mtp-slots", "1", "--tp", "16",
]  # fmt: skip
REVIEW: Final = ["--config", str(QWEN3_NEXT), "--num-drafts", "3", "--mtp-slots", "1"]
NO_PREFIX_CACHING: Final = Setup(options={vllm.NAME: vllm.VllmSetup(prefix_caching=False)})


def _load(path: Path) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def _model(path: Path = QWEN3_NEXT, *, tp: int = 1) -> Model:
    config = _load(path)
    attention = dims.attention_from_config(config)
    return Model(
        dimensions=dims.dimensions_from_config(config).per_gpu(tp),
        attention=None if attention is None else attention.per_gpu(tp),
        dtypes=dtypes_from_config(config),
        architecture=dims.architecture_from_config(config),
        attention_layers=dims.attention_layers_from_config(config),
        drafter_layers=dims.drafter_layers_from_config(config),
    )


def _size(*arguments: str) -> subprocess.CompletedProcess[str]:
    return run_module("ssm_rollback_spec.tools.cli", "size", *arguments, timeout=120)


# vLLM 0.33.0's dtypes (its grouping and pool: tests/sizing/test_vllm.py).


def test_vllm_keeps_the_qwen3_5_state_in_fp32() -> None:
    # vllm/model_executor/models/config.py:963-966, 1260-1262: the Qwen3.5 hook
    # sets mamba_ssm_cache_dtype from the config's mamba_ssm_dtype (float32).
    for path in (QWEN3_5_27B, QWEN3_5_35B_A3B):
        sized = size_view(View.VLLM, _model(path), num_drafts=3, requests=1)
        assert sized.dtypes == FP32_H


def test_qwen3_next_has_no_hook_and_stays_bf16() -> None:
    # The hook is registered for Qwen3.5 architectures only (config.py:1259-1262);
    # a config with no dtype reads as float32 (model_arch_config_convertor.py:236-237),
    # downcast to bfloat16 on SM80+ (vllm/config/model.py:2440-2442, cuda.py:258-260).
    sized = size_view(View.VLLM, _model(), num_drafts=3, requests=1)
    assert sized.dtypes == BF16
    assert sized.recurrent_bytes_per_layer == 1_048_576


def test_vllm_downcasts_a_float32_model_dtype() -> None:
    # vllm/config/model.py:2440-2442.
    found = ConfigDtypes(model=Dtype.FP32)
    assert vllm.vllm_dtypes(found, "Qwen3NextForCausalLM") == BF16


# SGLang 0.5.23, each fact on the example configs.


def test_sglang_keeps_five_states_per_request_with_the_radix_cache() -> None:
    # kv_cache_configurator.py:227, 3062-3088 (3 + the extra buffer's slots),
    # allocation_sizing.py:19 (2 with the overlap schedule),
    # arg_groups/overrides.py:412, 477-483 (auto -> extra_buffer for Qwen3-Next).
    assert sglang.SglangSetup().state_slots_per_request == 5
    sized = size_view(View.SGLANG, _model(), num_drafts=3, requests=1)
    # (524288 x 4 + 3 x 8192 x 2) x 36 x 5.
    assert sized.base_bytes_per_request == 2_146_304 * 36 * 5 == 386_334_720


def test_sglang_without_the_radix_cache_keeps_one_state() -> None:
    # kv_cache_configurator.py, lines 3063-3064: one state per request.
    setup = Setup(options={sglang.NAME: sglang.SglangSetup(radix_cache=False)})
    sized = size_view(View.SGLANG, _model(), num_drafts=3, requests=1, setup=setup)
    assert sized.base_bytes_per_request == 2_146_304 * 36 == 77_266_944


def test_sglang_pads_both_pools_by_one_slot() -> None:
    # memory_pool.py:724, 750 (size + 1), 886 (spec_state_size + 1).
    sized = size_view(View.SGLANG, _model(), num_drafts=3, requests=2)
    assert sized.base_padding_bytes == 2_146_304 * 36
    # D = 4: 4 h + (4 + 4 - 2) columns (memory_pool.py:610, 883-891).
    assert sized.speculative_bytes_per_request == (4 * 2_097_152 + 6 * 16_384) * 36
    assert sized.speculative_padding_bytes == sized.speculative_bytes_per_request
    assert sized.speculative_bytes == 3 * 305_528_832


def test_sglang_takes_mamba_ssm_dtype_for_h_and_bf16_for_conv() -> None:
    # configs/mamba_utils.py:68 (conv from SGLANG_MAMBA_CONV_DTYPE, bfloat16),
    # 71-91 (h float32 unless the config's mamba_ssm_dtype).
    found = ConfigDtypes(model=Dtype.FP16, ssm=Dtype.BF16)
    assert sglang.sglang_dtypes(found) == BF16
    assert sglang.sglang_dtypes(ConfigDtypes()) == FP32_H


def test_tp_2_halves_sglangs_speculative_state() -> None:
    sized = size_view(View.SGLANG, _model(tp=2), num_drafts=3, requests=1)
    assert sized.speculative_bytes_per_request == 305_528_832 // 2


# The ReplaySSM ring of SGLang 0.5.23.


def test_the_replayssm_record_is_24704_bytes_for_qwen3_next_at_tp_1() -> None:
    # configs/mamba_utils.py:145-152: d 32 x 128 x 2, k 16 x 128 x 2, g 32 x 4,
    # and the low parts of d and k (bf16 conv dtype).
    record = replayssm.replayssm_record_bytes(_model().dimensions, Dtype.BF16)
    assert record == 8_192 + 4_096 + 128 + 12_288 == 24_704


def test_an_fp32_conv_dtype_needs_no_low_parts() -> None:
    # configs/mamba_utils.py:147: d and k in fp32 and no low parts; the same bytes
    # as bf16 with low parts, which is why the engine keeps both halves.
    record = replayssm.replayssm_record_bytes(_model().dimensions, Dtype.FP32)
    assert record == 32 * 128 * 4 + 16 * 128 * 4 + 32 * 4 == 24_704
    half = replayssm.replayssm_record_bytes(_model().dimensions, Dtype.FP16)
    assert half == 24_704


def test_the_replayssm_view_drops_intermediate_h_and_keeps_the_conv_windows() -> None:
    # memory_pool.py:880-881 (no intermediate_ssm), 926-938 (conv windows stay),
    # 765-816 (L = 16 records over spec_state_size + 1 slots, exec_.py:585).
    sized = size_view(View.SGLANG_REPLAYSSM, _model(), num_drafts=3, requests=1)
    assert sized.replayssm_record_bytes == 24_704
    assert sized.replayssm_cache_len == 16
    assert sized.speculative_bytes_per_request == (6 * 16_384 + 16 * 24_704) * 36
    assert sized.speculative_padding_bytes == sized.speculative_bytes_per_request


# Naming: every view says the engine and version it follows.


@pytest.mark.parametrize(
    ("view", "engine"),
    [
        (View.VLLM, "vLLM 0.33.0"),
        (View.SGLANG, "SGLang 0.5.23"),
        (View.SGLANG_REPLAYSSM, "SGLang 0.5.23"),
        (View.MODULE, "this module (engine-neutral, spec/rollback.py)"),
    ],
)
def test_each_view_names_its_engine_and_version(view: View, engine: str) -> None:
    assert view.engine == engine
    finished = _size(*REVIEW, "--engine", view.value, "--json", "-")
    assert finished.returncode == 0, finished.stderr
    assert json.loads(finished.stdout)["snapshot"]["engine"] == engine
    text = rejoined(_size(*REVIEW, "--engine", view.value).stdout)
    assert f"snapshot state, {view.value} view, {engine} (docs/sizing.md)" in text
    markdown = _size(*REVIEW, "--engine", view.value, "--format", "markdown").stdout
    assert f"| follows | {engine} |" in markdown


def test_the_old_vllm_align_name_is_the_vllm_view() -> None:
    finished = _size(*REVIEW, "--engine", "vllm-align", "--json", "-")
    assert finished.returncode == 0, finished.stderr
    assert json.loads(finished.stdout)["snapshot"]["view"] == "vllm"


def test_the_text_report_shows_the_vllm_setup() -> None:
    finished = _size(*REVIEW, "--engine", "vllm", "--no-enable-prefix-caching")
    assert finished.returncode == 0, finished.stderr
    assert (
        "  setup                  vllm serve on SM90, --no-enable-prefix-caching"
        " (mamba_cache_mode none), speculative method mtp"
    ) in rejoined(finished.stdout)
    assert "  recurrent state h      1,048,576 B (1.0 MiB) per layer (524,288 x bf16)" in (
        finished.stdout
    )


@pytest.mark.parametrize(
    ("engine", "flag", "message"),
    [
        ("vllm", "--state-dtype", "vLLM 0.33.0 offers no fp8 state dtype (only fp32, fp16, bf16)"),
        (
            "sglang",
            "--state-dtype",
            "SGLang 0.5.23 offers no fp8 state dtype (only fp32, bf16, fp16)",
        ),
        (
            "sglang-replayssm",
            "--conv-dtype",
            "SGLang 0.5.23 offers no fp8 state dtype (only fp32, bf16, fp16)",
        ),
    ],
)
def test_an_engine_without_fp8_refuses_it_in_one_line(engine: str, flag: str, message: str) -> None:
    finished = _size(*REVIEW, "--engine", engine, flag, "fp8")
    assert finished.returncode == 2
    assert finished.stdout == ""
    assert finished.stderr == f"ssm-rollback-spec: error: {flag} fp8: {message}\n"


def test_the_module_view_takes_fp8() -> None:
    finished = _size(*REVIEW, "--state-dtype", "fp8", "--json", "-")
    assert finished.returncode == 0, finished.stderr
    # (524288 x 1 + 3 x 8192 x 2) x 4 x 36 x 2.
    assert json.loads(finished.stdout)["snapshot"]["speculative_bytes"] == 165_150_720


def test_a_sweep_refuses_fp8_when_it_shows_an_engine() -> None:
    finished = _size(*REVIEW[:2], "--num-drafts", "1-2", "--mtp-slots", "1", "--state-dtype", "fp8")
    assert finished.returncode == 2
    # The first engine the sweep meets that lacks fp8 is named: SGLang's ring.
    assert finished.stderr == (
        "ssm-rollback-spec: error: --state-dtype fp8: "
        "SGLang 0.5.23 offers no fp8 state dtype (only fp32, bf16, fp16)\n"
    )


def test_the_json_report_gives_base_and_speculation_apart_per_gpu() -> None:
    finished = _size(*REVIEW, "--engine", "sglang", "--tp", "2", "--format", "json")
    assert finished.returncode == 0, finished.stderr
    report = json.loads(finished.stdout)
    assert report["tp"] == 2
    snapshot = report["snapshot"]
    # One request and the speculative pool's padding slot.
    assert snapshot["speculative_bytes"] == 2 * 305_528_832 // 2
    assert snapshot["base_bytes"] == (5 + 1) * 77_266_944 // 2
    assert report["replay"]["pool_ring_bytes"] == 5_363_712 // 2


def test_batch_counts_requests_for_the_engines(tmp_path: Path) -> None:
    target = tmp_path / "figures.json"
    finished = _size(*REVIEW, "--engine", "sglang", "--batch", "8", "--json", str(target))
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout == ""
    report = json.loads(target.read_text(encoding="utf-8"))
    snapshot = report["snapshot"]
    assert snapshot["requests"] == 8
    assert snapshot["speculative_bytes"] == 9 * 305_528_832
    assert report["replay"]["batch_ring_bytes"] == 4 * 5_363_712


# Sweeps.


def test_a_sweep_row_holds_the_three_rings_and_every_view() -> None:
    (row,) = sweep(_model(), num_drafts=[3], slots=2, requests=1, views=list(View))
    assert row.seed_ring == (2_681_856, 5_363_712)
    assert row.minimal_ring == (1_797_120, 3_594_240)
    assert row.replayssm_ring == (16 * 24_704 * 36, 2 * 16 * 24_704 * 36)
    assert row.speculative[View.MODULE] == (309_067_776, 618_135_552)
    assert row.ratio(View.MODULE) == 309_067_776 / 2_681_856


def test_no_drafts_means_no_ring_and_no_ratio() -> None:
    (row,) = sweep(_model(), num_drafts=[0], slots=2, requests=1, views=[View.VLLM])
    assert row.seed_ring == (0, 0)
    assert row.ratio(View.VLLM) is None


def test_a_sweep_prints_its_answer_then_per_gpu_and_per_request_tables() -> None:
    finished = _size(*REVIEW[:2], "--num-drafts", "1,3,7", "--mtp-slots", "1")
    assert finished.returncode == 0, finished.stderr
    blocks = finished.stdout.split("\n\n")
    assert blocks[0].splitlines()[:3] == [
        (
            "Speculative state per GPU (--tp 1, 1 request), num_drafts 1 to 7,"
            " and (x) over the seed's ring"
        ),
        "  seed-row ring     1.7 MiB to 11.9 MiB",
        "  module            294.8 MiB to 1.2 GiB    172.9x to 98.8x",
    ]
    assert " ".join(blocks[1].splitlines()) == (
        "Per GPU (--tp 1): rings over 2 seed slots, views over 1 request (--mtp-slots) and"
        " their pools' padding; llama.cpp: in host memory, not on the GPU. The rings, then each"
        " view's speculative state and its ratio"
        " (x): one request's speculative state over one slot's seed ring. Designs:"
        " docs/replay.md; views: docs/sizing.md; exact bytes: --format json."
    )
    assert blocks[4] == "Per request; the ratios (x) as above."
    assert blocks[2].splitlines()[0].split() == [
        "num_drafts", "seed-row", "ring", "minimal-pre-conv", "ring", "replayssm", "ring",
    ]  # fmt: skip
    header, *rows = blocks[3].splitlines()
    assert header.split() == [
        "num_drafts", "module", "vllm", "sglang", "sglang-replayssm", "llama.cpp",
    ]  # fmt: skip
    assert [line.split()[0] for line in rows] == ["1", "3", "7"]
    assert "3  589.5 MiB 115.2x  138.4 MiB 54.1x" in rows[1]
    assert max(len(line) for line in finished.stdout.splitlines()) <= COLUMNS


def test_a_sweep_shows_only_the_view_engine_names() -> None:
    finished = _size(*REVIEW[:2], "--num-drafts", "3,4", "--mtp-slots", "1", "--engine", "vllm")
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.split("\n\n")[3].splitlines()[0].split() == ["num_drafts", "vllm"]


def test_a_sweep_in_markdown_is_a_table() -> None:
    finished = _size(*REVIEW[:2], "--num-drafts", "2-3", "--mtp-slots", "1", "--format", "markdown")
    assert finished.returncode == 0, finished.stderr
    blocks = finished.stdout.split("\n\n")
    # The answer as a table under its caption, then each scope's caption, rings and views.
    assert blocks[1].splitlines()[:3] == [
        "|  | per GPU | (x) | where |",
        "| --- | --- | --- | --- |",
        ("| seed-row ring | 3.4 MiB to 5.1 MiB |  |  |"),
    ]
    # Qwen3-Next's llama.cpp state is its saved copy, in host memory.
    assert blocks[1].splitlines()[-1] == (
        "| llama.cpp | 75.4 MiB to 75.4 MiB | 44.2x to 29.5x | in host memory, not on the GPU |"
    )
    states = blocks[4].splitlines()
    assert states[0] == ("| num_drafts | module | vllm | sglang | sglang-replayssm | llama.cpp |")
    assert states[3].startswith("| 3 | 589.5 MiB 115.2x | 138.4 MiB 54.1x |")


def test_a_sweep_in_json_gives_exact_bytes_and_the_engines() -> None:
    finished = _size(*REVIEW[:2], "--num-drafts", "1,3", "--mtp-slots", "1", "--json", "-")
    assert finished.returncode == 0, finished.stderr
    report = json.loads(finished.stdout)
    assert report["views"]["vllm"]["engine"] == "vLLM 0.33.0"
    assert report["views"]["sglang-replayssm"]["engine"] == "SGLang 0.5.23"
    assert report["replayssm_ring_follows"].startswith("SGLang 0.5.23, ")
    assert [row["num_drafts"] for row in report["rows"]] == [1, 3]
    row = report["rows"][1]
    assert row["seed_ring"] == {"per_request": 2_681_856, "per_gpu": 5_363_712}
    assert row["speculative"]["module"]["per_gpu"] == 618_135_552
    assert row["speculative"]["sglang"]["per_gpu"] == 2 * 305_528_832
    assert row["speculative"]["vllm"]["per_request"] == 3 * 5 * 15_335_424 - 3 * 2 * 14_155_776
    assert row["replayssm_ring"]["per_request"] == 16 * 24_704 * 36


# Configs.


def test_the_qwen3_5_27b_example_by_hand() -> None:
    dimensions = dims.dimensions_from_config(_load(QWEN3_5_27B))
    # 64 layers, every 4th full attention: 48 GDN layers.
    assert dimensions.num_gdn_layers == 48
    # 2 x 16 x 128 + 2 x 48 x 128.
    assert dimensions.qkvz_elems == 16_384
    assert dimensions.conv_dim == 10_240
    assert dimensions.recurrent_state_values == 786_432


def test_the_qwen3_5_35b_a3b_example_by_hand() -> None:
    dimensions = dims.dimensions_from_config(_load(QWEN3_5_35B_A3B))
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
    with pytest.raises(dims.NotGatedDeltaNetError) as raised:
        dims.dimensions_from_config(kimi)
    assert str(raised.value) == (
        "not a Gated DeltaNet config: it has 'linear_attn_config' "
        "(Kimi Linear's KDA layers), which this sizing does not model"
    )


def test_a_config_without_any_gdn_field_is_refused_naming_its_model_type() -> None:
    with pytest.raises(dims.NotGatedDeltaNetError) as raised:
        dims.dimensions_from_config({"model_type": "llama", "num_hidden_layers": 32})
    assert str(raised.value) == (
        "not a Gated DeltaNet config: none of the linear_* GDN fields (model_type 'llama')"
    )


def test_layer_types_without_linear_attention_are_refused() -> None:
    config = _load(QWEN3_NEXT) | {"layer_types": ["full_attention"] * 48}
    with pytest.raises(dims.NotGatedDeltaNetError) as raised:
        dims.dimensions_from_config(config)
    assert str(raised.value) == (
        "not a Gated DeltaNet config: no linear_attention (GDN) layer among its 48 layers"
    )


def test_tp_splits_heads_and_refuses_an_uneven_split() -> None:
    dimensions = dims.dimensions_from_config(_load(QWEN3_NEXT))
    assert dimensions.per_gpu(4).conv_dim == 2_048
    with pytest.raises(dims.TensorParallelError) as raised:
        dimensions.per_gpu(32)
    assert str(raised.value) == "32 does not divide the 16 key heads"


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
        assert b"GiB per GPU (log scale)" in data


@pytest.mark.parametrize("flag", ["--plot", "--json"])
def test_an_output_that_cannot_be_written_gets_one_line_and_no_report(
    tmp_path: Path, flag: str
) -> None:
    pytest.importorskip("matplotlib")
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    target = tmp_path / "a-file" / "sweep.svg"
    finished = _size(*REVIEW, flag, str(target))
    assert finished.returncode == 2
    assert finished.stdout == ""
    assert finished.stderr == f"ssm-rollback-spec: error: {flag} {target}: Not a directory\n"


def test_the_plot_and_the_report_make_their_missing_folders(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    plot, report = tmp_path / "a" / "b" / "sweep.svg", tmp_path / "c" / "d" / "sizes.json"
    finished = _size(*REVIEW, "--plot", str(plot), "--json", str(report))
    assert finished.returncode == 0, finished.stderr
    assert plot.read_bytes().startswith(b"<?xml")
    assert json.loads(report.read_text(encoding="utf-8"))


def test_nothing_but_plot_loads_matplotlib() -> None:
    code = (
        "import sys, ssm_rollback_spec.rollback, ssm_rollback_spec.tools.cli, "
        "ssm_rollback_spec.tools.check, ssm_rollback_spec.tools.size; "
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
        f"from ssm_rollback_spec.tools.cli import main; sys.exit(main({arguments!r}))"
    )
    finished = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert finished.returncode == 2
    assert finished.stderr == (
        "ssm-rollback-spec: error: --plot needs matplotlib: pip install 'ssm-rollback-spec[plot]'\n"
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
        ([*REVIEW, "--tp", "0"], "--tp: must be at least 1, got 0"),
        ([*REVIEW, "--batch", "0"], "--batch: must be at least 1, got 0"),
        (
            [*REVIEW[:2], "--num-drafts", "8-1", "--mtp-slots", "1"],
            "--num-drafts: a range runs upward, got '8-1'",
        ),
        (
            [*REVIEW[:2], "--num-drafts", "1-x", "--mtp-slots", "1"],
            "--num-drafts: not a whole number or range: '1-x'",
        ),
        (
            [*REVIEW[:2], "--num-drafts", "0-1024", "--mtp-slots", "1"],
            "--num-drafts: at most 1024 values, got '0-1024'",
        ),
        (
            [*REVIEW[:2], "--num-drafts", "1,3", "--mtp-slots", "1", "--num-intermediates", "4"],
            "--num-intermediates sizes one review; leave it out of a --num-drafts sweep",
        ),
        (
            [*REVIEW, "--format", "markdown", "--json", "-"],
            "--json: not allowed with argument --format",
        ),
        ([*REVIEW, "--plot", "sweep.pdf"], "--plot sweep.pdf: give a .png or .svg path"),
        (
            [*REVIEW[:2], "--num-drafts", f"1,{2**64}", "--mtp-slots", "1"],
            (
                "the replay ring exceeds the runtime's 64-bit usize with "
                f"--num-drafts {2**64}, --mtp-slots 1, --config {QWEN3_NEXT}"
            ),
        ),
        (
            # An engine's state no machine holds: one line, not a figure in EiB.
            [*REVIEW, "--engine", "sglang-replayssm", "--linear-replayssm-cache-len", str(2**50)],
            (
                "the sglang-replayssm view's state exceeds 2^64 - 1 bytes, a 64-bit address"
                f" space, with --num-drafts 3, --mtp-slots 1, --linear-replayssm-cache-len"
                f" {2**50}, --config {QWEN3_NEXT}"
            ),
        ),
        (
            [
                *REVIEW,
                "--engine",
                "llama.cpp",
                "--config",
                str(QWEN3_5_27B),
                "--num-drafts",
                str(2**62),
                "--mtp-state-slots",
                "0",
                "--num-intermediates",
                "1",
            ],
            (
                "the llama.cpp view's state exceeds 2^64 - 1 bytes, a 64-bit address space,"
                f" with --num-drafts {2**62}, --mtp-slots 1, --config {QWEN3_5_27B}"
            ),
        ),
        (
            [*REVIEW[:2], "--num-drafts", "1,2", "--linear-replayssm-cache-len", str(2**50)],
            (
                "the sglang-replayssm view's state exceeds 2^64 - 1 bytes, a 64-bit address"
                f" space, with --num-drafts 1, --linear-replayssm-cache-len {2**50},"
                f" --config {QWEN3_NEXT}"
            ),
        ),
    ],
)
def test_bad_flags_get_one_clear_line(arguments: list[str], message: str) -> None:
    finished = _size(*arguments)
    assert finished.returncode == 2, finished.stdout + finished.stderr
    # One line: a bad flag as argparse finds it, or a bad value as the review finds it.
    assert finished.stderr in {
        f"ssm-rollback-spec: error: {message} (see ssm-rollback-spec size --help)\n",
        f"ssm-rollback-spec: error: {message}\n",
    }
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


# SGLang's own readings of a config.


def test_sglang_counts_gdn_layers_from_the_interval_alone() -> None:
    # sglang/srt/configs/qwen3_next.py:260-277: layers_block_type ignores layer_types.
    config = _load(QWEN3_NEXT)
    config["layer_types"] = ["linear_attention"] * 46 + ["full_attention"] * 2
    assert dims.dimensions_from_config(config).num_gdn_layers == 46
    assert dims.interval_gdn_layers_from_config(config) == 36
    model = Model(
        dimensions=dims.dimensions_from_config(config),
        sglang_gdn_layers=dims.interval_gdn_layers_from_config(config),
    )
    sized = size_view(View.SGLANG, model, num_drafts=3, requests=1)
    assert sized.base_bytes_per_request == 5 * 2_146_304 * 36


def test_replayssm_keeps_h_in_fp32_unless_told() -> None:
    # attention_hook.py:506-515: --enable-linear-replayssm-spec sets
    # --mamba-ssm-dtype float32 when unset, over the config's bfloat16.
    model = Model(dimensions=_model().dimensions, dtypes=ConfigDtypes(ssm=Dtype.BF16))
    assert size_view(View.SGLANG, model, num_drafts=3, requests=1).dtypes.recurrent is Dtype.BF16
    replay = size_view(View.SGLANG_REPLAYSSM, model, num_drafts=3, requests=1)
    assert replay.dtypes.recurrent is Dtype.FP32


def test_sglang_replaces_an_fp8_config_dtype_by_fp32() -> None:
    # configs/mamba_utils.py:85-92: a config dtype it does not take is warned about.
    assert sglang.sglang_dtypes(ConfigDtypes(ssm=Dtype.FP8)).recurrent is Dtype.FP32


def test_a_qwen3_5_config_without_text_config_is_refused() -> None:
    config = _load(QWEN3_5_27B)
    text = config.pop("text_config")
    assert isinstance(text, dict)
    config.update(text)
    config["model_type"] = "qwen3_5"
    with pytest.raises(dims.ConfigError) as raised:
        dims.dimensions_from_config(config)
    assert str(raised.value) == (
        "the config's model_type is 'qwen3_5' but it has no 'text_config': both engines"
        " would size the text model from transformers' class defaults, not from these fields"
    )


def test_value_heads_that_are_not_a_multiple_of_the_key_heads_are_refused() -> None:
    config = _load(QWEN3_NEXT)
    config["linear_num_value_heads"] = 24
    config["linear_num_key_heads"] = 16
    with pytest.raises(dims.ConfigError) as raised:
        dims.dimensions_from_config(config)
    assert str(raised.value) == (
        "the config's 'linear_num_value_heads' (24) is not a multiple of its"
        " 'linear_num_key_heads' (16)"
    )
