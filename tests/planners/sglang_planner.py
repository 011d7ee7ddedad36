# SPDX-License-Identifier: MIT OR Apache-2.0
"""Run SGLang 0.5.23's own startup sizing on CPU, in the planners venv, and print its figures.

``python tests/planners/sglang_planner.py CASES.json`` reads a list of cases
(``config``, ``tp``, ``drafts``, ``gpu_memory_bytes``, ``weights_bytes``,
``mem_fraction_static``, ``context_length``, and optionally ``radix_cache``,
``replayssm`` and ``flags``, more of SGLang's flags by name, as
``mamba_full_memory_ratio``) and prints one JSON object per case. No weights are
loaded and no GPU is needed. What stands in, and nothing else:

- ``IPython`` (only ``sglang/utils.py``'s notebook helpers name it), ``gguf``
  (the GGUF loader, which no config here uses) and ``torchvision`` (the
  Qwen3.5 processors' imports; with a version for transformers' check) are
  modules of placeholders;
- SGLang's platform facts (``override_platform``) and its platform say an
  SM 9.0 CUDA GPU;
- ``HF_HUB_OFFLINE`` is set, so no lookup reaches the Hub;
- the WORLD group is rank 0's view of ``tp`` ranks with no CPU group;
- the free-memory probe the configurator reads after loading answers
  ``gpu_memory_bytes - weights_bytes``, and the memory measured before
  loading is ``gpu_memory_bytes``.

Then SGLang's own chain: ``ServerArgs`` resolved by ``publish``,
``ModelConfig.from_server_args``, ``configure_kv_cache_dtype``,
``resolve_spec_aux_hidden_state_config``, ``resolve_layer_indices`` and
``KVCacheConfigurator._resolve_memory_pool_config`` (the profile, the mamba
pool, the token pool and the running requests); the pools are not built.
"""

from __future__ import annotations

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

__all__ = ["main", "plan"]

_GIB: Final = 1 << 30
_H200_BYTES: Final = 143_771_566_080
_PLACEHOLDERS: Final = ("IPython", "gguf", "torchvision")


def _stand_ins() -> None:
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    # Every model here is a local folder, so nothing should reach the Hub; should a
    # lookup ever try, huggingface_hub 1.33.0 (constants.py line 194, read at import)
    # makes it a local cache miss rather than a network retry.
    os.environ["HF_HUB_OFFLINE"] = "1"
    install_placeholders(*_PLACEHOLDERS)

    import torch  # noqa: PLC0415
    from sglang.srt import platforms  # noqa: PLC0415
    from sglang.srt.platforms.cuda import CudaSRTPlatform  # noqa: PLC0415
    from sglang.srt.runtime_context import override_platform  # noqa: PLC0415

    override_platform(
        is_cuda=True, is_hip=False, is_npu=False, is_xpu=False, is_musa=False, is_mps=False,
        is_sm90=True, is_sm100=False, is_sm100_or_sm110=False, is_sm110=False,
        is_sm120=False, is_blackwell=False, is_hopper_with_cuda_12_3=True, has_amx=False,
        has_flashinfer=False, device_sm=90, device_capability=(9, 0),
    ).install()  # fmt: skip

    class _Sm90(CudaSRTPlatform):  # type: ignore[misc]
        def get_device_total_memory(self, device_id: int = 0) -> int:
            del device_id
            return _H200_BYTES

        def get_device_name(self, device_id: int = 0) -> str:
            del device_id
            return "NVIDIA H200"

        def get_available_memory(self, device_id: int = 0) -> tuple[int, int]:
            del device_id
            return _H200_BYTES, _H200_BYTES

        def get_device(self, device_id: int = 0) -> Any:
            del device_id
            return torch.device("meta")

    platforms._current_platform = _Sm90()  # noqa: SLF001


def plan(case: dict[str, Any]) -> dict[str, Any]:
    """SGLang's own figures for one case, its config in a model folder that outlives the sizing.

    SGLang reads the folder again after ``ModelConfig.from_server_args``: a
    NEXTN drafter with no draft path is the target checkpoint, which
    ``resolve_spec_aux_hidden_state_config`` loads as a second ``ModelConfig``
    (0.5.23, ``model_runner_components/spec_aux_hidden_state.py`` line 150).
    A path that no longer exists is taken for a Hub repo id, and
    ``_parse_quant_hf_config`` retries a ``hf_quant_config.json`` lookup on it
    three times, with back-off (``configs/model_config.py`` lines 1751-1776),
    which was most of this tier's SGLang time.
    """
    with tempfile.TemporaryDirectory() as model:
        config = json.loads(Path(case["config"]).read_text(encoding="utf-8"))
        (Path(model) / "config.json").write_text(json.dumps(config), encoding="utf-8")
        return _plan_in(model, case)


