# SPDX-License-Identifier: MIT OR Apache-2.0
"""Speculative decoding changes nothing a request generates: vLLM 0.32.0 on a CPU.

The property runs on two tiny targets in turn (``family``): a Qwen3.5 and a
Qwen3-Next, each with its draft model and its MTP module. Each target
(``driver.py``) follows a successor map where its recurrent state does not
outweigh it, so its greedy output repeats its prompts' cycles and leaves
them where the state decides: ngram's drafts, the draft model's (a one-layer
Qwen3 that always drafts the successor) and MTP's (the module vLLM builds
from the ``mtp.*`` tensors the driver writes into the target's checkpoint,
which mostly drafts the successor too) are accepted in part. Each engine is started
once per family (``driver.py serve``) and
serves every batch given to it: fixed batches (``BATCHES``), then batches
Hypothesis draws (prompts of 1 token up, cycles, repeated n-grams, distinct
tokens, prompts of exactly K and K + 1 tokens, several at once with
``max_num_seqs`` 8, so that the scheduler mixes prompts, verifies and plain
decodes), greedy, the top five logprobs per token, prefix caching off.

The property is judged against the same engine on the same speculative path
with a drafter that never drafts (ngram looking up 64 tokens): BF16 on both
sides through the same kernels, so what differs is what the drafts and their
rollbacks did. Request by request: equal tokens, each token's logprob within
``BOUND``, and where the two first pick different tokens, a near-tie (each
token in the other run's top five, within ``BOUND`` of its choice), after
which nothing is compared. vLLM's own counters (``vllm:spec_decode_*``) are
printed beside each run, and the judged runs must have accepted drafts and
rejected ones.

Every speculative run carries 0.33.0's conv roll put back into 0.32.0
(``roll-fixed``), and the draft model's runs its own KV cache group
(``draft-group-fixed``): without them vLLM 0.32.0 is wrong (two findings,
held here as deviations; docs/findings/). The self-test's fault, an
accepted count one too many, is rejected, under the draft model and under
MTP. docs/engines-vllm-e2e.md ("vLLM end to end
on a CPU") gives the measured figures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from enum import Enum
from typing import TYPE_CHECKING, Any, Final

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from ssm_rollback_spec.serving.client import Generation
from ssm_rollback_spec.serving.judge import Outcome, compare

from .conftest import DRIVER
from .driver import GRAMMAR, allowed, successor

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

__all__: list[str] = []

pytestmark = pytest.mark.e2e

#: Draft tokens per verify.
K: Final = 3
#: Logprob distance allowed between the two runs. Measured: 0.0, every token and
#: logprob of every request equal bit for bit between the reference and the ngram
#: and draft-model runs (the same kernels on both sides); the fault changes every
#: request, moving logprobs by up to 0.47 before its first changed token
#: (docs/engines-vllm-e2e.md).
BOUND: Final = 0.0
#: The model's vocabulary and its successor map's cycle (driver.py).
_VOCAB: Final = 512
_CYCLE: Final = 4
#: Tokens generated per request: fixed batches, drawn ones.
_TOKENS: Final = 16
_DRAWN_TOKENS: Final = 12
#: Drawn batches per run of the property.
_EXAMPLES: Final = 20


def _cycle(start: int, length: int) -> tuple[int, ...]:
    """``length`` tokens of the successor map from ``start`` (driver.py's ``successor``)."""
    base = start - start % _CYCLE
    return tuple(base + (start - base + index) % _CYCLE for index in range(length))


def _gram(seed: int, size: int, length: int) -> tuple[int, ...]:
    gram = [(seed * 37 + 5 * index) % 509 + 1 for index in range(size)]
    return tuple((gram * (length // size + 1))[:length])


def _distinct(seed: int, length: int) -> tuple[int, ...]:
    return tuple((seed * 101 + 7 * index) % 509 + 1 for index in range(length))


#: The fixed batches: the successor's cycles (ngram finds their continuation in
#: the prompt), repeated n-grams off the cycles, distinct tokens; prompts of 2,
#: K and K + 1 tokens beside longer ones; and one request alone, so that a step
#: in which it drafts nothing is a step in which no request drafts (its cycle
#: is one both targets take a draft of, then leave: found by serving every
#: cycle alone).
BATCHES: Final = (
    (
        _cycle(100, 12),
        (*_cycle(201, 8), 7, 8),
        _distinct(2, 40),
        _cycle(300, K),
        _cycle(400, K + 1),
        (17, 18),
    ),
    (
        _gram(4, 2, K),
        _distinct(7, K + 1),
        _gram(6, 4, 20),
        _cycle(50, 24),
        (*_distinct(5, 12), *_cycle(60, 6)),
    ),
    (_cycle(20, 12),),
)
#: Where ``BATCHES`` holds its request alone.
_ALONE: Final = 2
#: A batch under structured output (driver.py's ``GRAMMAR``, which holds every
#: other cycle of the successor map): cycles the grammar holds, cycles it does
#: not, and allowed cycles whose continuation in the prompt leaves them, so that
#: ngram drafts tokens the grammar refuses beside ones it takes.
STRUCTURED: Final = (
    _cycle(0, 12),
    _cycle(4, 12),
    (*_cycle(8, 6), *_cycle(12, 4), *_cycle(8, 3)),
    (*_cycle(16, 4), *_cycle(20, 4), *_cycle(16, 4), *_cycle(20, 2)),
    (*_cycle(300, 8), *_cycle(305, 5)),
    _distinct(3, 10),
)
#: The engines that load the tokenizer structured output reads (driver.py).
_STRUCTURED_ENGINES: Final = ("reference", "ngram")
#: ngram as the tier runs it: short lookups, so that it drafts, often fewer than K.
_NGRAM: Final = {
    "method": "ngram",
    "num_speculative_tokens": K,
    "prompt_lookup_max": 2,
    "prompt_lookup_min": 1,
}
#: The same speculative path with a drafter that never finds a match: no drafts.
_NO_DRAFTS: Final = {**_NGRAM, "prompt_lookup_max": 64, "prompt_lookup_min": 64}
#: MTP: vLLM 0.32.0 builds the drafter from the target's own checkpoint's ``mtp.*``
#: tensors (config/speculative.py lines 1147-1158 and 917-935).
_MTP: Final = {"method": "mtp", "num_speculative_tokens": K}
_FIXES: Final = ["roll-fixed"]
_DRAFT_FIXES: Final = ["roll-fixed", "draft-group-fixed"]
#: The engines the module keeps: speculative config (``draft`` for the draft
#: model's), the driver's patches.
_PLAN: Final[dict[str, tuple[dict[str, Any] | str, list[str]]]] = {
    "reference": (_NO_DRAFTS, _FIXES),
    "ngram": (_NGRAM, _FIXES),
    "draft": ("draft", _DRAFT_FIXES),
    "fault": ("draft", [*_DRAFT_FIXES, "accepted-plus-one"]),
    "draft-released": ("draft", _FIXES),
    "mtp": (_MTP, _FIXES),
    "mtp-fault": (_MTP, [*_FIXES, "accepted-plus-one"]),
}
#: The engines the self-test's fault is injected into.
_FAULTS: Final = ("fault", "mtp-fault")
_COUNTERS: Final = {
    "drafts": "vllm:spec_decode_num_drafts",
    "draft tokens": "vllm:spec_decode_num_draft_tokens",
    "accepted": "vllm:spec_decode_num_accepted_tokens",
}


def _draft(model: dict[str, Any]) -> dict[str, Any]:
    # vLLM 0.32.0 calls it "draft_model" (config/speculative.py lines 73-77, 1386).
    return {"method": "draft_model", "model": model["draft"], "num_speculative_tokens": K}


class _Engine:
    """One ``vllm.LLM`` in the venv's Python (``driver.py serve``), serving batches on demand."""

    def __init__(self, python: str, folder: Path, name: str, config: dict[str, Any]) -> None:
        self.name = name
        self._log = folder / f"{name}.log"
        read, write = os.pipe()
        with self._log.open("w", encoding="utf-8") as log:
            self._process = subprocess.Popen(
                [python, str(DRIVER), "serve", str(write)],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(write,),
                text=True,
                env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"},
            )
        os.close(write)
        self._answers = os.fdopen(read, encoding="utf-8")
        self._send(config)
        self._ready: dict[str, Any] | None = None

    def _send(self, message: dict[str, Any]) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(message) + "\n")
        self._process.stdin.flush()

    def _answer(self) -> dict[str, Any]:
        line = self._answers.readline()
        if not line:
            tail = self._log.read_text(encoding="utf-8")[-2000:]
            return {"error": f"{self.name}: the engine exited without answering\n{tail}"}
        answer: dict[str, Any] = json.loads(line)
        return answer

    def ready(self) -> dict[str, Any]:
        """``{"ready": true}`` once started, or the error the start raised."""
        if self._ready is None:
            self._ready = self._answer()
        return self._ready

    def serve(
        self, prompts: Any, tokens: int = _TOKENS, regex: str | None = None
    ) -> dict[str, Any]:
        """One batch: each request's tokens and logprobs and vLLM's counters, or an error.

        With ``regex``, every request under that structured output.
        """
        started = self.ready()
        if "error" in started:
            return started
        batch: dict[str, Any] = {"prompts": [list(prompt) for prompt in prompts]}
        batch["max_tokens"] = tokens
        if regex is not None:
            batch["regex"] = regex
        self._send(batch)
        return self._answer()

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._answers.close()


def _config(model: dict[str, Any], speculative: dict[str, Any] | str | None, **engine: Any) -> Any:
    options: dict[str, Any] = {"enable_prefix_caching": False, "max_model_len": 256}
    options["max_num_seqs"] = 8
    options.update(engine)
    if speculative == "draft":
        options["speculative_config"] = _draft(model)
    elif isinstance(speculative, dict):
        options["speculative_config"] = speculative
    return options


def _tally(answers: list[dict[str, Any]]) -> dict[str, int]:
    """vLLM's counters summed over batches, by ``_COUNTERS``' short names, and the rejected."""
    totals = {
        short: int(sum(answer["counters"].get(name, 0.0) for answer in answers))
        for short, name in _COUNTERS.items()
    }
    totals["rejected"] = totals["draft tokens"] - totals["accepted"]
    return totals


def _generation(run: dict[str, Any]) -> Generation:
    """A request the driver served, as the serving judge reads one."""
    return Generation(
        tuple(str(token) for token in run["tokens"]),
        tuple({str(k): float(v) for k, v in step.items()} for step in run["logprobs"]),
    )


def _judge(reference: list[dict[str, Any]], speculative: list[dict[str, Any]]) -> list[str]:
    """Where the speculative run breaks the property, one line each; empty when it holds.

    Judged by serve-check's own comparison (ssm_rollback_spec.serving.judge),
    within ``BOUND``: the project has one judge of speculative against plain
    decoding, whether it reads a server's replies or the driver's.
    """
    found: list[str] = []
    for number, (ours, theirs) in enumerate(zip(reference, speculative, strict=True)):
        for index, (base, spec) in enumerate(
            zip(ours["requests"], theirs["requests"], strict=True)
        ):
            judged = compare(_generation(base), _generation(spec), bound=BOUND)
            if judged.outcome is Outcome.FAILED:
                found.append(f"batch {number} request {index}: {judged.sentence()}")
    return found


def _distance(reference: list[dict[str, Any]], speculative: list[dict[str, Any]]) -> str:
    """The largest logprob distance before each request's first differing token, and who differ."""
    largest, differ, total = 0.0, 0, 0
    for ours, theirs in zip(reference, speculative, strict=True):
        for base, spec in zip(ours["requests"], theirs["requests"], strict=True):
            total += 1
            differ += int(base != spec)
            for step, (want, got) in enumerate(zip(base["tokens"], spec["tokens"], strict=True)):
                if want != got:
                    break
                mine, other = base["logprobs"][step], spec["logprobs"][step]
                largest = max(largest, abs(mine[str(want)] - other[str(got)]))
    return f"largest logprob distance {largest:.3g}, {differ} of {total} requests differ"


@pytest.fixture(scope="module", params=["qwen3.5", "qwen3-next"])
def family(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The target the property's engines serve: the tiny Qwen3.5, then the tiny Qwen3-Next."""
    made: dict[str, Any] = request.getfixturevalue(
        "tiny_model" if request.param == "qwen3.5" else "next_model"
    )
    return made


@pytest.fixture(scope="module")
def engines(
    e2e_python: str, family: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, _Engine]]:
    """Each engine of ``_PLAN`` started once per family, all at once; closed after it."""
    folder = tmp_path_factory.mktemp("e2e-engines")
    started = {
        name: _Engine(
            e2e_python,
            folder,
            name,
            {
                "model": family["target"],
                "engine": _config(family, speculative),
                "patches": patches,
                "tokenizer": name in _STRUCTURED_ENGINES,
            },
        )
        for name, (speculative, patches) in _PLAN.items()
    }
    try:
        for engine in started.values():
            assert "error" not in engine.ready(), engine.ready().get("error")
        yield started
    finally:
        for engine in started.values():
            engine.close()


@pytest.fixture(scope="module")
def fixed(engines: dict[str, _Engine], family: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The fixed batches through every engine, vLLM's counters printed beside each run."""
    served: dict[str, list[dict[str, Any]]] = {}
    for name, engine in engines.items():
        answers = [engine.serve(batch) for batch in BATCHES]
        for answer in answers:
            assert "error" not in answer, f"{name}: {answer.get('error')}"
        counts = _tally(answers)
        sys.stdout.write(f"{family['family']} {name}: vLLM's counters, fixed batches {counts}\n")
        served[name] = answers
        if name != "reference":
            measured = _distance(served["reference"], answers)
            sys.stdout.write(f"{family['family']} {name} against the reference: {measured}\n")
    return served


def test_the_target_follows_its_successor_map_and_its_recurrent_state(
    family: dict[str, Any],
) -> None:
    follows, effect = family["follows"], family["state_effect"]
    # Drafts of the successor are accepted in part: the target picks it often, not always.
    assert 0.5 <= follows["target"] <= 0.95, follows
    assert follows["draft"] == 1.0, follows
    # Zeroing the recurrent state moves the logits by more than a nat (median).
    assert effect["median_move"] >= 1.0, effect


def test_the_judged_runs_accept_some_drafts_and_reject_others(
    fixed: dict[str, list[dict[str, Any]]],
) -> None:
    for name in ("ngram", "draft", "mtp", *_FAULTS):
        counts = _tally(fixed[name])
        assert counts["accepted"] > 0, (name, counts)
        assert counts["rejected"] > 0, (name, counts)
    assert _tally(fixed["reference"])["drafts"] == 0, _tally(fixed["reference"])


def test_ngram_changes_nothing_a_request_generates(
    fixed: dict[str, list[dict[str, Any]]],
) -> None:
    assert _judge(fixed["reference"], fixed["ngram"]) == []


def test_ngram_under_structured_output_changes_nothing_a_request_generates(
    engines: dict[str, _Engine], family: dict[str, Any]
) -> None:
    # vLLM #56419's setting (structured output beside drafts) on the CPU build:
    # the scheduler cuts drafts the grammar refuses, which can shorten a window
    # (the counters are printed, not asserted: a cut depends on the weights).
    served = {name: engines[name].serve(STRUCTURED, regex=GRAMMAR) for name in _STRUCTURED_ENGINES}
    for name, answer in served.items():
        assert "error" not in answer, f"{name}: {answer.get('error')}"
    counts = _tally([served["ngram"]])
    sys.stdout.write(f"{family['family']} ngram, structured output: vLLM's counters {counts}\n")
    held = [t for answer in served.values() for run in answer["requests"] for t in run["tokens"]]
    # The grammar bound every token both engines generated ...
    assert [token for token in held if not allowed(token)] == []
    # ... drafts were taken under it ...
    assert counts["accepted"] > 0, counts
    # ... and speculating changed nothing.
    assert _judge([served["reference"]], [served["ngram"]]) == []


def test_a_step_in_which_no_request_drafts_follows_accepted_drafts(
    fixed: dict[str, list[dict[str, Any]]],
) -> None:
    # vLLM #55504/#56531's step, served: the request alone takes ngram's draft
    # of its cycle's next tokens, then generates a token its context never
    # held, after which ngram (lookups of 1 or 2 tokens) has nothing to draft,
    # so the batch's next step drafts nothing, the row having accepted drafts.
    # test_ngram_changes_nothing_a_request_generates judges the batch too.
    (prompt,) = BATCHES[_ALONE]
    answer = fixed["ngram"][_ALONE]
    tokens = answer["requests"][0]["tokens"]
    fresh = [i for i, token in enumerate(tokens[:-1]) if token not in (*prompt, *tokens[:i])]
    assert fresh, tokens
    # Before it, the cycle's continuation: what ngram drafted from the prompt.
    continuation = [successor(prompt[-1])]
    while len(continuation) < fresh[0]:
        continuation.append(successor(continuation[-1]))
    assert fresh[0] >= 1, tokens
    assert tokens[: fresh[0]] == continuation, tokens
    assert _tally([answer])["accepted"] > 0, answer["counters"]
    assert tokens == fixed["reference"][_ALONE]["requests"][0]["tokens"]


def test_a_draft_model_changes_nothing_a_request_generates(
    fixed: dict[str, list[dict[str, Any]]],
) -> None:
    assert _judge(fixed["reference"], fixed["draft"]) == []


def test_mtp_changes_nothing_a_request_generates(
    fixed: dict[str, list[dict[str, Any]]],
) -> None:
    assert _judge(fixed["reference"], fixed["mtp"]) == []


@pytest.mark.parametrize("faulty", _FAULTS)
def test_the_property_rejects_an_accepted_count_one_too_many(
    fixed: dict[str, list[dict[str, Any]]], faulty: str
) -> None:
    assert _judge(fixed["reference"], fixed[faulty]) != []


def test_released_0_32_0_draft_model_writes_into_the_targets_recurrent_state(
    fixed: dict[str, list[dict[str, Any]]],
) -> None:
    # A deviation (docs/findings/vllm-draft-model-hybrid-kv-group.md): red once vLLM is fixed.
    found = _judge(fixed["reference"], fixed["draft-released"])
    released, fixed_up = _tally(fixed["draft-released"]), _tally(fixed["draft"])
    # What the wrong tables do to the acceptance rate depends on the host's CPU path
    # (1 of 267 accepted on an AVX-512 host, 101 of 219 on an AVX2 one, against about
    # 100 of 230 with the fix): the finding is the changed output, on every host.
    sys.stdout.write(f"draft model, released: {released}; with its own group: {fixed_up}\n")
    assert len(found) >= 3, found


def _prompt(kind: str, start: int, length: int, tokens: list[int]) -> tuple[int, ...]:
    if kind == "cycle":
        return _cycle(start, length)
    if kind == "gram":
        gram = tokens[: 1 + start % 3]
        return tuple((gram * length)[:length])
    return tuple((tokens * (length // len(tokens) + 1))[:length])


_LENGTHS: Final = st.one_of(st.sampled_from([1, 2, K, K + 1]), st.integers(1, 40))
_PROMPTS: Final = st.builds(
    _prompt,
    st.sampled_from(["cycle", "gram", "drawn"]),
    st.integers(0, _VOCAB - 1),
    _LENGTHS,
    st.lists(st.integers(0, _VOCAB - 1), min_size=3, max_size=40),
)
#: Batches of 2 to 6 prompts: what the property draws.
_BATCHES: Final = st.lists(_PROMPTS, min_size=2, max_size=6)


def test_drawn_batches_change_nothing_a_request_generates(
    engines: dict[str, _Engine], family: dict[str, Any]
) -> None:
    served: dict[str, list[dict[str, Any]]] = {"ngram": [], "draft": [], "mtp": []}

    @settings(
        settings.get_profile("interpreter"),
        max_examples=_EXAMPLES,
        phases=(Phase.explicit, Phase.reuse, Phase.generate),
    )
    @given(batch=_BATCHES)
    def judged(batch: list[tuple[int, ...]]) -> None:
        reference = engines["reference"].serve(batch, _DRAWN_TOKENS)
        assert "error" not in reference, reference.get("error")
        for name, answers in served.items():
            answer = engines[name].serve(batch, _DRAWN_TOKENS)
            assert "error" not in answer, f"{name}: {answer.get('error')}"
            answers.append(answer)
            assert _judge([reference], [answer]) == [], (name, batch)

    judged()
    for name, answers in served.items():
        counts = _tally(answers)
        drawn = f"{len(answers)} drawn batches"
        sys.stdout.write(f"{family['family']} {name}: vLLM's counters, {drawn} {counts}\n")
        assert counts["accepted"] > 0, (name, counts)
        assert counts["rejected"] > 0, (name, counts)


_ONE_ROW_SCRIPT: Final = "vllm_cpu_one_token_prefill.py"
#: What the one-token reproducer says where the CPU takes the torch conv.
_NOT_REACHED: Final = (
    "not reached: this CPU has no AVX-512 BF16 (nor ARM BF16), so vLLM's plain\n"
    "GDN prefill takes the torch conv (gdn_attention.py line 213), not the C++ op;\n"
    "the prompt [17] is served here\n"
)
#: Each finding's reproducer and what it prints while its bug is in the release (the
#: one-token one: where the CPU takes the C++ conv).
_REPRODUCERS: Final = {
    "vllm_cpu_gdn_short_verify.py": "differs",
    "vllm_draft_model_hybrid_kv_group.py": "differs",
    "vllm_cpu_align_precopy_triton.py": (
        "the first step failed: TypeError: 'function' object is not subscriptable\n"
    ),
    _ONE_ROW_SCRIPT: "failed: RuntimeError: causal_conv1d_fwd_cpu: expect x to be transposed.",
}


#: vLLM 0.32.0's predicate, asked of torch alone: AVX-512 BF16, or an ARM CPU with BF16.
_CPP_CONV: Final = (
    "import platform, torch; print(torch.cpu._is_avx512_bf16_supported() or "
    "(platform.machine() in ('aarch64', 'arm64') and "
    "bool(torch.cpu.get_capabilities().get('bf16', False))))"
)


class _Conv(Enum):
    """The conv vLLM's plain GDN prefill takes on this CPU (gdn_attention.py line 213)."""

    CPP = "the C++ op"
    TORCH = "the torch loop"


@pytest.fixture(scope="module")
def prefill_conv(e2e_python: str) -> _Conv:
    done = subprocess.run(
        [e2e_python, "-c", _CPP_CONV],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return _Conv.CPP if done.stdout.strip() == "True" else _Conv.TORCH


def _reproduce(python: str, reproducer: str, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python, str(DRIVER.parents[2] / "docs" / "findings" / reproducer), *options],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )


@pytest.mark.parametrize("reproducer", list(_REPRODUCERS))
def test_the_findings_reproducers_still_fail_on_0_32_0(
    e2e_python: str, prefill_conv: _Conv, reproducer: str
) -> None:
    # A deviation: each standalone reproducer exits 1 while its bug is in the release;
    # the one-token prefill's says it is not reached where the CPU takes the torch conv.
    done = _reproduce(e2e_python, reproducer)
    if reproducer == _ONE_ROW_SCRIPT and prefill_conv is _Conv.TORCH:
        assert (done.returncode, done.stdout) == (2, _NOT_REACHED), done.stderr[-2000:]
        return
    assert done.returncode == 1, done.stdout + done.stderr[-2000:]
    assert _REPRODUCERS[reproducer] in done.stdout


def test_prefix_caching_off_under_speculation_on_a_cpu_serves_the_precopy_reproducer(
    e2e_python: str,
) -> None:
    # The precopy page's suggested config-time fix, put in the reproducer's serving process.
    done = _reproduce(e2e_python, "vllm_cpu_align_precopy_triton.py", "--try-fix")
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert done.stdout.startswith("served 2 requests: [["), done.stdout


def test_the_one_token_reproducer_with_its_conv_input_relaid_matches_the_speculative_path(
    e2e_python: str, prefill_conv: _Conv
) -> None:
    # The one-token page's suggested fix; on a CPU without the C++ conv, not reached.
    done = _reproduce(e2e_python, _ONE_ROW_SCRIPT, "--try-fix")
    if prefill_conv is _Conv.TORCH:
        assert (done.returncode, done.stdout) == (2, _NOT_REACHED), done.stderr[-2000:]
        return
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert done.stdout.endswith("and equals the run with speculation configured\n"), done.stdout


def _once(python: str, folder: Path, name: str, config: dict[str, Any], prompts: Any) -> str:
    """Start an engine, serve one batch, and return the error it raised ("" if none)."""
    engine = _Engine(python, folder, name, config)
    try:
        return str(engine.serve(prompts).get("error", ""))
    finally:
        engine.close()


@pytest.mark.parametrize("drafter", ["ngram", "draft", "mtp"])
def test_prefix_caching_with_speculation_still_crashes_at_the_first_step(
    e2e_python: str, tiny_model: dict[str, Any], tmp_path: Path, drafter: str
) -> None:
    # A deviation (docs/findings/vllm-cpu-align-precopy-triton.md): red once vLLM runs it.
    speculative: dict[str, Any] | str = {"ngram": _NGRAM, "mtp": _MTP}.get(drafter, "draft")
    patches = ["draft-group-fixed"] if drafter == "draft" else []
    config = {
        "model": tiny_model["target"],
        "engine": _config(tiny_model, speculative, enable_prefix_caching=True),
        "patches": patches,
    }
    error = _once(e2e_python, tmp_path, f"cached-{drafter}", config, BATCHES[0])
    assert "'function' object is not subscriptable" in error, error


def test_a_prompt_of_one_token_still_crashes_the_plain_prefill(
    e2e_python: str, tiny_model: dict[str, Any], tmp_path: Path, prefill_conv: _Conv
) -> None:
    # A deviation (docs/findings/vllm-cpu-one-token-prefill.md): red once vLLM serves it
    # where the plain prefill takes the C++ conv; where it takes the torch loop, served.
    config = {"model": tiny_model["target"], "engine": _config(tiny_model, None), "patches": []}
    error = _once(e2e_python, tmp_path, "one", config, ((17,),))
    if prefill_conv is _Conv.TORCH:
        assert error == "", error
        return
    assert "expect x to be transposed" in error, error
