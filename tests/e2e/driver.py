# SPDX-License-Identifier: MIT OR Apache-2.0
"""What the e2e tier runs in its own venv (tests/e2e/install.sh): a tiny model, and vLLM on it.

``python tests/e2e/driver.py model DIR [--scale S] [--layers N]`` writes a
tiny random Qwen3.5 text model (``Qwen3_5ForCausalLM``: GDN layers and one
full-attention layer, hidden size 128, vocabulary 512) with transformers into
DIR, weights drawn at test time, and prints, as JSON, how far the next
token's logits move when the GDN layers' recurrent state is zeroed
(``state_effect``): the measure that the model's outputs depend on the state a
rollback restores.

``python tests/e2e/driver.py generate ANSWER`` reads a JSON request on stdin (the
model, the engine's options, batches of token-id prompts, the tokens to
generate) and serves it with ``vllm.LLM`` as a user does (no tokenizer, eager,
greedy, logprobs of the sampled token), and writes one JSON object to ANSWER: each
request's tokens and logprobs, vLLM's own speculative counters
(``vllm:spec_decode_*``) for each batch, or the error the engine raised.

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

__all__ = ["HIDDEN", "PATCHES", "VOCAB", "main"]

#: The tiny model's sizes.
HIDDEN: Final = 128
VOCAB: Final = 512
_SEED: Final = 1234
#: Logprobs kept per generated token: the sampled one's and the top five.
_TOP: Final = 5


def _model(folder: Path, scale: float, layers: int, seed: int) -> dict[str, Any]:
    torch: Any = importlib.import_module("torch")
    transformers: Any = importlib.import_module("transformers")
    torch.manual_seed(seed)
    # Every layer GDN but the last, full attention: vLLM takes a hybrid model
    # with an attention layer.
    kinds = ["linear_attention"] * (layers - 1) + ["full_attention"]
    config = transformers.Qwen3_5TextConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=256,
        num_hidden_layers=layers,
        layer_types=kinds,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,
        linear_num_key_heads=2,
        linear_num_value_heads=2,
        # 64: vLLM's CPU chunk kernel refuses a head of 32 ("Unexpected head dim size").
        linear_key_head_dim=64,
        linear_value_head_dim=64,
        linear_conv_kernel_dim=4,
        max_position_embeddings=1024,
        initializer_range=scale,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        torch_dtype="bfloat16",
    )
    config.architectures = ["Qwen3_5ForCausalLM"]
    model = transformers.Qwen3_5ForCausalLM(config).eval()
    model.save_pretrained(str(folder), safe_serialization=True)
    return {
        "folder": str(folder),
        "scale": scale,
        "layers": layers,
        "state_effect": _state_effect(torch, model, seed),
    }


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


#: The changes the driver can make to vLLM's CPU GDN path in its own process, at run time.
PATCHES: Final = ("none", "roll-fixed", "roll-fixed+accepted-plus-one")


def _patch(name: str) -> None:
    """Wrap vLLM 0.32.0's ``_spec_forward`` (the CPU GDN verify) in this process.

    ``roll-fixed``: after vLLM's own step, each speculative row's conv buffer
    is rewritten so that it holds, from column 0, the window the step read
    less its first column, then the step's own inputs: where the next step
    reads its history (column ``num_accepted - 1``) whatever the step's
    length. vLLM 0.32.0 puts the inputs at the buffer's end instead, which is
    that place only for a row of 1 + num_spec tokens (docs/findings/). This
    is the layout vLLM 0.33.0's own code keeps (``gdn_attention.py``, in the
    same function). Only vLLM's torch loop is followed (no AMX on the hosts
    read here: the native conv is used with AMX or Arm BF16 alone).

    ``...+accepted-plus-one``: the rollback fault of the self-test, on top of
    the fix: the SSM kernel of each verify is handed each row's accepted count
    one too many (at most its slots), so it resumes from the state one token
    after the last accepted one, while the conv window rolls back right.
    (Handed to the whole step, the count makes vLLM's own roll fail on a
    tensor size instead of computing a wrong state.)
    """
    if name == "none":
        return
    module: Any = importlib.import_module("vllm.model_executor.layers.mamba.ops.cpu.gdn_attention")
    torch: Any = importlib.import_module("torch")
    original = module._spec_forward  # noqa: SLF001 - the function patched
    plus_one = name.endswith("accepted-plus-one")

    def wrapped(
        layer: Any,
        metadata: Any,
        mixed_qkv_spec: Any,
        b_spec: Any,
        a_spec: Any,
        conv_buf: Any,
        ssm_state: Any,
        width: int,
        state_len: int,
    ) -> Any:
        rows = int(metadata.num_spec_decodes)
        starts = metadata.spec_query_start_loc[: rows + 1].tolist()
        slots = metadata.spec_state_indices_tensor[:rows, 0].tolist()
        counts = metadata.num_accepted_tokens[:rows].tolist()
        windows = []
        for row in range(rows):
            offset = int(counts[row]) - 1
            windows.append(conv_buf[slots[row], :, offset : offset + width - 1].clone())
        out = original(
            layer, metadata, mixed_qkv_spec, b_spec, a_spec, conv_buf, ssm_state, width, state_len
        )
        for row in range(rows):
            start, end = int(starts[row]), int(starts[row + 1])
            if end == start:
                continue
            inputs = mixed_qkv_spec[start:end].transpose(0, 1).to(conv_buf.dtype)
            kept = torch.cat([windows[row][:, 1:], inputs], dim=-1)
            conv_buf[slots[row], :, : kept.size(-1)] = kept
        return out

    module._spec_forward = wrapped  # noqa: SLF001 - the function patched
    if plus_one:
        kernels = module.ops
        verify = kernels.fused_sigmoid_gating_delta_rule_update_spec_cpu

        def one_too_many(**arguments: Any) -> Any:
            slots = int(arguments["spec_state_indices"].size(1))
            counts = arguments["num_accepted_tokens"]
            arguments["num_accepted_tokens"] = torch.clamp(counts + 1, max=slots).to(counts.dtype)
            return verify(**arguments)

        kernels.fused_sigmoid_gating_delta_rule_update_spec_cpu = one_too_many


def _generate(request: dict[str, Any]) -> dict[str, Any]:
    patch = str(request.get("patch", "none"))
    in_process = patch != "none" or bool(request.get("in_process"))
    if in_process:
        # The engine and its worker in this process, so that the patch is theirs.
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    vllm: Any = importlib.import_module("vllm")
    _patch(patch)
    options: dict[str, Any] = dict(request["engine"])
    if in_process:
        # The engine's own exception, not EngineDeadError, reaches this process.
        options["distributed_executor_backend"] = "uni"
    llm = vllm.LLM(
        model=request["model"],
        skip_tokenizer_init=True,
        enforce_eager=True,
        dtype="bfloat16",
        seed=0,
        disable_log_stats=False,
        **options,
    )
    params = vllm.SamplingParams(
        temperature=0.0,
        max_tokens=int(request["max_tokens"]),
        logprobs=_TOP,
        ignore_eos=True,
        detokenize=False,
    )
    batches: list[dict[str, Any]] = []
    before = _counters(llm)
    for prompts in request["batches"]:
        given = [{"prompt_token_ids": list(prompt)} for prompt in prompts]
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
        batches.append({"requests": runs, "counters": counters})
        before = after
    return {"batches": batches}


def _end_children() -> None:
    """Kill vLLM's engine and worker processes: with no orderly shutdown they outlive this one."""
    psutil: Any = importlib.import_module("psutil")
    children = psutil.Process().children(recursive=True)
    for child in children:
        child.kill()
    psutil.wait_procs(children, timeout=30)


