# SPDX-License-Identifier: MIT OR Apache-2.0
"""A toy serving engine with a recurrent state, speculating right or wrong on purpose.

``python -m ssm_rollback_spec.serving.toy --port P [options]`` serves, on
loopback, what serve-check's self-test (:mod:`.selftest`) needs of an engine: an
OpenAI-compatible ``/v1/completions`` in vLLM's dialect (token ids as
``token_id:N``, ``/metrics`` with vLLM's speculative counters, ``/version``)
or, with ``--as llama.cpp``, llama-server's ``/completion``. Tests may also
start it on a thread (:func:`serving`).

Its model is a toy with a recurrent state: a state of ``_WIDTH`` numbers
that decays and takes each token's embedding, and logits that lead each
token to its successor (its cycle of four) while the state decides the
rest. Greedy decoding, one token a step, is the plain path. With
``--spec ngram`` it speculates as an ngram drafter does: it looks the last
tokens up earlier in the sequence, verifies the drafts in one step, keeps
the per-token states of that step and rolls back to the last accepted one.
What it gets wrong on purpose:

- ``--fault one-token``: the rollback keeps the state one token past the
  last accepted draft (it has taken the first rejected draft);
- ``--fault drift``: the rollback restores the right state plus an error
  that grows with every rollback of the request (small at first);
- ``--verify-noise EPS``: a correct rollback, but the verify step rounds
  otherwise than a decode: its logits and the states it writes move by up
  to EPS, by a hash of the position, the step's rows and how many requests
  are in flight (as a GPU kernel's tiling follows the batch);
- ``--spec never``: speculation on, with a drafter that never drafts: every
  step is a verify of one row (with ``--verify-noise``, noisy as any verify);
- ``--die-after N`` (answers HTTP 500 to request N + 1, then exits), ``--die-on
  TOKEN`` (the same, for a prompt that holds that token id), ``--die-with N``
  (the same, for a request that arrives with N others in flight; with ``--step``),
  ``--hang-after N`` (never answers after N requests; with ``--pid-file
  PATH``, it writes its pid to PATH when it first hangs), ``--not-openai``
  (answers every path with a web page), ``--model NAME`` and
  ``--vocab N`` (served as ``meta.n_vocab`` in llama.cpp's dialect).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import random
import struct
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["Config", "ToyEngine", "main", "serving"]

_WIDTH: Final = 4
_DECAY: Final = 0.8
_LEAD: Final = 2.5
_CYCLE: Final = 4
#: How long a step takes by default: none. The verdict's noise sources need no two
#: requests to share a step, and the self-test runs four times faster without.
_STEP: Final = 0.0


@dataclass(frozen=True)
class Config:
    """What the engine serves and what it gets wrong."""

    spec: str = "none"
    num_drafts: int = 3
    fault: str = "none"
    verify_noise: float = 0.0
    vocab: int = 64
    model: str = "toy-recurrent"
    dialect: str = "vllm"
    die_after: int | None = None
    #: A prompt holding this token id kills the server, as a crash in the engine would.
    die_on: int | None = None
    #: A request that arrives with this many others in flight kills the server: a crash
    #: that only requests sent together cause (give the toy a ``step`` so they overlap).
    die_with: int | None = None
    hang_after: int | None = None
    not_openai: bool = False
    seed: int = 7
    #: Seconds a step takes: more than 0 makes requests sent at once share steps,
    #: and the verify path's rounding (keyed by the requests in flight) follow the batch.
    step: float = _STEP


def _unit(*parts: object) -> float:
    """A number in [-1, 1] fixed by ``parts``."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    (value,) = struct.unpack("<Q", digest)
    return float(value) / 2**63 - 1.0


