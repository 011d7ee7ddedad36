# SPDX-License-Identifier: MIT OR Apache-2.0
"""Judging an implementation's reply by the reference model."""

from __future__ import annotations

import argparse
import json
import shlex
from typing import TYPE_CHECKING

from ssm_rollback_spec import model
from ssm_rollback_spec.harness.failures import NonConformingReply, PythonCallMismatch
from ssm_rollback_spec.harness.oracle import allowed_replies, blamed_clauses
from ssm_rollback_spec.harness.protocol import SPANS, reply_matches
from ssm_rollback_spec.harness.race_evidence import MalformedSpansError, reply_spans

if TYPE_CHECKING:
    import types
    from collections.abc import Mapping, Sequence

    from ssm_rollback_spec.harness.driver import Implementation
    from ssm_rollback_spec.harness.python_impl import PythonImplementation
    from ssm_rollback_spec.harness.race_evidence import Span


def exchange(
    impl: Implementation,
    request: Mapping[str, object],
    /,
    *,
    line: str | None = None,
    allowed: Sequence[Mapping[str, object]] | None = None,
) -> dict[str, object]:
    """Send ``request`` and require a reply the model allows; return the reply.

    ``line`` is the exact text to send, when it is not ``request`` encoded;
    ``allowed`` replaces the model's replies where the protocol allows more
    than the model says (a byte order mark may be read or refused).

    Raises:
        NonConformingReply: the reply is not one the model allows; it carries
            the request, so ``check`` can show and export the exchange.
    """
    reply = impl.request(request, line=line)
    if allowed is None:
        allowed = allowed_replies(request)
    if not any(reply_matches(reply, expected) for expected in allowed):
        raise NonConformingReply(
            request, reply, allowed, line=line, clauses=blamed_clauses(request, reply)
        )
    return reply


def spans_of(
    request: Mapping[str, object], reply: Mapping[str, object], /, *, rounds: int | None = None
) -> list[list[Span]] | None:
    """The spans a race's reply gives its calls, round by round; None when it gives none.

    Raises:
        NonConformingReply: the reply gives spans of the wrong shape (RB-PROTO-3).
    """
    events = request["events"]
    assert isinstance(events, list)
    try:
        return reply_spans(reply, calls=len(events), rounds=rounds)
    except MalformedSpansError as error:
        shape = "[START, END] per call" if rounds is None else "[[START, END] per call] per round"
        raise NonConformingReply(
            request,
            reply,
            f'no "{SPANS}", or {shape} (docs/protocol-race-evidence.md)',
            note=str(error),
            clauses=("RB-PROTO-3",),
        ) from None


def ok_value(impl: Implementation, request: Mapping[str, object], /) -> object:
    """The ``ok`` value of a reply the model allows, or None for an error reply."""
    return exchange(impl, request).get("ok")


def _allowed_parse(text: str, /) -> str:
    expected = model.parse(text)
    if isinstance(expected, model.Rejected):
        return f"raises UnknownSsmRollbackModeError: {expected.message}"
    return f"returns the mode whose value and str are {expected!r}"


def _wrong_parse(text: str, outcome: object, error: type[ValueError], /) -> tuple[str, ...]:
    """The clauses a parse outcome breaks (none when it is what the model allows)."""
    expected = model.parse(text)
    if isinstance(expected, model.Rejected):
        if not isinstance(outcome, error):
            return ("RB-PARSE-1",)
        return () if str(outcome) == expected.message else ("RB-PARSE-2",)
    if isinstance(outcome, BaseException) or getattr(outcome, "value", None) != expected:
        return ("RB-PARSE-1",)
    return () if str(outcome) == expected else ("RB-MODE-1",)


def _came_back(outcome: object, /) -> str:
    if isinstance(outcome, BaseException):
        return f"raised {type(outcome).__name__}: {outcome}"
    return f"returned {outcome!r} (str {str(outcome)!r})"


def parsed(python_api: PythonImplementation, text: str, /, argument: str | None = None) -> object:
    """The implementation's parse of ``argument`` (``text`` itself by default), judged as ``text``.

    Returns the mode, or None for a text the parse rightly refused.

    Raises:
        PythonCallMismatch: the parse did not do what the model allows for
            ``text``, naming the clause the wrong part breaks.
    """
    given = text if argument is None else argument
    call = f"parse_ssm_rollback_mode({json.dumps(text)})"
    outcome: object
    try:
        outcome = python_api.api.parse_ssm_rollback_mode(given)
    except Exception as error:  # noqa: BLE001 - whatever it raises is judged
        outcome = error
    clauses = _wrong_parse(text, outcome, python_api.api.UnknownSsmRollbackModeError)
    if clauses:
        raise PythonCallMismatch(
            call,
            _came_back(outcome),
            _allowed_parse(text),
            clauses=clauses,
            reproduction=python_api.reproduction(f"m.{call}"),
        )
    return None if isinstance(outcome, BaseException) else outcome


def option_parsed(option: types.ModuleType, import_path: str, text: str, /) -> object:
    """``--ssm-rollback-mode=TEXT`` through the option module's parser, judged by the model.

    Returns the parsed mode, or None for a text rightly refused.

    Raises:
        PythonCallMismatch: the option did not do what the model allows.
    """
    parser = argparse.ArgumentParser(prog="serve", exit_on_error=False)
    option.add_ssm_rollback_mode_argument(parser)
    argument = f"--ssm-rollback-mode={text}"
    expected = model.parse(text)
    outcome: object
    try:
        outcome = parser.parse_args([argument]).ssm_rollback_mode
    except argparse.ArgumentError as error:
        outcome = error
    if isinstance(expected, model.Rejected):
        allowed = f"fails with: argument --ssm-rollback-mode: {expected.message}"
        wrong = not isinstance(outcome, argparse.ArgumentError)
        clauses = ("RB-PARSE-1",) if wrong else ()
        if not wrong and str(outcome) != f"argument --ssm-rollback-mode: {expected.message}":
            clauses = ("RB-PARSE-2",)
    else:
        allowed = f"parses to the mode whose value is {expected!r}"
        clauses = () if getattr(outcome, "value", None) == expected else ("RB-PARSE-1",)
    if clauses:
        module = import_path.partition(":")[0].rpartition(".")[0] + ".argparse_mode"
        code = (
            'import argparse, importlib; p = argparse.ArgumentParser(prog="serve"); '
            f"importlib.import_module({json.dumps(module)}).add_ssm_rollback_mode_argument(p); "
            f"print(p.parse_args([{json.dumps(argument)}]))"
        )
        raise PythonCallMismatch(
            f"{option.__name__}: parse_args([{json.dumps(argument)}])",
            _came_back(outcome),
            allowed,
            clauses=clauses,
            reproduction=f"python -c {shlex.quote(code)}",
        )
    return None if isinstance(outcome, BaseException) else outcome
