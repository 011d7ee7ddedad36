# SPDX-License-Identifier: MIT OR Apache-2.0
"""Run vLLM 0.33.0's own KV-cache planner on CPU, in the planners venv, and print its figures.

``python tests/planners/vllm_planner.py CASES.json`` reads a list of cases
(``config``, ``tp``, ``drafts``, ``kv_cache_memory_bytes``, ``max_model_len``,
and optionally ``prefix_caching``, ``method``, ``kv_cache_dtype``,
``max_num_seqs`` and ``catch_assert``) and prints one JSON object per case; a case with
``"only": "max_model_len"`` stops after ``EngineArgs.create_engine_config``
and prints what vLLM's length check said (:func:`length_check`). No weights are loaded
and no GPU is needed. What stands in for the hardware, and nothing else:

- the CUDA extension modules (``vllm/*.so``) are empty modules, and the four
  capability-query ops of ``vllm._custom_ops`` answer for SM 9.0;
- the CUDA platform's hardware probes say SM 9.0 (an H200), and
  ``current_device`` is the meta device;
- the tensor-parallel groups are rank 0's view of ``tp`` ranks;
- model inspection runs in this process (vLLM runs it in a child, which would
  not have these stand-ins), and torchvision, which only the Qwen3.5
  processor's imports name, is a module of placeholders.

Then vLLM's own chain: ``EngineArgs.create_engine_config``; the model's mixer
layers (its GDN and attention layers, and the MTP drafter's attention layers;
a GraniteMoeHybrid config's Mamba-2 and attention layers, for vLLM #57721;
an LFM2 config's short-conv and attention layers)
built on the meta device, as the model classes build them;
``update_block_size_for_backend``; the runner's ``get_kv_cache_spec``;
``resolve_kv_cache_layout``; ``get_global_kv_cache_groups``; the worker's
``reserve_mm_ipc_gpu_memory`` on ``--kv-cache-memory-bytes``;
``get_kv_cache_configs``; ``get_kv_cache_capacity``; and the runner's CUDA-graph
check (``CompilationConfig.resolve_cudagraph_mode_and_sizes``, with each KV-cache
group's backend's CUDA-graph support, as ``_check_and_update_cudagraph_mode``
gathers it), which refuses ``max_num_seqs`` above the Mamba cache blocks.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import sys
import tempfile
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

# The planners run as scripts, this folder first on sys.path, so the shared module is
# the top-level ``driver`` there; mypy checks the tree as packages, where it is this.
if TYPE_CHECKING:
    from tests.planners.driver import install_placeholders, plan_cases
else:
    from driver import install_placeholders, plan_cases

__all__ = ["length_check", "main", "plan"]

#: SM 9.0 as ``major * 10 + minor``, the capability the stand-ins report.
_SM90: Final = 90
#: An H200's memory, which only the platform's probes read.
_H200_BYTES: Final = 143_771_566_080
#: The capability-query ops vLLM calls while importing its quantization layers.
_CAPABILITY_OPS: Final = (
    "cutlass_scaled_mm_supports_fp4",
    "cutlass_scaled_mm_supports_fp8",
    "cutlass_scaled_mm_supports_block_fp8",
    "cutlass_group_gemm_supported",
)
#: The parallel groups vLLM's layers ask for, and whether they span the TP ranks.
_GROUPS: Final = {
    "_TP": True,
    "_EP": True,
    "_PP": False,
    "_DCP": False,
    "_PCP": False,
    "_DP": False,
    "_EPLB": False,
}


def _stand_ins() -> None:
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # triton's driver check then lets it import
    root = Path(str(importlib.util.find_spec("vllm").origin)).parent  # type: ignore[union-attr]
    for library in root.rglob("*.so"):
        name = library.relative_to(root.parent).as_posix().split(".")[0].replace("/", ".")
        sys.modules[name] = types.ModuleType(name)
    install_placeholders("torchvision")

    import torch  # noqa: PLC0415

    library = torch.library.Library("_C", "FRAGMENT")
    for op in _CAPABILITY_OPS:
        library.define(f"{op}(int cuda_device_capability) -> bool")
        library.impl(op, lambda capability: capability == _SM90, "CompositeExplicitAutograd")
    _KEPT.append(library)

    from vllm import platforms  # noqa: PLC0415
    from vllm.model_executor.models import registry  # noqa: PLC0415
    from vllm.platforms.cuda import NonNvmlCudaPlatform  # noqa: PLC0415
    from vllm.platforms.interface import DeviceCapability  # noqa: PLC0415

    class _Sm90(NonNvmlCudaPlatform):  # type: ignore[misc]
        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> Any:
            del device_id
            return DeviceCapability(major=9, minor=0)

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            del device_id
            return "NVIDIA H200"

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            del device_id
            return _H200_BYTES

        @classmethod
        def is_fully_connected(cls, physical_device_ids: list[int]) -> bool:
            del physical_device_ids
            return True

        @classmethod
        def current_device(cls) -> Any:
            return torch.device("meta")

        @classmethod
        def device_count(cls) -> int:
            return 8

    platforms._current_platform = _Sm90()  # noqa: SLF001
    registry._run_in_subprocess = lambda function: function()  # noqa: SLF001


#: Objects that must outlive ``_stand_ins`` (a torch library unregisters when collected).
_KEPT: Final[list[object]] = []


@dataclasses.dataclass
class _Group:
    """Rank 0's view of one parallel group of ``world_size`` ranks."""

    world_size: int
    rank_in_group: int = 0
    rank: int = 0
    local_rank: int = 0
    is_first_rank: bool = True
    device_group: object = None
    cpu_group: object = None
    unique_name: str = "rank0"

    @property
    def ranks(self) -> list[int]:
        """Every rank of the group."""
        return list(range(self.world_size))

    @property
    def is_last_rank(self) -> bool:
        """Whether rank 0 is the last rank."""
        return self.world_size == 1