class ToyEngine:
    """The toy model and its two ways of generating: plain and speculative."""

    def __init__(self, config: Config, /) -> None:
        self.config = config
        rng = random.Random(config.seed)  # noqa: S311 - toy weights
        self.embed = [[rng.gauss(0, 0.3) for _ in range(_WIDTH)] for _ in range(config.vocab)]
        self.head = [[rng.gauss(0, 1.0) for _ in range(_WIDTH)] for _ in range(config.vocab)]
        self.lock = threading.Lock()
        self.in_flight = 0
        self.served = 0
        self.drafted = 0
        self.accepted = 0

    def _take(self, state: list[float], token: int, /) -> list[float]:
        vector = self.embed[token % self.config.vocab]
        return [_DECAY * s + v for s, v in zip(state, vector, strict=True)]

    def _logprobs(self, state: list[float], last: int, /) -> list[float]:
        vocab = self.config.vocab
        lead = (last // _CYCLE) * _CYCLE + (last + 1) % _CYCLE
        logits = [
            sum(w * s for w, s in zip(row, state, strict=True))
            + (_LEAD if t == lead % vocab else 0)
            for t, row in enumerate(self.head)
        ]
        top = max(logits)
        total = top + math.log(sum(math.exp(x - top) for x in logits))
        return [x - total for x in logits]

    def _noisy(self, values: list[float], *key: object) -> list[float]:
        eps = self.config.verify_noise
        if not eps:
            return values
        return [v + eps * _unit(*key, i) for i, v in enumerate(values)]

    def _draft(self, sequence: list[int], /) -> list[int]:
        if self.config.spec != "ngram":
            return []
        for n in (2, 1):
            if len(sequence) <= n:
                continue
            tail = sequence[-n:]
            for start in range(len(sequence) - n - 1, -1, -1):
                if sequence[start : start + n] == tail:
                    found = sequence[start + n : start + n + self.config.num_drafts]
                    if found:
                        return found
        return []

    def _verify(
        self, state: list[float], sequence: list[int], drafts: list[int], /
    ) -> tuple[list[list[float]], list[tuple[int, list[float]]], int]:
        """One verify step: the per-token states it writes, the rows' tokens, the accepted count.

        Its rows are the last token's and each draft's; the states are the
        snapshots a rollback restores.
        """
        rows = len(drafts) + 1
        flight = self.in_flight
        states = [state]
        for index, draft in enumerate(drafts):
            written = self._take(states[-1], draft)
            states.append(self._noisy(written, "state", len(sequence) + index, rows, flight))
        accepted = 0
        emitted: list[tuple[int, list[float]]] = []
        for index in range(rows):
            last = sequence[-1] if index == 0 else drafts[index - 1]
            logprobs = self._noisy(
                self._logprobs(states[index], last), "logits", len(sequence) + index, rows, flight
            )
            token = max(range(len(logprobs)), key=logprobs.__getitem__)
            emitted.append((token, logprobs))
            if index < len(drafts) and token == drafts[index]:
                accepted += 1
                continue
            break
        return states, emitted, accepted

    def generate(self, prompt: list[int], count: int, /) -> list[tuple[int, list[float]]]:
        """``count`` greedy tokens after ``prompt``, each with its position's logprobs."""
        state = [0.0] * _WIDTH
        for token in prompt:
            state = self._take(state, token)
        sequence = list(prompt)
        out: list[tuple[int, list[float]]] = []
        rollbacks = 0
        while len(out) < count:
            drafts = self._draft(sequence) if out else []
            time.sleep(self.config.step)
            if not drafts and (self.config.spec == "none" or not out):
                logprobs = self._logprobs(state, sequence[-1])
                token = max(range(len(logprobs)), key=logprobs.__getitem__)
                out.append((token, logprobs))
                sequence.append(token)
                state = self._take(state, token)
                continue
            states, emitted, accepted = self._verify(state, sequence, drafts)
            with self.lock:
                self.drafted += len(drafts)
                self.accepted += accepted
            kept = emitted[: count - len(out)]
            out += kept
            sequence += [token for token, _ in kept]
            restored = states[accepted]
            if accepted < len(drafts):
                rollbacks += 1
                if self.config.fault == "one-token":
                    restored = states[accepted + 1]
                elif self.config.fault == "drift":
                    restored = [s + 2e-3 * rollbacks for s in restored]
            # The bonus token (the first the drafts did not give) is taken by the next
            # step, a verify too: its state is rounded as the verify path rounds.
            if len(kept) > accepted:
                taken = self._take(restored, kept[-1][0])
                state = self._noisy(taken, "state", len(sequence), 1, self.in_flight)
            else:
                state = restored
        return out


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
        """Quiet: the tests read replies, not logs."""

    def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, document: object, status: int = 200) -> None:
        self._send(status, json.dumps(document).encode())

    def do_GET(self) -> None:
        engine = self.server.engine
        config = engine.config
        if config.not_openai:
            self._send(200, b"<html><body>a web page</body></html>", "text/html")
        elif self.path == "/v1/models":
            owned = "llamacpp" if config.dialect == "llama.cpp" else "vllm"
            entry: dict[str, Any] = {"id": config.model, "object": "model", "owned_by": owned}
            if config.dialect == "llama.cpp":
                entry["meta"] = {"n_vocab": config.vocab}
            self._json({"object": "list", "data": [entry]})
        elif self.path == "/metrics" and config.dialect == "vllm":
            label = '{engine="0"}'
            text = (
                f"vllm:spec_decode_num_draft_tokens_total{label} {float(engine.drafted)}\n"
                f"vllm:spec_decode_num_accepted_tokens_total{label} {float(engine.accepted)}\n"
            )
            self._send(200, text.encode(), "text/plain")
        elif self.path == "/version" and config.dialect == "vllm":
            self._json({"version": "0.0.0-toy"})
        else:
            self._json({"error": "not found"}, 404)

    def do_POST(self) -> None:
        engine = self.server.engine
        config = engine.config
        path = "/completion" if config.dialect == "llama.cpp" else "/v1/completions"
        if config.not_openai or self.path != path:
            self._json({"error": "not found"}, 404)
            return
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        with engine.lock:
            engine.served += 1
            number = engine.served
        if config.hang_after is not None and number > config.hang_after:
            self.server.hung()
            # Until the server is ended: a thread of a test's own process ends with it.
            self.server.stopping.wait(3600)
            return
        prompt = body.get("prompt")
        killed = config.die_on is not None and isinstance(prompt, list) and config.die_on in prompt
        killed |= config.die_with is not None and engine.in_flight >= config.die_with
        if killed or (config.die_after is not None and number > config.die_after):
            self._json(
                {"error": "The size of tensor a (6) must match the size of tensor b (4)"}, 500
            )
            self.wfile.flush()
            os._exit(1) if self.server.own_process else self.server.stop_soon()
            return
        prompt = body["prompt"]
        if not isinstance(prompt, list) or not all(0 <= t < config.vocab for t in prompt):
            self._json({"error": f"prompt token ids must be below {config.vocab}"}, 400)
            return
        llama = config.dialect == "llama.cpp"
        count = int(body["n_predict" if llama else "max_tokens"])
        top = int(body["n_probs" if llama else "logprobs"])
        drafted, accepted = engine.drafted, engine.accepted
        with engine.lock:
            engine.in_flight += 1
        try:
            generated = engine.generate(prompt, count)
        finally:
            with engine.lock:
                engine.in_flight -= 1
        self._json(
            _reply(
                generated, top, engine.drafted - drafted, engine.accepted - accepted, llama=llama
            )
        )


