# SPDX-License-Identifier: MIT OR Apache-2.0
"""An OpenAI-compatible server as the judge reaches it: models, completions, counters.

Standard library only (:mod:`urllib.request`). Every call has a deadline, so
no request thread outlives the run; every failure is one of
:mod:`.errors`' exceptions, worded with the flag and URL the user gave.
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from .dialects import OPENAI, Dialect, ResponseShape, dialect_owning
from .errors import NotOpenAICompatibleError, ServerFailedError, ServerUnreachableError

if TYPE_CHECKING:
    from .workload import Request

__all__ = ["Counters", "Generation", "Served", "Server", "base_url"]

#: The most bytes one reply may hold: a completion of thousands of tokens with logprobs fits.
_MOST_BYTES: Final = 64 << 20


def base_url(given: str, /, *, flag: str) -> str:
    """The server's base URL: ``given`` without a trailing ``/`` or ``/v1``.

    Raises:
        ValueError: ``given`` is not an ``http://`` or ``https://`` URL with a host.
    """
    parts = urllib.parse.urlsplit(given)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ValueError(f"{flag} {given!r}: not an http:// or https:// URL with a host")
    path = parts.path.rstrip("/").removesuffix("/v1").rstrip("/")
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


@dataclass(frozen=True)
class Generation:
    """One request's greedy completion: its tokens and each position's top logprobs.

    A token is its id as text where the engine returns ids, else its text.
    ``logprobs[i]`` maps the tokens the engine listed at position ``i`` (the
    chosen one among them) to their logprobs.
    """

    tokens: tuple[str, ...]
    logprobs: tuple[dict[str, float], ...]
    #: The reply's own speculative counters (drafted, accepted), where the engine gives them.
    drafted: int | None = None
    accepted: int | None = None


@dataclass(frozen=True)
class Counters:
    """The server's speculative counters at one moment, where it exposes them."""

    drafted: float
    accepted: float


@dataclass(frozen=True)
class Served:
    """What ``/v1/models`` says the server serves."""

    models: tuple[str, ...]
    owned_by: str
    #: Figures a model's entry gives that two servers of one model share (vocabulary, length).
    meta: dict[str, object]


class Server:
    """One OpenAI-compatible server: ``role`` (reference or target), its URL and dialect."""

    def __init__(self, role: str, flag: str, url: str, /, *, timeout: float) -> None:
        self.role: Final = role
        self.flag: Final = flag
        self.url: Final = url
        self.timeout: Final = timeout
        self.dialect: Dialect = OPENAI
        self.model = ""

    def _open(self, path: str, body: dict[str, object] | None, /) -> bytes:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        request = urllib.request.Request(self.url + path, data=data, headers=headers)  # noqa: S310 - http(s) only, checked by base_url
        with urllib.request.urlopen(request, timeout=self.timeout) as reply:  # noqa: S310 - as above
            return bytes(reply.read(_MOST_BYTES + 1))

    def served(self) -> Served:
        """What the server says it serves, from ``GET /v1/models``.

        Raises:
            ServerUnreachableError: nothing answers at the URL.
            NotOpenAICompatibleError: the answer is not an OpenAI model list.
        """
        where = f"{self.flag} {self.url}"
        try:
            raw = self._open("/v1/models", None)
        except urllib.error.HTTPError as error:
            error.close()
            raise NotOpenAICompatibleError(
                f"{where}: GET /v1/models answered HTTP {error.code}, "
                "not an OpenAI-compatible server's model list"
            ) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise ServerUnreachableError(f"{where}: nothing answers there ({reason})") from None
        try:
            document = json.loads(raw)
            entries = document["data"]
            models = tuple(str(entry["id"]) for entry in entries)
            owned_by = str(entries[0].get("owned_by", "")) if entries else ""
        except (ValueError, TypeError, KeyError, AttributeError, IndexError):
            raise NotOpenAICompatibleError(
                f"{where}: GET /v1/models did not answer with an OpenAI model list "
                '({"data": [{"id": ...}, ...]})'
            ) from None
        if not models:
            raise NotOpenAICompatibleError(f"{where}: GET /v1/models lists no model")
        meta = entries[0].get("meta") if isinstance(entries[0], dict) else None
        figures: dict[str, object] = dict(meta) if isinstance(meta, dict) else {}
        if isinstance(entries[0], dict) and "max_model_len" in entries[0]:
            figures["max_model_len"] = entries[0]["max_model_len"]
        return Served(models, owned_by, figures)

    def adopt(self, served: Served, model: str, dialect: Dialect | None, /) -> None:
        """Speak ``dialect`` (or the one ``served`` names) for ``model`` from now on."""
        self.model = model
        self.dialect = dialect if dialect is not None else dialect_owning(served.owned_by)

    def release(self) -> str:
        """The engine's release, where its dialect says where to ask; empty if unknown."""
        if not self.dialect.version_path:
            return ""
        try:
            answer = json.loads(self._open(self.dialect.version_path, None))
        except urllib.error.HTTPError as error:
            error.close()
            return ""
        except (urllib.error.URLError, OSError, ValueError):
            return ""
        version = answer.get("version") if isinstance(answer, dict) else None
        return version if isinstance(version, str) else ""

    def body(self, request: Request, top: int, /) -> dict[str, object]:
        """The JSON body that asks this server for ``request``'s greedy completion."""
        body: dict[str, object] = {
            "model": self.model,
            "prompt": request["prompt"],
            self.dialect.max_tokens_field: request["max_tokens"],
            self.dialect.logprobs_field: top,
            "temperature": 0.0,
            **self.dialect.extra,
        }
        if self.dialect.shape is ResponseShape.LLAMA_SERVER:
            del body["model"]
        return body

    def complete(self, request: Request, top: int, /, *, number: int) -> Generation:
        """``request``'s greedy completion with ``top`` logprobs a position.

        Raises:
            ServerFailedError: the server refused the request, died or did not answer in time.
        """
        what = f"request {number}"
        try:
            raw = self._open(self.dialect.path, self.body(request, top))
        except urllib.error.HTTPError as error:
            with error:
                detail = _first_line(error.read(4096).decode(errors="replace"))
            raise ServerFailedError(
                self.role, f"answered HTTP {error.code} to {what}: {detail}", answered=True
            ) from None
        except TimeoutError:
            raise ServerFailedError(
                self.role, f"did not answer {what} within {self.timeout:g} s"
            ) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            if isinstance(reason, TimeoutError | socket.timeout):
                raise ServerFailedError(
                    self.role, f"did not answer {what} within {self.timeout:g} s"
                ) from None
            raise ServerFailedError(self.role, f"stopped answering at {what} ({reason})") from None
        try:
            return _generation(json.loads(raw), self.dialect)
        except (ValueError, TypeError, KeyError, AttributeError, IndexError) as error:
            raise ServerFailedError(
                self.role,
                f"answered {what} with no {self.dialect.name} completion with logprobs ({error})",
            ) from None

    def counters(self) -> Counters | None:
        """The speculative counters on ``/metrics``; None where the dialect or server has none."""
        if not (self.dialect.drafted_metric and self.dialect.accepted_metric):
            return None
        try:
            text = self._open("/metrics", None).decode(errors="replace")
        except urllib.error.HTTPError as error:
            error.close()
            return None
        except (urllib.error.URLError, OSError):
            return None
        drafted = _metric(text, self.dialect.drafted_metric)
        accepted = _metric(text, self.dialect.accepted_metric)
        if drafted is None or accepted is None:
            return None
        return Counters(drafted, accepted)