def _mixers(
    vllm_config: Any,
    model_config: Any,
    text: Any,
    prefix: str,
    layer_types: list[tuple[int, str]],
) -> None:
    # As Qwen3NextDecoderLayer (qwen3_next.py:500-516) and Qwen3_5DecoderLayer
    # (qwen3_5.py:149-166) build their mixers.
    from vllm.model_executor.layers.mamba.gdn.qwen_gdn_linear_attn import (  # noqa: PLC0415
        QwenGatedDeltaNetAttention,
    )
    from vllm.model_executor.models.qwen3_5 import mrope_positions_factor  # noqa: PLC0415
    from vllm.model_executor.models.qwen3_next import Qwen3NextAttention  # noqa: PLC0415

    if text.model_type == "granitemoehybrid":
        _granite_mixers(vllm_config, model_config, text, prefix, layer_types)
        return
    if text.model_type == "lfm2":
        _lfm2_mixers(vllm_config, model_config, text, prefix, layer_types)
        return
    qwen3_5 = str(text.model_type).startswith("qwen3_5")
    for index, kind in layer_types:
        if kind == "linear_attention":
            QwenGatedDeltaNetAttention(
                text,
                vllm_config=vllm_config,
                prefix=f"{prefix}.{index}.linear_attn",
                gqa_interleaved_layout=not qwen3_5,
            )
            continue
        extra = {"mrope_positions_factor": mrope_positions_factor(vllm_config)} if qwen3_5 else {}
        Qwen3NextAttention(
            text,
            model_config=model_config,
            cache_config=vllm_config.cache_config,
            quant_config=None,
            prefix=f"{prefix}.{index}.self_attn",
            **extra,
        )


def _granite_mixers(
    vllm_config: Any,
    model_config: Any,
    text: Any,
    prefix: str,
    layer_types: list[tuple[int, str]],
) -> None:
    # As GraniteMoeHybridMambaDecoderLayer and GraniteMoeHybridAttentionDecoderLayer
    # (granitemoehybrid.py:57-88, 145-164) build their mixers.
    from vllm.model_executor.layers.mamba.mamba_mixer2 import MambaMixer2  # noqa: PLC0415
    from vllm.model_executor.models.granitemoehybrid import (  # noqa: PLC0415
        GraniteMoeHybridAttention,
    )

    for index, kind in layer_types:
        if kind != "full_attention":
            MambaMixer2(
                hidden_size=text.hidden_size,
                ssm_state_size=text.mamba_d_state,
                conv_kernel_size=text.mamba_d_conv,
                intermediate_size=text.mamba_expand * text.hidden_size,
                use_conv_bias=text.mamba_conv_bias,
                use_bias=text.mamba_proj_bias,
                n_groups=text.mamba_n_groups,
                num_heads=text.mamba_n_heads,
                head_dim=text.mamba_d_head,
                rms_norm_eps=text.rms_norm_eps,
                activation=text.hidden_act,
                model_config=model_config,
                cache_config=vllm_config.cache_config,
                quant_config=None,
                prefix=f"{prefix}.{index}.mixer",
            )
            continue
        GraniteMoeHybridAttention(
            text,
            model_config=model_config,
            cache_config=vllm_config.cache_config,
            quant_config=None,
            prefix=f"{prefix}.{index}.self_attn",
        )


