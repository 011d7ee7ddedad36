# SPDX-License-Identifier: MIT OR Apache-2.0
"""The vLLM view: the GDN state vLLM 0.33.0 holds, as ``vllm serve`` runs with no extra flags.

Every fact below is read from the released wheel (``vllm-0.33.0``), cited by
file and line in :data:`SOURCES`. The default setup is an SM90 GPU (H100,
H200) with the engine's defaults: prefix caching on, so ``mamba_cache_mode``
is ``align``; GDN prefill on FlashInfer, so align mode holds one prefill
checkpoint block more; state dtypes from the config; and every mamba page
padded up to the attention page. :class:`VllmSetup` selects other setups.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ....releases import VLLM
from ...dimensions import ModelLength
from ...dtypes import ConfigDtypes, Dtype, StateDtypes, UnsupportedDtypeError
from ...state import SnapshotSizing
from ...units import human_readable_int
from .sources import SOURCES

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ...dimensions import AttentionDimensions, GdnDimensions
    from ...state import Model, Setup, SnapshotFigures

__all__ = [
    "ALIGN_BASE_BLOCKS",
    "DEFAULT_BLOCK_SIZE",
    "DEFAULT_MAX_NUM_SEQS",
    "ENGINE",
    "FLASHINFER_GDN_CHECKPOINT_ALIGNMENT",
    "FLASH_ATTN_KERNEL_BLOCK",
    "KV_CACHE_DTYPES",
    "MAMBA_DTYPES",
    "NAME",
    "NONE_BASE_BLOCKS",
    "NULL_BLOCKS",
    "PREFILL_CHECKPOINT_BLOCKS",
    "QWEN3_5_SSM_DTYPE_HOOK",
    "SOURCES",
    "VERSION",
    "Gpu",
    "ModelLength",
    "SpeculativeMethod",
    "VllmCapacity",
    "VllmLayout",
    "VllmPlan",
    "VllmSetup",
    "VllmSizing",
    "human_readable_int",
    "kv_cache_dtype",
    "max_num_seqs",
    "model_dtype",
    "model_length",
    "options",
    "view_dtypes",
    "vllm_capacity",
    "vllm_dtypes",
    "vllm_layout",
    "vllm_plan",
]

#: The release this view follows.
VERSION: Final = VLLM.version
#: How outputs name it.
ENGINE: Final = VLLM.engine


class Gpu(enum.Enum):
    """The GPU generation, which picks the GDN prefill backend (and so align mode's blocks)."""

    #: Hopper (H100, H200): GDN prefill on FlashInfer, the default of this view.
    SM90 = "sm90"
    #: Ampere (A100): GDN prefill on Triton/FLA, no prefill checkpoint block.
    SM80 = "sm80"


class SpeculativeMethod(enum.Enum):
    """``--speculative-config``'s method, which decides whether drafter layers join the grouping."""

    #: The model's own MTP layers draft (``"method": "mtp"``, what the Qwen model cards
    #: serve): each MTP layer's full-attention layer joins the KV-cache grouping.
    MTP = "mtp"
    #: A drafter that keeps no KV cache of its own (``"method": "ngram"``).
    NGRAM = "ngram"


#: ``vllm serve``'s default ``--max-num-seqs`` on each GPU this view knows: 1024 on a GPU of
#: 70 GiB or more that is not an A100 (H100, H200), 256 otherwise (A100s included).
DEFAULT_MAX_NUM_SEQS: Final = {Gpu.SM90: 1024, Gpu.SM80: 256}
#: ``--kv-cache-dtype``'s values this view takes, and the attention cache's dtype each stores.
KV_CACHE_DTYPES: Final = {
    "bfloat16": Dtype.BF16,
    "float16": Dtype.FP16,
    "fp8": Dtype.FP8,
    "fp8_e4m3": Dtype.FP8,
    "fp8_e5m2": Dtype.FP8,
}
#: vLLM's integer suffixes: decimal in lower case, binary in upper case (whole numbers only).
#: The cache block size before any alignment (``CacheConfig.DEFAULT_BLOCK_SIZE``).
DEFAULT_BLOCK_SIZE: Final = 16
#: FlashAttention's kernel block sizes are multiples of 16 on CUDA.
FLASH_ATTN_KERNEL_BLOCK: Final = 16
#: Align-mode prefill checkpoints land on multiples of 64 tokens with FlashInfer GDN.
FLASHINFER_GDN_CHECKPOINT_ALIGNMENT: Final = 64
#: Blocks a request holds in align mode before speculation and checkpoints.
ALIGN_BASE_BLOCKS: Final = 2
#: Blocks a request holds with prefix caching off, before speculation.
NONE_BASE_BLOCKS: Final = 1
#: The prefill checkpoint blocks the FlashInfer GDN layer adds in align mode.
PREFILL_CHECKPOINT_BLOCKS: Final = 1
#: The block the shared block pool keeps back as its null block.
NULL_BLOCKS: Final = 1
#: A type with fewer layers than this times the smallest count sets the group size alone.
_GROUP_SIZE_SLACK: Final = 1.5
#: The dtypes ``--mamba-cache-dtype`` and ``--mamba-ssm-cache-dtype`` take besides ``auto``.
MAMBA_DTYPES: Final = frozenset({Dtype.FP32, Dtype.FP16, Dtype.BF16})
#: The architectures whose config hook sets the h dtype from ``mamba_ssm_dtype``.
QWEN3_5_SSM_DTYPE_HOOK: Final = frozenset(
    {
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "Qwen3_5ForCausalLM",
        "Qwen3_5MoeForCausalLM",
    }
)


#: The view's registry name (``--engine``), which keys its entry of :attr:`.Setup.options`.
NAME: Final = "vllm"


def options(setup: Setup, /) -> VllmSetup:
    """How ``setup`` serves vLLM: its entry under :data:`NAME`, else the defaults."""
    found = setup.options.get(NAME)
    return found if isinstance(found, VllmSetup) else VllmSetup()


@dataclass(frozen=True)
class VllmSetup:
    """How vLLM is served: the defaults of ``vllm serve`` on SM90 unless said otherwise."""

    #: ``--enable-prefix-caching`` (hybrid models' default) or ``--no-enable-prefix-caching``.
    prefix_caching: bool = True
    gpu: Gpu = Gpu.SM90
    #: ``--speculative-config``'s method: MTP (the default) adds the drafter's layers.
    method: SpeculativeMethod = SpeculativeMethod.MTP
    #: ``--kv-cache-dtype`` (None: ``auto``, the model dtype), by vLLM's name for it.
    kv_cache_dtype: str | None = None

    @property
    def align(self) -> bool:
        """Whether ``mamba_cache_mode`` is ``align`` (prefix caching on)."""
        return self.prefix_caching

    @property
    def checkpoint_blocks(self) -> int:
        """The prefill checkpoint blocks: one in align mode on FlashInfer GDN (SM90)."""
        return PREFILL_CHECKPOINT_BLOCKS if self.align and self.gpu is Gpu.SM90 else 0

    def describe(self) -> str:
        """The setup in a line, as a vLLM user would say it."""
        if self.align:
            mode = "prefix caching on (mamba_cache_mode align"
            mode += (
                ", FlashInfer GDN prefill checkpoint block)"
                if self.checkpoint_blocks
                else ", Triton GDN prefill: no checkpoint block)"
            )
        else:
            mode = "--no-enable-prefix-caching (mamba_cache_mode none)"
        cache = "" if self.kv_cache_dtype is None else f", --kv-cache-dtype {self.kv_cache_dtype}"
        return (
            f"vllm serve on {self.gpu.value.upper()}, {mode},"
            f" speculative method {self.method.value}{cache}"
        )


def _model_dtype(found: ConfigDtypes, /) -> Dtype:
    # A config without a dtype reads as float32 (weights aside), and float32
    # is downcast to the platform's first dtype: bfloat16 on SM80 and newer.
    model = found.model or Dtype.FP32
    return Dtype.BF16 if model is Dtype.FP32 else model


def _refuse(dtype: Dtype, /) -> Dtype:
    if dtype not in MAMBA_DTYPES:
        raise UnsupportedDtypeError(ENGINE, dtype, "fp32, fp16, bf16")
    return dtype


def vllm_dtypes(
    found: ConfigDtypes,
    architecture: str | None,
    /,
    *,
    recurrent: Dtype | None = None,
    conv: Dtype | None = None,
) -> StateDtypes:
    """The state dtypes vLLM picks, ``recurrent`` and ``conv`` standing for the cache-dtype flags.

    ``conv`` is ``--mamba-cache-dtype`` (default: the model dtype), ``recurrent``
    ``--mamba-ssm-cache-dtype`` (default: the Qwen3.5 hook's ``mamba_ssm_dtype``,
    else the conv dtype).

    Raises:
        UnsupportedDtypeError: a dtype vLLM's ``MambaDType`` does not offer (fp8).
    """
    conv_dtype = _refuse(conv or _model_dtype(found))
    if recurrent is not None:
        return StateDtypes(recurrent=_refuse(recurrent), conv=conv_dtype)
    if architecture in QWEN3_5_SSM_DTYPE_HOOK and found.ssm is not None:
        return StateDtypes(recurrent=_refuse(found.ssm), conv=conv_dtype)
    return StateDtypes(recurrent=conv_dtype, conv=conv_dtype)


def view_dtypes(model: Model, setup: Setup, /) -> StateDtypes:
    """The state dtypes of the vllm view for ``model``, unless ``setup`` forces them.

    Raises:
        UnsupportedDtypeError: a forced dtype vLLM does not offer.
    """
    return vllm_dtypes(model.dtypes, model.architecture, recurrent=setup.recurrent, conv=setup.conv)


def _page_bytes(dimensions: GdnDimensions, dtypes: StateDtypes, num_spec: int, /) -> int:
    h = dimensions.recurrent_state_values * dtypes.recurrent.bytes
    columns = dimensions.conv_kernel - 1 + num_spec
    return h + columns * dimensions.conv_dim * dtypes.conv.bytes


def _padded_page_bytes(
    page: int, attention: AttentionDimensions, kv_dtype: Dtype, setup: VllmSetup, /
) -> int:
    per_token = attention.num_kv_heads * 2 * attention.head_dim * kv_dtype.bytes
    alignment = max(FLASH_ATTN_KERNEL_BLOCK, DEFAULT_BLOCK_SIZE)
    if setup.checkpoint_blocks:
        alignment = math.lcm(alignment, FLASHINFER_GDN_CHECKPOINT_ALIGNMENT)
    block = alignment * -(-page // (alignment * per_token))
    block = FLASH_ATTN_KERNEL_BLOCK * -(-block // FLASH_ATTN_KERNEL_BLOCK)
    return max(block, DEFAULT_BLOCK_SIZE) * per_token


@dataclass(frozen=True)
class VllmLayout:
    """One GDN layer's pages on one GPU, for one request and for the pool."""

    #: The page's content: h plus the widened conv window.
    page_bytes: int
    #: The page as allocated, padded to the attention page; None without attention fields.
    padded_page_bytes: int | None
    #: The attention block size (tokens) the padding chose; None without attention fields.
    block_size: int | None

    @property
    def allocated_page_bytes(self) -> int:
        """The page as allocated (padded when the attention page is known)."""
        return self.page_bytes if self.padded_page_bytes is None else self.padded_page_bytes


def vllm_layout(  # noqa: PLR0913 - each is a separate input of vLLM's arithmetic
    dimensions: GdnDimensions,
    attention: AttentionDimensions | None,
    dtypes: StateDtypes,
    kv_dtype: Dtype,
    setup: VllmSetup,
    /,
    *,
    num_spec: int,
) -> VllmLayout:
    """The page vLLM allocates for a conv window widened by ``num_spec`` columns.

    ``kv_dtype`` is the attention cache's dtype (the model dtype with
    ``--kv-cache-dtype auto``); ``attention`` holds per-GPU KV heads.
    """
    page = _page_bytes(dimensions, dtypes, num_spec)
    if attention is None:
        return VllmLayout(page, None, None)
    padded = _padded_page_bytes(page, attention, kv_dtype, setup)
    per_token = attention.num_kv_heads * 2 * attention.head_dim * kv_dtype.bytes
    return VllmLayout(page, padded, padded // per_token)


def model_dtype(found: ConfigDtypes, /) -> Dtype:
    """The model dtype vLLM resolves from a config (``--dtype auto``) on SM80 and newer."""
    return _model_dtype(found)


def kv_cache_dtype(model: Model, setup: VllmSetup, /) -> Dtype:
    """The attention cache's dtype: ``--kv-cache-dtype``'s, or with ``auto`` the model dtype."""
    if setup.kv_cache_dtype is None:
        return _model_dtype(model.dtypes)
    return KV_CACHE_DTYPES[setup.kv_cache_dtype]


#: The config keys vLLM derives the model's length from, the smallest found winning.
_LENGTH_KEYS: Final = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
#: RoPE types whose ``factor`` is already in ``max_position_embeddings``, so not applied again.
_PRESCALED_ROPE: Final = frozenset(
    {"su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling"}
)


def _whole(value: object, /) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return int(value)


def _rope_factor(text: Mapping[str, object], /) -> float:
    """The RoPE scaling vLLM multiplies the derived length by (1 when none applies)."""
    found = text.get("rope_parameters", text.get("rope_scaling"))
    if not isinstance(found, dict) or not found:
        return 1.0
    # Nested per layer type ({"full_attention": {...}}) or one dict.
    nested = all(isinstance(value, dict) for value in found.values())
    factor = 1.0
    for parameters in found.values() if nested else [found]:
        rope_type = parameters.get("rope_type", parameters.get("type"))
        given = parameters.get("factor")
        if rope_type not in _PRESCALED_ROPE and isinstance(given, int | float) and given > 0:
            factor = float(given)
    return factor


def model_length(text: Mapping[str, object], /) -> ModelLength | None:
    """The length vLLM derives from a config's text part ``text``; None: no key gives one.

    The smallest of the length keys, ``model_max_length`` taking over when
    set, times the RoPE factor (``SOURCES["derived max_model_len"]``).
    Without any key vLLM takes a given ``--max-model-len`` as it is.
    """
    found = [(value, key) for key in _LENGTH_KEYS if (value := _whole(text.get(key))) is not None]
    if not found:
        return None
    tokens, key = min(found, key=lambda pair: pair[0])
    override = _whole(text.get("model_max_length"))
    if override is not None:
        tokens, key = override, "model_max_length"
    return ModelLength(tokens=int(tokens * _rope_factor(text)), key=key)


def max_num_seqs(setup: VllmSetup, given: int | None, /) -> int:
    """``--max-num-seqs`` as given, or ``vllm serve``'s default on the setup's GPU."""
    return DEFAULT_MAX_NUM_SEQS[setup.gpu] if given is None else given


def _cdiv(numerator: int, denominator: int, /) -> int:
    return -(-numerator // denominator)


@dataclass(frozen=True)
class VllmPlan:
    """How vLLM groups the layers and sizes the one block pool they share, on one GPU.

    vLLM groups layers by KV-cache spec: the GDN layers form one type, the
    full-attention layers (the drafter's included) another. Each type is split
    into groups of at most :attr:`group_size` layers; every group takes whole
    blocks of one shared pool, and a block holds the largest group's pages
    (:attr:`block_bytes`), so a GDN group with fewer layers than the block has
    page slots leaves them empty. The pool keeps one block back as the null block.
    """

    layout: VllmLayout
    #: GDN layers, and full-attention layers including the MTP drafter's.
    gdn_layers: int
    attention_layers: int
    group_size: int
    gdn_groups: int
    attention_groups: int
    #: One block of the shared pool: the largest group's pages. Also the null block.
    block_bytes: int
    #: Blocks per GDN group a decoding request holds (align: 2 + s; none: 1 + s).
    resident_blocks: int
    #: Blocks per GDN group vLLM counts to admit a request (align adds the checkpoint block).
    admission_blocks: int

    @property
    def resident_bytes_per_request(self) -> int:
        """What one decoding request's GDN state takes from the pool."""
        return self.gdn_groups * self.resident_blocks * self.block_bytes

    @property
    def admission_bytes_per_request(self) -> int:
        """What vLLM counts for one request's GDN state when it admits it."""
        return self.gdn_groups * self.admission_blocks * self.block_bytes

    @property
    def null_block_bytes(self) -> int:
        """The one block the shared pool keeps back."""
        return NULL_BLOCKS * self.block_bytes


def _groups(layers: int, group_size: int, /) -> tuple[int, int]:
    # A type's layers split into cdiv(layers, group size) groups of
    # layers[i::groups]: the count of groups and the largest group's layers.
    count = _cdiv(layers, group_size)
    return count, _cdiv(layers, count)


def vllm_plan(  # noqa: PLR0913 - each is a separate input of vLLM's arithmetic
    dimensions: GdnDimensions,
    attention: AttentionDimensions | None,
    dtypes: StateDtypes,
    kv_dtype: Dtype,
    setup: VllmSetup,
    /,
    *,
    num_spec: int,
    attention_layers: int,
    drafter_layers: int,
    spec_columns: int | None = None,
    speculative_blocks: int | None = None,
) -> VllmPlan:
    """Group the layers and size the shared pool's block, as vLLM 0.33.0 plans it.

    ``attention`` holds per-GPU KV heads (None: a model with no attention
    layers, as explicit dimensions give); ``attention_layers`` the target's
    full-attention layers, ``drafter_layers`` the MTP drafter's, which join only
    when drafting with :attr:`SpeculativeMethod.MTP`. ``spec_columns`` and
    ``speculative_blocks`` (default ``num_spec``) let a replay design keep a
    shorter conv window or no per-draft blocks.
    """
    columns = num_spec if spec_columns is None else spec_columns
    blocks = num_spec if speculative_blocks is None else speculative_blocks
    layout = vllm_layout(dimensions, attention, dtypes, kv_dtype, setup, num_spec=columns)
    gdn = dimensions.num_gdn_layers
    attending = 0
    if attention is not None:
        attending = attention_layers
        if num_spec and setup.method is SpeculativeMethod.MTP:
            attending += drafter_layers
    counts = [count for count in (gdn, attending) if count]
    group_size = min(counts)
    if max(counts) < _GROUP_SIZE_SLACK * min(counts):
        group_size = max(counts)
    gdn_groups, gdn_width = _groups(gdn, group_size)
    attention_groups, attention_width = _groups(attending, group_size) if attending else (0, 0)
    page = layout.allocated_page_bytes
    base = ALIGN_BASE_BLOCKS if setup.align else NONE_BASE_BLOCKS
    return VllmPlan(
        layout=layout,
        gdn_layers=gdn,
        attention_layers=attending,
        group_size=group_size,
        gdn_groups=gdn_groups,
        attention_groups=attention_groups,
        block_bytes=max(gdn_width, attention_width) * page,
        resident_blocks=base + blocks,
        admission_blocks=base + blocks + setup.checkpoint_blocks,
    )


@dataclass(frozen=True)
class VllmCapacity:
    """What vLLM prints at startup for a KV-cache budget and a ``--max-model-len``."""

    kv_cache_bytes: int
    max_model_len: int
    num_blocks: int
    #: Blocks one request at max_model_len takes: every group's, summed.
    blocks_per_request: int
    #: ``GPU KV cache size: N tokens``.
    tokens: int
    #: ``Maximum concurrency for M tokens per request: X x`` (X unrounded).
    concurrency: float
    #: Whether vLLM starts: one request at max_model_len fits beside the null block.
    fits: bool


def vllm_capacity(plan: VllmPlan, /, *, kv_cache_bytes: int, max_model_len: int) -> VllmCapacity:
    """The token count and concurrency vLLM logs for ``kv_cache_bytes`` of KV cache per GPU."""
    num_blocks = kv_cache_bytes // plan.block_bytes
    attention_blocks = 0
    if plan.layout.block_size is not None:
        attention_blocks = _cdiv(max_model_len, plan.layout.block_size)
    per_request = plan.attention_groups * attention_blocks + plan.gdn_groups * plan.admission_blocks
    concurrency = num_blocks / per_request
    return VllmCapacity(
        kv_cache_bytes=kv_cache_bytes,
        max_model_len=max_model_len,
        num_blocks=num_blocks,
        blocks_per_request=per_request,
        tokens=int(concurrency * max_model_len),
        concurrency=concurrency,
        fits=per_request * plan.block_bytes <= kv_cache_bytes - plan.block_bytes,
    )


@dataclass(frozen=True)
class VllmSizing(SnapshotSizing):
    """The vLLM view's figures, with the plan its blocks follow (None: not planned)."""

    plan: VllmPlan | None = None

    def as_dict(self) -> SnapshotFigures:
        """The figures as a JSON-ready mapping, with the plan's page and blocks."""
        figures = super().as_dict()
        plan = self.plan
        if plan is None:
            return figures
        page = plan.layout
        figures["page_bytes"] = page.page_bytes
        figures["padded_page_bytes"] = page.padded_page_bytes
        figures["block_size"] = page.block_size
        figures["group_size"] = plan.group_size
        figures["gdn_groups"] = plan.gdn_groups
        figures["block_bytes"] = plan.block_bytes
        figures["resident_blocks"] = plan.resident_blocks
        figures["admission_blocks"] = plan.admission_blocks
        figures["admission_bytes_per_request"] = plan.admission_bytes_per_request
        return figures