def _plan_in(model: str, case: dict[str, Any]) -> dict[str, Any]:
    from sglang.srt.configs.model_config import ModelConfig  # noqa: PLC0415
    from sglang.srt.mem_cache import kv_cache_configurator, kv_cache_dtype  # noqa: PLC0415
    from sglang.srt.model_executor.model_runner_components.layer_setup import (  # noqa: PLC0415
        resolve_layer_indices,
    )
    from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import (  # noqa: PLC0415
        resolve_spec_aux_hidden_state_config,
    )
    from sglang.srt.runtime_context import (  # noqa: PLC0415
        get_model,
        get_parallel,
        get_schedule,
        get_spec,
        publish,
    )
    from sglang.srt.server_args import ServerArgs  # noqa: PLC0415
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm  # noqa: PLC0415

    drafts, gpu = int(case["drafts"]), int(case["gpu_memory_bytes"])
    # An MTP drafter as the Qwen model cards serve it: NEXTN, one draft chain.
    speculative = (
        {
            "speculative_algorithm": "NEXTN",
            "speculative_num_steps": drafts,
            "speculative_eagle_topk": 1,
            "speculative_num_draft_tokens": drafts + 1,
        }
        if drafts
        else {}
    )
    server_args = ServerArgs(
        model_path=model,
        tp_size=int(case["tp"]),
        mem_fraction_static=float(case["mem_fraction_static"]),
        context_length=int(case["context_length"]),
        skip_tokenizer_init=True,
        load_format="dummy",
        device="cuda",
        disable_radix_cache=not case.get("radix_cache", True),
        enable_linear_replayssm_spec=bool(case.get("replayssm", False)),
        **speculative,
        **case.get("flags", {}),
    )
    publish(server_args, role="scheduler")
    get_parallel().override_permanently(
        world_group=types.SimpleNamespace(cpu_group=None, world_size=int(case["tp"]))
    )
    model_config = ModelConfig.from_server_args(server_args)
    algorithm = SpeculativeAlgorithm.from_string(get_spec().speculative_algorithm)
    _, kv_dtype = kv_cache_dtype.configure_kv_cache_dtype(
        server_args_kv_cache_dtype=get_model().kv_cache_dtype,
        model=None,
        model_dtype=model_config.dtype,
        is_draft_worker=False,
        is_dflash=False,
        speculative_draft_attention_backend=None,
    )
    free_after_loading = (gpu - int(case["weights_bytes"])) / _GIB
    kv_cache_configurator.get_available_gpu_memory = lambda *_, **__: free_after_loading
    configurator = kv_cache_configurator.KVCacheConfigurator(
        device="cuda", gpu_id=0, attn_dp_size=1, pp_size=1, pp_group=None, model=None,
        model_config=model_config, server_args=server_args, kv_cache_dtype=kv_dtype,
        model_dtype=model_config.dtype, page_size=get_schedule().page_size,
        sliding_window_size=None, spec_algorithm=algorithm, is_draft_worker=False,
        post_capture_kv_active=False,
        spec_aux_config=resolve_spec_aux_hidden_state_config(
            server_args=server_args, model_config=model_config, spec_algorithm=algorithm,
            is_draft_worker=False,
        ),
        is_hybrid_swa=model_config.is_hybrid_swa, is_hybrid_swa_compress=False,
        use_mla_backend=False,
        layer_info=resolve_layer_indices(
            model=None, model_config=model_config, is_draft_worker=False
        ),
        forward_stream=None, req_to_token_pool=None, token_to_kv_pool_allocator=None,
        memory_pool_config=None,
    )  # fmt: skip
    pool = configurator._resolve_memory_pool_config(gpu / _GIB)  # noqa: SLF001
    params = configurator.mambaish_config.mamba2_cache_params
    return {
        **case,
        "max_total_num_tokens": int(pool.max_total_num_tokens),
        "max_running_requests": int(pool.max_running_requests),
        "max_mamba_cache_size": int(get_schedule().max_mamba_cache_size),
        "mamba_bytes_per_state": int(params.mamba_cache_per_req),
    }


def main(arguments: list[str]) -> int:
    """Plan every case in the JSON file ``arguments[0]``; one JSON line each on stdout."""
    return plan_cases(arguments, _stand_ins, plan)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