def _lfm2_mixers(
    vllm_config: Any,
    model_config: Any,
    text: Any,
    prefix: str,
    layer_types: list[tuple[int, str]],
) -> None:
    # As Lfm2AttentionDecoderLayer and Lfm2ShortConvDecoderLayer (lfm2.py:196-225,
    # 335-364) build their mixers, as Lfm2Model picks them (lfm2.py:435-437).
    from vllm.model_executor.layers.mamba.short_conv import ShortConv  # noqa: PLC0415
    from vllm.model_executor.models.lfm2 import Lfm2Attention  # noqa: PLC0415

    for index, kind in layer_types:
        if kind != "full_attention":
            ShortConv(
                config=text,
                dim=text.conv_dim,
                layer_idx=index,
                model_config=model_config,
                cache_config=vllm_config.cache_config,
                quant_config=None,
                prefix=f"{prefix}.{index}.short_conv",
            )
            continue
        Lfm2Attention(
            config=text,
            layer_idx=index,
            hidden_size=text.hidden_size,
            num_heads=text.num_attention_heads,
            num_kv_heads=text.num_key_value_heads,
            max_position_embeddings=getattr(text, "max_position_embeddings", 8192),
            cache_config=vllm_config.cache_config,
            quant_config=None,
            prefix=f"{prefix}.{index}.self_attn",
        )


def length_check(case: dict[str, Any]) -> dict[str, Any]:
    """What vLLM's own ``--max-model-len`` check says of one case's length.

    ``EngineArgs.create_engine_config`` builds the ``ModelConfig``, whose
    ``get_and_verify_max_len`` (vllm/config/model.py:2147-2173) calls
    ``_get_and_verify_max_len`` (2545-2683): a length above the one derived from
    the config, and above the config's ``model_max_length``, raises
    ``ValueError("User-specified max_model_len ...")`` (2662-2683), which
    pydantic may wrap; its text is ``length_refusal`` (None: vLLM took the
    length, as ``vllm_max_model_len``).
    """
    from vllm.engine.arg_utils import EngineArgs  # noqa: PLC0415
    from vllm.usage.usage_lib import UsageContext  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as model:
        config = json.loads(Path(case["config"]).read_text(encoding="utf-8"))
        (Path(model) / "config.json").write_text(json.dumps(config), encoding="utf-8")
        arguments = EngineArgs(
            model=model,
            skip_tokenizer_init=True,
            max_model_len=int(case["max_model_len"]),
            load_format="dummy",
        )
        try:
            engine = arguments.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
        except ValueError as error:
            found = str(error)
            start = found.find("User-specified max_model_len")
            if start < 0:
                raise
            # Pydantic's wrapping adds " [type=value_error, ...]" to vLLM's own text.
            refusal = found[start:].split(" [type=", 1)[0]
            return {**case, "length_refusal": refusal, "vllm_max_model_len": None}
    length = int(engine.model_config.max_model_len)
    return {**case, "length_refusal": None, "vllm_max_model_len": length}


def plan(case: dict[str, Any]) -> dict[str, Any]:
    """vLLM's own figures for one case (what its length check says, for ``only``).

    A case with ``"catch_assert": true`` reports an ``AssertionError`` vLLM's chain
    raises as ``startup_assert`` (:func:`_assertion`) in place of the figures;
    every other case has ``startup_assert`` None.
    """
    if case.get("only") == "max_model_len":
        return length_check(case)
    if not case.get("catch_assert"):
        return {**_plan(case), "startup_assert": None}
    try:
        return {**_plan(case), "startup_assert": None}
    except AssertionError as error:
        return {**case, "startup_assert": _assertion(error)}


