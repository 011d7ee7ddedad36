# SPDX-License-Identifier: MIT OR Apache-2.0
"""What the e2e tier runs in its own venv (tests/e2e/install.sh): tiny models, and vLLM on them.

``python tests/e2e/driver.py model DIR [--family F] [--scale S] [--layers N]`` writes,
with transformers, weights drawn at test time: a tiny Qwen3.5 text target
into ``DIR/target`` (``Qwen3_5ForCausalLM``: GDN layers and one
full-attention layer, hidden size 128, vocabulary 512) whose output head
leads each token to its successor (``successor``: the next token of its
cycle of ``CYCLE``), with layer writes small enough that the successor
often wins and the recurrent state decides the rest; and its draft model
into ``DIR/draft`` (a one-layer ``Qwen3ForCausalLM`` with the target's
embedding and head that always drafts the successor). It prints, as JSON,
how often each picks the successor (``follows``) and how far the target's
next-token logits move when its GDN layers' recurrent state is zeroed
(``state_effect``): the measure that its outputs depend on the state a
rollback restores.

``python tests/e2e/driver.py serve FD`` starts ``vllm.LLM`` as the first
JSON line on stdin asks (the model, the engine's options, the patches of
``PATCHES`` to make in this process), as a user does (eager; the tokenizer
only where the config asks for it), then serves each further line's batch of
token-id prompts greedily with the top five logprobs (under a structured
output's regex where the batch gives one), and writes one JSON line per request to the file
descriptor FD: the start's outcome, then each batch's requests (tokens and
logprobs) with vLLM's own speculative counters (``vllm:spec_decode_*``), or
the error the engine raised. It ends at the end of stdin.

Standard library at the top: torch, transformers and vLLM are imported inside
the functions that use them, since only this venv has them (the suite's own
Python imports this module for its names alone).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Final

__all__ = ["CYCLE", "FAMILIES", "HIDDEN", "PATCHES", "VOCAB", "main", "successor"]

#: The tiny model's sizes.
HIDDEN: Final = 128
VOCAB: Final = 512
_SEED: Final = 1234
#: Logprobs kept per generated token: the sampled one's and the top five.
_TOP: Final = 5


#: The tiny model's successor map: ``successor(t)`` is the next token of ``t``'s
#: cycle, the vocabulary cut into cycles of ``CYCLE`` consecutive ids.
CYCLE: Final = 4
#: How strongly the output head maps each token's embedding to its successor.
_LEAD: Final = 8.0
#: What every layer's write into the residual stream is scaled by (out_proj,
#: o_proj, down_proj): small enough that the successor leads, large enough
#: that the state moves the logits (measured in ``follows`` and ``state_effect``).
_WRITE: Final = {"qwen3.5": 0.025, "qwen3-next": 0.05}


def successor(token: int) -> int:
    """The token the successor map leads ``token`` to: the next one of its cycle."""
    return (token // CYCLE) * CYCLE + (token % CYCLE + 1) % CYCLE


#: The structured-output grammar the tier serves (a regex over the tokens'
#: texts, ``_tokenizer``): any run of allowed tokens, then a "c" no token
#: holds, so that no output completes it and the grammar binds every token
#: up to ``max_tokens``.
GRAMMAR: Final = "(a[0-9]+)+c"


def allowed(token: int) -> bool:
    """Whether ``GRAMMAR`` lets a run hold ``token``: every other cycle of the successor map."""
    return (token // CYCLE) % 2 == 0


#: The target families ``model`` writes, by ``--family``.
FAMILIES: Final = ("qwen3.5", "qwen3-next")


def _config(transformers: Any, kind: str, scale: float, layers: int) -> Any:
    common: dict[str, Any] = {
        "vocab_size": VOCAB,
        "hidden_size": HIDDEN,
        "intermediate_size": 256,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 64,
        "max_position_embeddings": 1024,
        "initializer_range": scale,
        "tie_word_embeddings": False,
        "bos_token_id": None,
        "eos_token_id": None,
        "pad_token_id": None,
        "torch_dtype": "bfloat16",
    }
    if kind == "draft":
        # A plain attention model: vLLM turns any Qwen3.5 draft into Qwen3.5's MTP
        # module (config/speculative.py lines 917-935), which needs MTP weights.
        config = transformers.Qwen3Config(num_hidden_layers=1, **common)
        config.architectures = ["Qwen3ForCausalLM"]
        return config
    # Every layer GDN but the last, full attention: vLLM takes a hybrid model
    # with an attention layer.
    hybrid: dict[str, Any] = {
        "num_hidden_layers": layers,
        "layer_types": ["linear_attention"] * (layers - 1) + ["full_attention"],
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 2,
        # 64: vLLM's CPU chunk kernel refuses a head of 32 ("Unexpected head dim size").
        "linear_key_head_dim": 64,
        "linear_value_head_dim": 64,
        "linear_conv_kernel_dim": 4,
    }
    if kind == "qwen3-next":
        # Qwen3-Next's sparse MoE in every layer: 4 experts, 2 a token, and a shared one.
        config = transformers.Qwen3NextConfig(
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=64,
            shared_expert_intermediate_size=64,
            decoder_sparse_step=1,
            **hybrid,
            **common,
        )
        config.architectures = ["Qwen3NextForCausalLM"]
        return config
    config = transformers.Qwen3_5TextConfig(**hybrid, **common)
    config.architectures = ["Qwen3_5ForCausalLM"]
    return config


def _model(folder: Path, family: str, scale: float, layers: int, seed: int) -> dict[str, Any]:
    """The target (``folder/target``) and its draft model (``folder/draft``), and their measures.

    The target is a random Qwen3.5 whose output head also maps each token's
    embedding to its successor's logit, and whose layers write into the
    residual stream at ``_WRITE`` (by family) of their drawn scale: its greedy output
    follows the successor map where the recurrent state does not outweigh it,
    so it repeats its prompt's cycles (ngram's drafts are accepted) and leaves
    them where the state decides (they are rejected). The draft model is a
    one-layer Qwen3 with the target's embedding and head and layer writes of
    zero: it always drafts the successor, so the target accepts part of it.
    ``family`` ``qwen3-next`` makes the target a Qwen3-Next (the same layers,
    with a sparse MoE in each), with the same lead and writes.
    """
    torch: Any = importlib.import_module("torch")
    transformers: Any = importlib.import_module("transformers")
    torch.manual_seed(seed)
    kind = "qwen3-next" if family == "qwen3-next" else "target"
    classes = {"qwen3-next": "Qwen3NextForCausalLM", "target": "Qwen3_5ForCausalLM"}
    made = getattr(transformers, classes[kind])(_config(transformers, kind, scale, layers))
    target = made.eval()
    # What each layer writes into the residual stream (the MoE's experts' too).
    writes = ("out_proj.weight", "o_proj.weight", "down_proj.weight", "experts.down_proj")
    with torch.no_grad():
        for name, weight in target.named_parameters():
            if name.endswith(writes):
                weight.mul_(_WRITE[family])
        embedding = target.model.embed_tokens.weight
        lead = torch.zeros_like(target.lm_head.weight)
        for token in range(VOCAB):
            lead[successor(token)] += embedding[token] / embedding[token].norm()
        target.lm_head.weight.add_(_LEAD * lead)
    target.save_pretrained(str(folder / "target"), safe_serialization=True)
    _tokenizer(folder / "target")
    mtp = _mtp(torch, folder / "target", family, seed)
    draft = transformers.Qwen3ForCausalLM(_config(transformers, "draft", scale, 1)).eval()
    with torch.no_grad():
        draft.model.embed_tokens.weight.copy_(target.model.embed_tokens.weight)
        draft.lm_head.weight.copy_(target.lm_head.weight)
        for name, weight in draft.named_parameters():
            if name.endswith(writes):
                weight.zero_()
    draft.save_pretrained(str(folder / "draft"), safe_serialization=True)
    return {
        "target": str(folder / "target"),
        "draft": str(folder / "draft"),
        "mtp": mtp,
        "family": family,
        "scale": scale,
        "layers": layers,
        "cycle": CYCLE,
        "follows": _follows(torch, target, draft, seed),
        "state_effect": _state_effect(torch, target, seed),
    }


def _tokenizer(folder: Path) -> None:
    """A tokenizer for structured output: token ``t`` is "a" or "b" (``allowed``), then ``t``.

    A word-level vocabulary of the model's ``VOCAB`` tokens whose texts join
    with nothing between them, so that a grammar over the text tells each
    token apart. Requests still give token ids; only structured output reads it.
    """
    tokenizers: Any = importlib.import_module("tokenizers")
    transformers: Any = importlib.import_module("transformers")
    texts = {("a" if allowed(token) else "b") + str(token): token for token in range(VOCAB)}
    unknown = "a0"  # no prompt is text: a token of the vocabulary, never read
    words = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab=texts, unk_token=unknown))
    words.pre_tokenizer = tokenizers.pre_tokenizers.Split(
        tokenizers.Regex("[ab][0-9]+"), behavior="isolated"
    )
    words.decoder = tokenizers.decoders.Fuse()
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=words, unk_token=unknown, eos_token=f"b{VOCAB - 1}"
    )
    fast.save_pretrained(str(folder))


def _mtp(torch: Any, folder: Path, family: str, seed: int) -> dict[str, int]:
    """Write an MTP module's weights (``mtp.*``) into the target's checkpoint, drawn now.

    vLLM 0.32.0 serves ``{"method": "mtp"}`` from the target's own checkpoint:
    ``Qwen3_5MTP`` and ``Qwen3NextMTP`` (``models/qwen3_5_mtp.py`` lines
    302-319, ``models/qwen3_next_mtp.py`` lines 230-245) keep its ``mtp.*``
    tensors and its ``embed_tokens`` and ``lm_head`` and nothing else; the
    target drops ``mtp.*`` (``qwen3_5.py`` lines 327-329, ``qwen3_next.py``
    line 823). transformers writes no MTP weights, so they are added here: ``fc``
    (hidden size 2H to H) passes the normed embedding of the token given
    through and adds the normed hidden state at ``_WRITE`` of the drawn
    scale; the one MTP layer (full attention, and Qwen3-Next's MoE) has the
    shapes of the target's attention layer, each matrix drawn afresh with the
    spread of the target's own (so its writes are scaled as the target's
    are), its norms the target's (zeros: the norms scale by 1 + weight); the
    three norms ``norm``, ``pre_fc_norm_hidden`` and ``pre_fc_norm_embedding``
    are the target's final norm's. Its head is the target's, which leads a
    token to its successor: the module mostly drafts the successor of the
    token given, and the target accepts part of it. Neither config needs an
    MTP field: vLLM defaults to one MTP layer (``qwen3_5_mtp.py`` line 82,
    ``qwen3_next_mtp.py`` line 63). Returns the tensors written, by part.
    """
    saving: Any = importlib.import_module("safetensors.torch")
    path = folder / "model.safetensors"
    tensors: dict[str, Any] = saving.load_file(str(path))
    layers = [name.split(".") for name in tensors if name.startswith("model.layers.")]
    prefix = f"model.layers.{max(int(parts[2]) for parts in layers)}."
    generator = torch.Generator().manual_seed(seed + 3)
    added: dict[str, Any] = {}
    for name, tensor in tensors.items():
        if not name.startswith(prefix):
            continue
        spread = float(tensor.float().std())
        drawn = torch.randn(tensor.shape, generator=generator, dtype=torch.float32) * spread
        layer = drawn.to(tensor.dtype) if spread > 0.0 else tensor.clone()
        added["mtp.layers.0." + name.removeprefix(prefix)] = layer
    norm = tensors["model.norm.weight"]
    for part in ("norm", "pre_fc_norm_hidden", "pre_fc_norm_embedding"):
        added[f"mtp.{part}.weight"] = norm.clone()
    scale = float(tensors["model.embed_tokens.weight"].float().std())
    hidden = norm.shape[0]
    fc = torch.zeros((hidden, 2 * hidden), dtype=torch.float32)
    fc[:, :hidden] = torch.eye(hidden)
    fc[:, hidden:] = torch.randn((hidden, hidden), generator=generator) * scale * _WRITE[family]
    added["mtp.fc.weight"] = fc.to(norm.dtype)
    saving.save_file({**tensors, **added}, str(path), metadata={"format": "pt"})
    return {
        "layer": sum(name.startswith("mtp.layers.") for name in added),
        "other": sum(not name.startswith("mtp.layers.") for name in added),
    }


def _follows(torch: Any, target: Any, draft: Any, seed: int) -> dict[str, float]:
    """How often each model's greedy next token is the successor (FP32, transformers).

    Over 16 prompts of 24 drawn tokens, every position: the target's share,
    the draft model's share; and over the same prompts, the share of the
    target's choices the draft model makes too.
    """
    generator = torch.Generator().manual_seed(seed + 2)
    total = ours = theirs = agree = 0
    with torch.no_grad():
        for _ in range(16):
            ids = torch.randint(0, VOCAB, (1, 24), generator=generator)
            mine = target(input_ids=ids).logits[0].argmax(-1).tolist()
            other = draft(input_ids=ids).logits[0].argmax(-1).tolist()
            for position, token in enumerate(ids[0].tolist()):
                total += 1
                ours += int(mine[position] == successor(token))
                theirs += int(other[position] == successor(token))
                agree += int(mine[position] == other[position])
    return {"target": ours / total, "draft": theirs / total, "draft_agrees": agree / total}


def _state_effect(torch: Any, model: Any, seed: int) -> dict[str, float]:
    """How the next token's logits move when every GDN layer's recurrent state is zeroed.

    FP32, in transformers: a prompt of 24 drawn tokens is run, then its last
    token again with the cache as left (the reference) and with each GDN
    layer's recurrent state set to zeros (conv windows and the attention
    layer's keys kept). Reported: the largest logit move, the logits' spread
    (their standard deviation), and the share of 16 prompts whose next token
    (the argmax) changes.
    """
    generator = torch.Generator().manual_seed(seed + 1)
    moves: list[float] = []
    spreads: list[float] = []
    flips = 0
    prompts = 16
    with torch.no_grad():
        for _ in range(prompts):
            ids = torch.randint(0, VOCAB, (1, 24), generator=generator)
            out = model(input_ids=ids[:, :-1], use_cache=True)
            cache = out.past_key_values
            again = model(input_ids=ids[:, -1:], past_key_values=_copy(cache), use_cache=True)
            zeroed = _copy(cache)
            for layer in zeroed.layers:
                states = getattr(layer, "recurrent_states", None)
                if states is not None and states[0] is not None:
                    states[0].zero_()
            moved = model(input_ids=ids[:, -1:], past_key_values=zeroed, use_cache=True)
            ref = again.logits[0, -1]
            new = moved.logits[0, -1]
            moves.append(float((ref - new).abs().max()))
            spreads.append(float(ref.std()))
            flips += int(int(ref.argmax()) != int(new.argmax()))
    return {
        "largest_move": max(moves),
        "median_move": sorted(moves)[len(moves) // 2],
        "logit_spread": sorted(spreads)[len(spreads) // 2],
        "argmax_changed": flips / prompts,
    }


def _copy(cache: Any) -> Any:
    return importlib.import_module("copy").deepcopy(cache)


def _counters(llm: Any) -> dict[str, float]:
    totals: dict[str, float] = {}
    for metric in llm.get_metrics():
        name = getattr(metric, "name", "")
        if name.startswith("vllm:spec_decode"):
            value = getattr(metric, "value", None)
            if value is None:
                values = getattr(metric, "values", None) or []
                value = sum(values)
            totals[name] = totals.get(name, 0.0) + float(value)
    return totals


#: The changes the driver can make to vLLM in its own process, at run time, by name.
PATCHES: Final = ("roll-fixed", "draft-group-fixed", "accepted-plus-one")


def _patch(names: list[str]) -> None:
    """Make each named change to vLLM 0.32.0 in this process, in ``PATCHES``' order.

    ``roll-fixed`` puts vLLM 0.33.0's conv roll in place of 0.32.0's in
    ``_spec_forward`` (the CPU GDN verify's torch loop, the one run without
    AMX): 0.33.0 writes, from column 0, the window the step read less its
    first column and then the step's inputs, where the next step reads its
    history (column ``num_accepted - 1``) whatever the step's length; 0.32.0
    keeps columns from ``num_accepted`` and appends the inputs at the
    buffer's end, which is that place only for a row of 1 + num_spec tokens,
    and fails on a tensor size when a long acceptance is followed by a short
    row (docs/findings/vllm-cpu-gdn-short-verify.md). The function is
    compiled again from its own source with that one change.

    ``draft-group-fixed`` hands a draft model the block table and slot
    mapping of its own KV cache group. vLLM 0.32.0's runner hands every
    drafter but EAGLE's, DFlash's, Gemma4's and the hidden-states extractor's
    the first group's (``v1/worker/gpu_model_runner.py`` lines 2532-2545),
    which for a hybrid target is a GDN group: the draft model writes its keys
    and values into the target's recurrent state
    (docs/findings/vllm-draft-model-hybrid-kv-group.md).

    ``accepted-plus-one`` is the rollback fault of the self-test: the SSM
    kernel of each verify is handed each row's accepted count one too many
    (at most its slots), so it resumes from the state one token after the
    last accepted one, while the conv window rolls back right. (Handed to the
    whole step, the count makes vLLM's own roll fail on a tensor size instead
    of computing a wrong state.)
    """
    unknown = sorted(set(names) - set(PATCHES))
    if unknown:
        message = f"unknown patches {unknown}: the driver makes {list(PATCHES)}"
        raise ValueError(message)
    if "roll-fixed" in names:
        _roll_fixed()
    if "draft-group-fixed" in names:
        _draft_group_fixed()
    if "accepted-plus-one" in names:
        _accepted_plus_one()


#: vLLM 0.32.0's conv roll in ``_spec_forward`` (``gdn_attention.py`` lines 554-556) ...
_ROLL_0_32_0: Final = """\
            keep = B[:, offset + 1 : offset + 1 + (state_len - q_i)]
            new_B = torch.cat([keep, x_seq], dim=-1)
            B.copy_(new_B)
