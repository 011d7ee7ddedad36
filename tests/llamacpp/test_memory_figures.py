# SPDX-License-Identifier: MIT OR Apache-2.0
"""The llama.cpp sizing view against llama.cpp itself: its allocations, its saved states, its lines.

``memory_probe.cpp`` is compiled against the tier's build and makes small
random Qwen3.5 and Qwen3-Next models in memory with llama.cpp's own
``llama_model_init_from_user``. For each it reports what the context's memory
allocates (``llama_get_memory_breakdown``), how many snapshots the context
kept (``llama_n_rs_seq``) and the bytes of a saved sequence
(``llama_state_seq_get_size_ext``, PARTIAL_ONLY, as the server's checkpoints).
The view must give the same bytes: the snapshot planes are what a context with
``n_rs_seq`` allocates beyond one without, one plane is the base state, and a
saved sequence is the view's checkpoint. Every citation of the view is read
back from the vendored tree.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Final, NamedTuple, TypedDict, cast

import pytest

from ssm_rollback_spec.sizing.dimensions import GdnDimensions
from ssm_rollback_spec.sizing.engines.llamacpp.unit import LLAMA_CPP_VIEW, LlamaCppSizing
from ssm_rollback_spec.sizing.state import Drafting, Model, Setup

if TYPE_CHECKING:
    from tests.llamacpp.engine import Built

pytestmark = pytest.mark.llamacpp

_PROBE_SOURCE: Final = Path(__file__).with_name("memory_probe.cpp")
#: The static libraries the tier's build makes, in link order.
_LIBRARIES: Final = (
    "src/libllama.a",
    "ggml/src/libggml.a",
    "ggml/src/libggml-cpu.a",
    "ggml/src/libggml-base.a",
)
_COMPILE_SECONDS: Final = 600
_PROBE_SECONDS: Final = 120


class Shape(NamedTuple):
    """A probe model: its llama.cpp architecture, its layers and its GDN shape."""

    arch: str
    blocks: int
    interval: int
    key_heads: int
    key_dim: int
    value_heads: int
    value_dim: int
    kernel: int

    @property
    def model(self) -> Model:
        """The model as the view sees it, from the config the architecture converts from."""
        return Model(
            dimensions=GdnDimensions(
                num_gdn_layers=self.blocks - self.blocks // self.interval,
                num_key_heads=self.key_heads,
                key_head_dim=self.key_dim,
                num_value_heads=self.value_heads,
                value_head_dim=self.value_dim,
                conv_kernel=self.kernel,
            ),
            architecture={"qwen35": "Qwen3_5ForCausalLM", "qwen3next": "Qwen3NextForCausalLM"}[
                self.arch
            ],
        )


class Probed(TypedDict):
    """What memory_probe.cpp prints."""

    n_rs_seq: int
    context_bytes: int
    checkpoint_bytes: int


#: The tier's own Qwen3.5 shape, one with more value heads than key heads and
#: a kernel of 3, and Qwen3-Next, whose snapshots llama.cpp refuses. llama.cpp's
#: GDN graph takes the key and value head dims equal.
SHAPES: Final = (
    Shape("qwen35", 2, 2, 2, 128, 2, 128, 4),
    Shape("qwen35", 4, 4, 2, 64, 4, 64, 3),
    Shape("qwen3next", 4, 4, 2, 128, 2, 128, 4),
)


@pytest.fixture(scope="module")
def probe(llamacpp: Built, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """memory_probe.cpp, compiled and linked against the tier's static llama.cpp."""
    folder = Path(llamacpp["adapter"]).parent.parent
    tree = folder / "src" / "vendor" / "llama.cpp"
    out = tmp_path_factory.mktemp("probe") / "memory-probe"
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.fail("the llamacpp tier needs g++ on PATH", pytrace=False)
    done = subprocess.run(
        [
            compiler,
            "-O1",
            "-std=c++17",
            *("-I", str(tree / "include"), "-I", str(tree / "ggml" / "include")),
            *("-I", str(tree / "src")),
            str(_PROBE_SOURCE),
            "-o",
            str(out),
            "-Wl,--start-group",
            *(str(folder / "build" / library) for library in _LIBRARIES),
            "-Wl,--end-group",
            "-lpthread",
            "-lm",
        ],
        capture_output=True,
        text=True,
        timeout=_COMPILE_SECONDS,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"compiling memory_probe.cpp failed: {done.stderr[-2000:]}", pytrace=False)
    return out


def _probe(probe: Path, shape: Shape, n_seq: int, n_rs_seq: int, /) -> Probed:
    done = subprocess.run(
        [str(probe), *(str(value) for value in shape), str(n_seq), str(n_rs_seq)],
        capture_output=True,
        text=True,
        timeout=_PROBE_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return cast("Probed", json.loads(done.stdout))


def _sized(shape: Shape, drafts: int, requests: int, /) -> LlamaCppSizing:
    return LLAMA_CPP_VIEW.size(shape.model, Setup(), Drafting(drafts, requests))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: f"{shape.arch}-{shape.blocks}")
