# SPDX-License-Identifier: MIT OR Apache-2.0
"""Each serving engine's small departures from the OpenAI completions API, as data.

Every engine the judge knows serves OpenAI-compatible completions with
logprobs; they differ in how a token id comes back, where the speculative
acceptance counters are, and what tells one engine from another. This module
is the one place that knows those differences: :data:`DIALECTS` holds one
:class:`Dialect` a known engine, and :data:`OPENAI` is the plain fallback for
an engine it does not know (tokens compared as text, acceptance unread).

Where each fact was read (released code, by version, file and line) is in
docs/serving.md, "Dialects".
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Final

__all__ = ["DIALECTS", "OPENAI", "Dialect", "ResponseShape", "dialect_named", "dialect_owning"]


class ResponseShape(enum.Enum):
    """How a completion's tokens and logprobs are laid out in the reply."""

    #: ``/v1/completions``: ``choices[0].logprobs`` with ``tokens``,
    #: ``token_logprobs`` and ``top_logprobs`` (one object a position).
    OPENAI = "openai"
    #: llama-server's own ``/completion``: ``tokens`` (ids) and
    #: ``completion_probabilities`` (``id``, ``logprob``, ``top_logprobs``).
    LLAMA_SERVER = "llama-server"


@dataclass(frozen=True)
class Dialect:
    """One engine's way of serving completions, as the judge needs it."""

    #: The name ``--dialect`` takes and the report prints.
    name: str
    #: The ``owned_by`` values of ``/v1/models`` that name this engine.
    owned_by: frozenset[str]
    shape: ResponseShape
    #: The completion endpoint, below the base URL.
    path: str
    #: The body's names for the prompt, the number of tokens and the top logprobs asked.
    max_tokens_field: str = "max_tokens"
    logprobs_field: str = "logprobs"
    #: Fields the body carries beyond the plain ones (greedy, EOS ignored, ids back).
    extra: dict[str, object] = field(default_factory=dict)
    #: The prefix a token carries where the engine returns ids as text (``token_id:``).
    token_prefix: str = ""
    #: Prometheus counters on ``/metrics``: drafted tokens, accepted tokens (summed over labels).
    drafted_metric: str = ""
    accepted_metric: str = ""
    #: The reply's own counters, as a path of keys: drafted, accepted.
    drafted_field: tuple[str, ...] = ()
    accepted_field: tuple[str, ...] = ()
    #: Where the engine says its release (a JSON object with ``version``), or empty.
    version_path: str = ""

    @property
    def ids(self) -> bool:
        """Whether tokens come back as ids (else as text, compared as text)."""
        return self.shape is ResponseShape.LLAMA_SERVER or bool(self.token_prefix)


#: The plain OpenAI completions API: what an engine the judge does not know is spoken to in.
OPENAI: Final = Dialect(
    name="openai",
    owned_by=frozenset(),
    shape=ResponseShape.OPENAI,
    path="/v1/completions",
)

#: The engines the judge knows, by ``--dialect`` name.
DIALECTS: Final[dict[str, Dialect]] = {
    dialect.name: dialect
    for dialect in (
        Dialect(
            name="vllm",
            owned_by=frozenset({"vllm"}),
            shape=ResponseShape.OPENAI,
            path="/v1/completions",
            extra={"return_tokens_as_token_ids": True, "ignore_eos": True},
            token_prefix="token_id:",  # noqa: S106 - an id's prefix, no secret
            drafted_metric="vllm:spec_decode_num_draft_tokens_total",
            accepted_metric="vllm:spec_decode_num_accepted_tokens_total",
            version_path="/version",
        ),
        Dialect(
            name="llama.cpp",
            owned_by=frozenset({"llamacpp"}),
            shape=ResponseShape.LLAMA_SERVER,
            path="/completion",
            max_tokens_field="n_predict",
            logprobs_field="n_probs",
            extra={"return_tokens": True, "ignore_eos": True, "cache_prompt": True},
            drafted_field=("timings", "draft_n"),
            accepted_field=("timings", "draft_n_accepted"),
        ),
        Dialect(
            name="sglang",
            owned_by=frozenset({"sglang"}),
            shape=ResponseShape.OPENAI,
            path="/v1/completions",
            extra={"ignore_eos": True, "return_spec_tokens_details": True},
            drafted_field=("sglext", "spec_tokens_details", "spec_num_proposed_drafts"),
            accepted_field=("sglext", "spec_tokens_details", "spec_num_correct_drafts"),
        ),
        OPENAI,
    )
}


def dialect_named(name: str, /) -> Dialect:
    """The dialect ``--dialect`` names.

    Raises:
        ValueError: no dialect has that name.
    """
    try:
        return DIALECTS[name]
    except KeyError:
        known = ", ".join(sorted(DIALECTS))
        raise ValueError(f"--dialect {name!r}: not a dialect this judge knows ({known})") from None


def dialect_owning(owned_by: str, /) -> Dialect:
    """The dialect whose engine ``/v1/models`` names with ``owned_by``; :data:`OPENAI` if none."""
    return next((d for d in DIALECTS.values() if owned_by in d.owned_by), OPENAI)