def _reply(
    generated: list[tuple[int, list[float]]], top: int, drafted: int, accepted: int, *, llama: bool
) -> dict[str, Any]:
    def best(logprobs: list[float]) -> list[int]:
        return sorted(range(len(logprobs)), key=lambda t: (-logprobs[t], t))[:top]

    if llama:
        return {
            "tokens": [token for token, _ in generated],
            "completion_probabilities": [
                {
                    "id": token,
                    "logprob": logprobs[token],
                    "top_logprobs": [{"id": t, "logprob": logprobs[t]} for t in best(logprobs)],
                }
                for token, logprobs in generated
            ],
            "timings": {"draft_n": drafted, "draft_n_accepted": accepted},
        }
    return {
        "object": "text_completion",
        "choices": [
            {
                "index": 0,
                "text": "",
                "logprobs": {
                    "tokens": [f"token_id:{token}" for token, _ in generated],
                    "token_logprobs": [logprobs[token] for token, logprobs in generated],
                    "top_logprobs": [
                        {f"token_id:{t}": logprobs[t] for t in best(logprobs)}
                        for _, logprobs in generated
                    ],
                },
            }
        ],
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, config: Config, port: int, /, *, own_process: bool, pid_file: Path | None = None
    ) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.engine = ToyEngine(config)
        self.own_process = own_process
        self.pid_file = pid_file
        self.stopping = threading.Event()

    def hung(self) -> None:
        """Say, once, that a request hangs: the pid in the pid file, whole (by a rename)."""
        if self.pid_file is not None and not self.pid_file.exists():
            partial = self.pid_file.with_name(f"{self.pid_file.name}.{threading.get_ident()}")
            partial.write_text(f"{os.getpid()}\n", encoding="utf-8")
            partial.replace(self.pid_file)

    def stop_soon(self) -> None:
        """Stop as a dead process would: no more requests served, new connections refused."""

        def stop() -> None:
            self.shutdown()
            self.server_close()

        threading.Thread(target=stop, daemon=True).start()


@contextlib.contextmanager
def serving(config: Config, /) -> Iterator[str]:
    """The engine served on a thread of this process, at the base URL yielded; ended after."""
    server = _Server(config, 0, own_process=False)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join()


def main(argv: list[str] | None = None) -> int:
    """Serve until killed."""
    parser = argparse.ArgumentParser(prog="python -m ssm_rollback_spec.serving.toy")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--spec", choices=("none", "ngram", "never"), default="none")
    parser.add_argument("--num-drafts", type=int, default=3)
    parser.add_argument("--fault", choices=("none", "one-token", "drift"), default="none")
    parser.add_argument("--verify-noise", type=float, default=0.0)
    parser.add_argument("--vocab", type=int, default=64)
    parser.add_argument("--model", default="toy-recurrent")
    parser.add_argument("--as", dest="dialect", choices=("vllm", "llama.cpp"), default="vllm")
    parser.add_argument("--die-after", type=int)
    parser.add_argument("--die-on", type=int)
    parser.add_argument("--die-with", type=int)
    parser.add_argument("--step", type=float, default=_STEP)
    parser.add_argument("--hang-after", type=int)
    parser.add_argument("--not-openai", action="store_true")
    parser.add_argument("--pid-file", type=Path)
    arguments = parser.parse_args(argv)
    config = Config(
        spec=arguments.spec,
        num_drafts=arguments.num_drafts,
        fault=arguments.fault,
        verify_noise=arguments.verify_noise,
        vocab=arguments.vocab,
        model=arguments.model,
        dialect=arguments.dialect,
        die_after=arguments.die_after,
        die_on=arguments.die_on,
        die_with=arguments.die_with,
        step=arguments.step,
        hang_after=arguments.hang_after,
        not_openai=arguments.not_openai,
    )
    server = _Server(config, arguments.port, own_process=True, pid_file=arguments.pid_file)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