"""
#: ... and vLLM 0.33.0's, in the same function (line 574).
_ROLL_0_33_0: Final = """\
            B[:, : width - 2 + q_i] = conv_in[0, :, 1:]
"""


def _roll_fixed() -> None:
    """vLLM 0.33.0's conv roll in place of 0.32.0's, the rest of ``_spec_forward`` as released."""
    inspect: Any = importlib.import_module("inspect")
    module: Any = importlib.import_module("vllm.model_executor.layers.mamba.ops.cpu.gdn_attention")
    source = inspect.getsource(module._spec_forward)  # noqa: SLF001 - the function changed
    if source.count(_ROLL_0_32_0) != 1:
        message = "vLLM's _spec_forward does not hold 0.32.0's conv roll: nothing to fix"
        raise RuntimeError(message)
    code = compile(source.replace(_ROLL_0_32_0, _ROLL_0_33_0), module.__file__, "exec")
    exec(code, module.__dict__)  # noqa: S102 - vLLM's own function, one line changed


def _draft_group_fixed() -> None:
    runner: Any = importlib.import_module("vllm.v1.worker.gpu_model_runner")
    proposer: Any = importlib.import_module("vllm.v1.spec_decode.draft_model")
    copy: Any = importlib.import_module("copy")
    original = runner.GPUModelRunner._build_attention_metadata  # noqa: SLF001 - the method patched

    def wrapped(self: Any, *arguments: Any, **options: Any) -> Any:
        metadata, common = original(self, *arguments, **options)
        drafter = getattr(self, "drafter", None)
        mappings = options.get("slot_mappings")
        if (
            common is not None
            and isinstance(drafter, proposer.DraftModelProposer)
            and drafter.kv_cache_gid > 0
            and mappings is not None
        ):
            group = drafter.kv_cache_gid
            common = copy.copy(common)
            table = self.input_batch.block_table[group]
            common.block_table_tensor = table.get_device_tensor(common.num_reqs)
            common.slot_mapping = mappings[group][: common.num_actual_tokens]
        return metadata, common

    runner.GPUModelRunner._build_attention_metadata = wrapped  # noqa: SLF001 - the method patched


def _accepted_plus_one() -> None:
    module: Any = importlib.import_module("vllm.model_executor.layers.mamba.ops.cpu.gdn_attention")
    torch: Any = importlib.import_module("torch")
    kernels = module.ops
    verify = kernels.fused_sigmoid_gating_delta_rule_update_spec_cpu

    def one_too_many(**arguments: Any) -> Any:
        slots = int(arguments["spec_state_indices"].size(1))
        counts = arguments["num_accepted_tokens"]
        arguments["num_accepted_tokens"] = torch.clamp(counts + 1, max=slots).to(counts.dtype)
        return verify(**arguments)

    kernels.fused_sigmoid_gating_delta_rule_update_spec_cpu = one_too_many


def _start(config: dict[str, Any]) -> tuple[Any, Any]:
    """``vllm.LLM`` as the config asks (the model, the engine's options, a patch), and vllm."""
    # The engine and its worker in this process, so that a patch is theirs and the
    # engine's own exception, not EngineDeadError, reaches this process.
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    vllm: Any = importlib.import_module("vllm")
    _patch(list(config.get("patches", [])))
    options: dict[str, Any] = dict(config["engine"])
    options["distributed_executor_backend"] = "uni"
    llm = vllm.LLM(
        model=config["model"],
        # The tokenizer (``_tokenizer``) only where a batch asks for structured output.
        skip_tokenizer_init=not config.get("tokenizer", False),
        enforce_eager=True,
        dtype="bfloat16",
        seed=0,
        disable_log_stats=False,
        **options,
    )
    return vllm, llm


def _batch(vllm: Any, llm: Any, request: dict[str, Any]) -> dict[str, Any]:
    """One batch of token-id prompts served greedily: each request's tokens and logprobs.

    With ``regex``, under that structured output (the engine started with its tokenizer).

    With vLLM's own speculative counters (``vllm:spec_decode_*``) over the batch.
    """
    structured = {}
    if "regex" in request:
        outputs_params: Any = importlib.import_module("vllm.sampling_params")
        regex = outputs_params.StructuredOutputsParams(regex=str(request["regex"]))
        structured["structured_outputs"] = regex
    params = vllm.SamplingParams(
        temperature=0.0,
        max_tokens=int(request["max_tokens"]),
        logprobs=_TOP,
        ignore_eos=True,
        detokenize=False,
        **structured,
    )
    before = _counters(llm)
    given = [{"prompt_token_ids": list(prompt)} for prompt in request["prompts"]]
    outputs = llm.generate(given, params, use_tqdm=False)
    after = _counters(llm)
    runs = []
    for output in outputs:
        completion = output.outputs[0]
        steps = [
            {str(token): float(entry.logprob) for token, entry in step.items()}
            for step in completion.logprobs or []
        ]
        runs.append({"tokens": list(completion.token_ids), "logprobs": steps})
    counters = {name: after.get(name, 0.0) - before.get(name, 0.0) for name in after}
    return {"requests": runs, "counters": counters}


def _failure(error: Exception) -> dict[str, Any]:
    return {"error": f"{type(error).__name__}: {error}", "trace": traceback.format_exc()}


def _serve(answers: Any) -> None:
    """Start the engine the first stdin line asks for, then serve each further line's batch.

    Each answer is one JSON line on ``answers``: ``{"ready": true}`` or the
    start's error first, then one per batch (its requests and counters, or the
    error the engine raised). vLLM prints on stdout; the answers have a pipe
    of their own.
    """
    config = json.loads(sys.stdin.readline())
    try:
        vllm, llm = _start(config)
    except Exception as error:  # noqa: BLE001 - the engine's failure is the answer
        answers.write(json.dumps(_failure(error)) + "\n")
        return
    answers.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        try:
            answer = _batch(vllm, llm, json.loads(line))
        except Exception as error:  # noqa: BLE001 - the engine's failure is the answer
            answer = _failure(error)
        answers.write(json.dumps(answer) + "\n")


def _end_children() -> None:
    """Kill vLLM's engine and worker processes: with no orderly shutdown they outlive this one."""
    psutil: Any = importlib.import_module("psutil")
    children = psutil.Process().children(recursive=True)
    for child in children:
        child.kill()
    psutil.wait_procs(children, timeout=30)


def main(argv: list[str] | None = None) -> int:
    """``model`` (JSON on stdout) or ``serve`` (JSON lines on the descriptor given)."""
    parser = argparse.ArgumentParser(prog="tests/e2e/driver.py")
    commands = parser.add_subparsers(dest="command", required=True)
    model = commands.add_parser("model")
    model.add_argument("folder", type=Path)
    model.add_argument("--family", choices=FAMILIES, default="qwen3.5")
    model.add_argument("--scale", type=float, default=0.2)
    model.add_argument("--layers", type=int, default=4)
    model.add_argument("--seed", type=int, default=_SEED)
    serve = commands.add_parser("serve")
    serve.add_argument("answers", type=int, help="the file descriptor the answers go to")
    arguments = parser.parse_args(argv)
    if arguments.command == "model":
        made = _model(
            arguments.folder, arguments.family, arguments.scale, arguments.layers, arguments.seed
        )
        sys.stdout.write(json.dumps(made) + "\n")
        return 0
    with os.fdopen(arguments.answers, "w", buffering=1, encoding="utf-8") as answers:
        _serve(answers)
    sys.stdout.flush()
    _end_children()
    os._exit(0)  # vLLM's engine threads can hold an orderly exit for seconds


if __name__ == "__main__":
    sys.exit(main())