def _assertion(error: AssertionError) -> dict[str, Any]:
    """Where in vLLM an assert failed: its file (from ``vllm/``), line, function and text.

    For ``MambaSpec.page_size_bytes`` also the two sizes it compared, read from that
    frame: the padding (``page_size_padded``) and the layer's page (``page_size``).
    """
    import linecache  # noqa: PLC0415
    import traceback  # noqa: PLC0415

    frames = traceback.extract_tb(error.__traceback__)
    last = frames[-1]
    found: dict[str, Any] = {
        "file": "vllm/" + last.filename.replace("\\", "/").split("/vllm/", 1)[-1],
        "line": last.lineno,
        "function": last.name,
        "text": linecache.getline(last.filename, last.lineno or 0).strip(),
        "callers": [frame.name for frame in frames if "/vllm/" in frame.filename],
    }
    tail = error.__traceback__
    while tail is not None and tail.tb_next is not None:
        tail = tail.tb_next
    local = tail.tb_frame.f_locals if tail is not None else {}
    if "page_size" in local and "self" in local:
        found["page_size"] = int(local["page_size"])
        found["page_size_padded"] = int(local["self"].page_size_padded)
    return found


def _plan(case: dict[str, Any]) -> dict[str, Any]:
    import torch  # noqa: PLC0415
    import vllm.distributed.parallel_state as parallel  # noqa: PLC0415
    from vllm.config import set_current_vllm_config  # noqa: PLC0415
    from vllm.engine.arg_utils import EngineArgs  # noqa: PLC0415
    from vllm.multimodal.gpu_ipc_memory import reserve_mm_ipc_gpu_memory  # noqa: PLC0415
    from vllm.platforms import current_platform  # noqa: PLC0415
    from vllm.usage.usage_lib import UsageContext  # noqa: PLC0415
    from vllm.v1.attention.backends.utils import resolve_kv_cache_layout  # noqa: PLC0415
    from vllm.v1.core.kv_cache_planning import (  # noqa: PLC0415
        get_global_kv_cache_groups,
        get_kv_cache_configs,
    )
    from vllm.v1.core.kv_cache_utils import (  # noqa: PLC0415
        generate_scheduler_kv_cache_config,
        get_kv_cache_capacity,
    )
    from vllm.v1.core.single_type_kv_cache_manager import (  # noqa: PLC0415
        register_all_kvcache_specs,
    )
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner  # noqa: PLC0415
    from vllm.v1.worker.worker_base import WorkerBase  # noqa: PLC0415

    tp, drafts = int(case["tp"]), int(case["drafts"])
    method = str(case.get("method", "mtp"))
    memory = int(case["kv_cache_memory_bytes"])
    for name, spans_tp in _GROUPS.items():
        if hasattr(parallel, name):
            setattr(parallel, name, _Group(tp if spans_tp else 1))
    speculative = {"method": method, "num_speculative_tokens": drafts} if drafts else None
    with tempfile.TemporaryDirectory() as model:
        config = json.loads(Path(case["config"]).read_text(encoding="utf-8"))
        (Path(model) / "config.json").write_text(json.dumps(config), encoding="utf-8")
        engine = EngineArgs(
            model=model,
            skip_tokenizer_init=True,
            tensor_parallel_size=tp,
            speculative_config=speculative,
            kv_cache_memory_bytes=memory,
            max_model_len=int(case["max_model_len"]),
            load_format="dummy",
            enable_prefix_caching=bool(case.get("prefix_caching", True)),
            kv_cache_dtype=str(case.get("kv_cache_dtype", "auto")),
            max_num_seqs=case.get("max_num_seqs"),
            # As `vllm serve` makes it (entrypoints/launchers/api_server/entry.py:38),
            # which picks the serving default of max_num_seqs.
        ).create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
    text = engine.model_config.hf_text_config
    with set_current_vllm_config(engine), torch.device("meta"):
        _mixers(
            engine, engine.model_config, text, "model.layers", list(enumerate(text.layer_types))
        )
        if speculative is not None and method == "mtp":
            # The drafter is built with its own model config (qwen3_next_mtp.py:63,
            # 89-95; qwen3_5_mtp.py:82, 118-124).
            draft = engine.speculative_config.draft_model_config
            draft_text = draft.hf_text_config
            named: Any = getattr(draft_text, "num_nextn_predict_layers", None)
            count = int(named or getattr(draft_text, "mtp_num_hidden_layers", 1))
            drafter = dataclasses.replace(engine, model_config=draft)
            layers = [(i, "full_attention") for i in range(count)]
            _mixers(drafter, draft, draft_text, "mtp.layers", layers)
            # As the proposer marks them (v1/spec_decode/llm_base_proposer.py:1328-1335).
            for name, layer in engine.compilation_config.static_forward_context.items():
                if name.startswith("mtp."):
                    layer.is_draft_layer = True
    current_platform.update_block_size_for_backend(engine)
    with set_current_vllm_config(engine):
        register_all_kvcache_specs(engine)
        runner = types.SimpleNamespace(vllm_config=engine, shared_kv_cache_layers={})
        specs = GPUModelRunner.get_kv_cache_spec(runner)
        layouts = WorkerBase.get_supported_kv_cache_layouts(
            types.SimpleNamespace(vllm_config=engine)
        )
        resolve_kv_cache_layout(engine, [layouts], list(specs.values()))
        groups = get_global_kv_cache_groups(engine, [specs])
        # What the worker reports for --kv-cache-memory-bytes (gpu_worker.py:656-681):
        # the flag's bytes, less any multimodal frontend reservation (none by default).
        available = reserve_mm_ipc_gpu_memory(memory, engine.model_config.multimodal_config, 1)
        (kv_config,) = get_kv_cache_configs(engine, [specs], [available], groups)
        tokens, concurrency = get_kv_cache_capacity(
            engine, generate_scheduler_kv_cache_config([kv_config])
        )
        refusal = _cudagraph_check(engine, kv_config, drafts)
    return {
        **case,
        **_figures(engine, specs, kv_config, tokens, concurrency),
        # max_num_seqs as vLLM set it (its default when the case gives none).
        "vllm_max_num_seqs": int(engine.scheduler_config.max_num_seqs),
        "refusal": refusal,
    }