@pytest.mark.parametrize(("n_seq", "drafts"), [(1, 1), (1, 3), (3, 2)])
def test_the_view_is_what_llama_cpp_allocates_and_saves(
    probe: Path, shape: Shape, n_seq: int, drafts: int
) -> None:
    without = _probe(probe, shape, n_seq, 0)
    asked = _probe(probe, shape, n_seq, drafts)
    one = _probe(probe, shape, n_seq, 1)
    sized = _sized(shape, drafts, n_seq)
    assert asked["n_rs_seq"] == sized.n_rs_seq
    # The base state is one plane: what a context with one snapshot adds.
    if sized.speculative_checkpoint:
        assert asked["context_bytes"] == one["context_bytes"] == without["context_bytes"]
    else:
        assert one["context_bytes"] - without["context_bytes"] == sized.base_bytes
        assert asked["context_bytes"] - without["context_bytes"] == sized.speculative_bytes
    # A saved sequence, as the server's spec_ckpt and context checkpoints hold it.
    assert asked["checkpoint_bytes"] == without["checkpoint_bytes"] == sized.checkpoint_bytes
    if sized.speculative_checkpoint:
        assert sized.speculative_bytes_per_request == asked["checkpoint_bytes"]


#: A phrase each cited place of the vendored tree holds, by the view's fact.
CITED: Final = {
    "n_rs_seq": ["uint32_t n_rs_seq;", "[EXPERIMENTAL]"],
    "rollback architectures": ["llm_arch_supports_rs_rollback", "case LLM_ARCH_QWEN35:"],
    "clamp": ["std::max(1u, params.n_seq_max)", "cparams.n_rs_seq = 0;"],
    "hybrid memory": ["arch == LLM_ARCH_QWEN3NEXT || arch == LLM_ARCH_QWEN35", "GGML_TYPE_F32"],
    "planes": ["mem_size * (1 + n_rs_seq)", "hparams.n_embd_s(), n_rows"],
    "tensor split": [
        "pattern_r_cache) || std::regex_match(tensor_name, pattern_s_cache)",
        "return {{key_dim * (hparams.ssm_d_conv - 1), 2}",
        "return {{n_k_heads * head_v_dim * head_v_dim, head_ratio}};",
    ],
    "row sizes": ["(ssm_d_conv > 0 ? ssm_d_conv - 1 : 0)", "return ssm_d_state * ssm_d_inner;"],
    "gguf shape": [
        'add_ssm_state_size(self.hparams["linear_key_head_dim"])',
        "Qwen3_5MoeForCausalLM",
    ],
    "rollback": ["rollback <= (llama_pos) n_rs_seq", "pending rollback is single-use"],
    "snapshots written": ["const int64_t K = cparams.n_rs_seq + 1;"],
    "server n_rs_seq": ["COMMON_SPECULATIVE_TYPE_DRAFT_MTP", "needs_rs_seq ? draft.n_max : 0u"],
    "server context": ["cparams.n_rs_seq          = params.speculative.need_n_rs_seq();"],
    "mtp drafter": ["mtp_on_hybrid_qwen =", "return il >= hparams.n_layer();"],
    "speculative checkpoint": ["common_prompt_checkpoint spec_ckpt;", "ckpt.load_tgt(slot.ctx_tgt"],
    "checkpoint bytes": ["data_tgt.size() + data_dft.size()", "llama_state_seq_get_size_ext"],
    "partial state": ["LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY) == 0", "mem_recr->state_write"],
    "state layout": ["io.write(&io_magic, sizeof(io_magic));", "io.write(&seq_id"],
    "recurrent layout": ["io.write(&cell_count", "io.write(&n_layer", "io.write(&s_size_row"],
    "context checkpoints": ["int32_t n_ctx_checkpoints   = 32;"],
    "checkpoint creation": ["params_base.n_ctx_checkpoints", "COMMON_CONTEXT_SEQ_RM_TYPE_RS ||"],
}


def _cited_text(tree: Path, path: str, lines: str, /) -> str:
    text = (tree / path).read_text(encoding="utf-8").splitlines()
    held = []
    for span in lines.split(","):
        first, _, last = span.strip().partition("-")
        start, end = int(first), int(last or first)
        assert 1 <= start <= end <= len(text), f"{path}:{span} is outside the file"
        held += text[start - 1 : end]
    return "\n".join(held)


def test_every_citation_holds_what_the_view_says(llamacpp: Built) -> None:
    tree = Path(llamacpp["adapter"]).parent.parent / "src" / "vendor" / "llama.cpp"
    assert set(CITED) == set(LLAMA_CPP_VIEW.sources)
    for fact, source in LLAMA_CPP_VIEW.sources.items():
        held = _cited_text(tree, source.path, source.lines)
        for phrase in CITED[fact]:
            assert phrase in held, f"{fact}: {source} does not say {phrase!r}"
    # Qwen3-Next is not among the architectures with snapshot rollback.
    rollback = LLAMA_CPP_VIEW.sources["rollback architectures"]
    assert "LLM_ARCH_QWEN3NEXT" not in _cited_text(tree, rollback.path, rollback.lines)
    assert re.search(r"default:\s+return false;", _cited_text(tree, rollback.path, "1137-1139"))