def _first_line(text: str, /) -> str:
    line = next((line.strip() for line in text.splitlines() if line.strip()), "(no body)")
    return line if len(line) <= 300 else line[:297] + "..."


def _metric(text: str, name: str, /) -> float | None:
    """``name``'s value in Prometheus text, summed over its labels; None if absent."""
    total, seen = 0.0, False
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        if head.split("{")[0].strip() != name:
            continue
        try:
            total += float(value)
        except ValueError:
            continue
        seen = True
    return total if seen else None


def _key(token: object, dialect: Dialect, /) -> str:
    text = str(token)
    if dialect.token_prefix and text.startswith(dialect.token_prefix):
        return text.removeprefix(dialect.token_prefix)
    return text


def _path(document: object, keys: tuple[str, ...], /) -> int | None:
    for key in keys:
        if not isinstance(document, dict):
            return None
        document = document.get(key)
    return int(document) if isinstance(document, int | float) and keys else None


def _generation(document: dict[str, object], dialect: Dialect, /) -> Generation:
    if dialect.shape is ResponseShape.LLAMA_SERVER:
        tokens = tuple(str(int(token)) for token in document["tokens"])  # type: ignore[attr-defined]
        steps = document["completion_probabilities"]
        # A token the speculative path gave comes with no top logprobs and a logprob
        # of 0 that llama-server never computed (tools/server/server-context.cpp,
        # "TODO: set result.probs"): its position is read as unknown, not as certain.
        logprobs = tuple(
            {str(int(top["id"])): float(top["logprob"]) for top in step["top_logprobs"]}
            | {str(int(step["id"])): float(step["logprob"])}
            if step["top_logprobs"]
            else {}
            for step in steps  # type: ignore[attr-defined]
        )
    else:
        choice = document["choices"][0]  # type: ignore[index]
        given = choice["logprobs"]
        tokens = tuple(_key(token, dialect) for token in given["tokens"])
        logprobs = tuple(
            {_key(token, dialect): float(value) for token, value in (top or {}).items()}
            | {token: float(chosen)}
            for token, chosen, top in zip(
                tokens, given["token_logprobs"], given["top_logprobs"], strict=True
            )
        )
    if len(logprobs) != len(tokens):
        raise ValueError(f"{len(tokens)} tokens but {len(logprobs)} logprob positions")
    return Generation(
        tokens,
        logprobs,
        drafted=_path(document, dialect.drafted_field),
        accepted=_path(document, dialect.accepted_field),
    )