def _cudagraph_check(engine: Any, kv_config: Any, drafts: int) -> str | None:
    """What vLLM's CUDA-graph check raises for this KV cache (None: it passes).

    As the runner's ``_check_and_update_cudagraph_mode`` (gpu_model_runner.py:6760-6795)
    calls it: the least CUDA-graph support among the groups' backends, a decode
    query of 1 + drafts tokens, and ``max_num_seqs`` requests.
    """
    from vllm.v1.attention.backend import AttentionCGSupport  # noqa: PLC0415

    layers = engine.compilation_config.static_forward_context
    support, backend_name = AttentionCGSupport.ALWAYS, None
    for group in kv_config.kv_cache_groups:
        backend = layers[group.layer_names[0]].get_attn_backend()
        found = backend.get_builder_cls().get_cudagraph_support(engine, group.kv_cache_spec)
        if found.value < support.value:
            support, backend_name = found, backend.__name__
    try:
        engine.compilation_config.resolve_cudagraph_mode_and_sizes(
            support,
            backend_name,
            1 + drafts,
            use_v2_model_runner=False,
            kv_cache_config=kv_config,
            max_num_reqs=int(engine.scheduler_config.max_num_seqs),
        )
    except ValueError as error:
        return str(error)
    return None


def _figures(
    engine: Any,
    specs: dict[str, Any],
    kv_config: Any,
    tokens: int,
    concurrency: float,
) -> dict[str, Any]:
    from vllm.v1.kv_cache_interface import FullAttentionSpec, MambaSpec  # noqa: PLC0415

    mamba = next(spec for spec in specs.values() if isinstance(spec, MambaSpec))
    attention = next(spec for spec in specs.values() if isinstance(spec, FullAttentionSpec))
    (pool,) = {tensor.size for tensor in kv_config.kv_cache_tensors}
    align = engine.cache_config.mamba_cache_mode == "align"
    return {
        "page_bytes": int(mamba.real_page_size_bytes),
        "padded_page_bytes": int(mamba.page_size_bytes),
        "block_size": int(attention.block_size),
        "gdn_layers": sum(isinstance(spec, MambaSpec) for spec in specs.values()),
        "attention_layers": sum(isinstance(spec, FullAttentionSpec) for spec in specs.values()),
        "group_layers": sorted(len(group.layer_names) for group in kv_config.kv_cache_groups),
        "block_bytes": int(pool) // int(kv_config.num_blocks),
        "num_blocks": int(kv_config.num_blocks),
        # kv_cache_interface.py:1146-1150: 2 + num_speculative_blocks resident in align mode.
        "resident_blocks": (2 if align else 1) + int(mamba.num_speculative_blocks),
        "admission_blocks": int(mamba.max_memory_usage_bytes(engine)) // int(mamba.page_size_bytes),
        "tokens": int(tokens),
        "concurrency": float(concurrency),
        "recurrent_dtype": str(mamba.dtypes[-1]).removeprefix("torch."),
        "conv_dtype": str(mamba.dtypes[0]).removeprefix("torch."),
    }


def main(arguments: list[str]) -> int:
    """Plan every case in the JSON file ``arguments[0]``; one JSON line each on stdout."""
    return plan_cases(arguments, _stand_ins, plan)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