def main(argv: list[str] | None = None) -> int:
    """``model`` or ``generate``; JSON on stdout."""
    parser = argparse.ArgumentParser(prog="tests/e2e/driver.py")
    commands = parser.add_subparsers(dest="command", required=True)
    model = commands.add_parser("model")
    model.add_argument("folder", type=Path)
    model.add_argument("--scale", type=float, default=0.2)
    model.add_argument("--layers", type=int, default=4)
    model.add_argument("--seed", type=int, default=_SEED)
    generate = commands.add_parser("generate")
    generate.add_argument("answer", type=Path)
    arguments = parser.parse_args(argv)
    if arguments.command == "model":
        made = _model(arguments.folder, arguments.scale, arguments.layers, arguments.seed)
        sys.stdout.write(json.dumps(made) + "\n")
        return 0
    request = json.loads(sys.stdin.read())
    try:
        answer = _generate(request)
    except Exception as error:  # noqa: BLE001 - the engine's failure is the answer
        answer = {"error": f"{type(error).__name__}: {error}", "trace": traceback.format_exc()}
    # A file, not stdout: vLLM's worker processes print there, even after this.
    arguments.answer.write_text(json.dumps(answer) + "\n", encoding="utf-8")
    sys.stdout.flush()
    _end_children()
    os._exit(0)  # vLLM's engine threads can hold an orderly exit for seconds


if __name__ == "__main__":
    sys.exit(main())
