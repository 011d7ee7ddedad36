# SPDX-License-Identifier: MIT OR Apache-2.0
"""How an adapter can break the protocol, each way worded once."""

from __future__ import annotations

import enum
import json
import shlex
from typing import TYPE_CHECKING, Final

from .protocol import encode, encode_value

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "AdapterFailure",
    "Breakage",
    "NonConformingReply",
    "PythonCallMismatch",
    "ReplayMismatch",
    "adapter_failure",
    "show_output",
]

# Long enough for any request the properties send, so the counterexample can
# be replayed from the message alone.
_REQUEST_SHOWN_CHARACTERS: Final = 2000
_OUTPUT_SHOWN_CHARACTERS: Final = 300
_REPLY_SHOWN: Final = 2000


class Breakage(enum.Enum):
    """One way an adapter breaks the protocol; the value is its wording."""

    CANNOT_START = "cannot be started: {error}"
    HANG = "sent no reply within {timeout:g} s (hang)"
    EXITED_WITHOUT_REPLY = "exited (code {code}) without replying"
    MALFORMED_REPLY = "sent a malformed reply: {error}"
    EXTRA_LINES = "wrote lines nobody asked for"
    NO_EXIT = "did not exit within {timeout:g} s of end of input"
    BAD_EXIT = "exited with code {code} at end of input"
    OUTPUT_HELD = "exited, but a process outside its process group still holds its stdout"
    GAVE_UP = "hung {hangs} times; not asked again"

    @property
    def hung(self) -> bool:
        """Whether this breakage is the adapter going silent for its whole timeout."""
        return self in {Breakage.HANG, Breakage.NO_EXIT, Breakage.OUTPUT_HELD}


class AdapterFailure(AssertionError):  # noqa: N818 - it reads as what happened
    """The adapter under test broke the protocol (RB-PROTO-1 to RB-PROTO-5).

    ``breakage`` says how; ``hung`` says the adapter went silent for its
    whole timeout, rather than answering wrongly; ``request`` is the request
    it broke on, when there was one, and ``line`` the exact line sent for it.
    """

    def __init__(
        self,
        message: str,
        breakage: Breakage,
        /,
        request: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(message)
        self.breakage: Final = breakage
        self.hung: Final = breakage.hung
        self.request: Final = None if request is None else dict(request)
        #: The driver sets it when the line sent was not ``request`` encoded.
        self.line: str | None = None if request is None else encode(request)


class NonConformingReply(AssertionError):  # noqa: N818 - it reads as what happened
    """A well-formed reply that the model does not allow for its request.

    ``line`` is the exact request line sent, when it was not ``request``
    encoded (a number written ``1e2``, a duplicate key); ``note`` says which
    part of the reply is wrong, when the reply is long; ``clauses``, when
    given, are the clauses the wrong part breaks, narrower than the
    property's. The reply shows as the adapter wrote it, when it kept its line.
    """

    def __init__(  # noqa: PLR0913 - the exchange, and what narrows its reading
        self,
        request: Mapping[str, object],
        reply: Mapping[str, object],
        allowed: Sequence[Mapping[str, object]] | str,
        /,
        *,
        line: str | None = None,
        note: str | None = None,
        clauses: Sequence[str] = (),
    ) -> None:
        if not isinstance(allowed, str):
            allowed = " or ".join(encode(expected) for expected in allowed)
        sent = encode(request) if line is None else line
        noted = "" if note is None else f"\n  wrong:   {note}"
        written = getattr(reply, "line", "")
        shown = _shortened(written) if written else encode_value(dict(reply), limit=_REPLY_SHOWN)
        super().__init__(
            "the reply is not one the model allows\n"
            f"  request: {sent}\n"
            f"  reply:   {shown}{noted}\n"
            f"  allowed: {allowed}"
        )
        self.request: Final = dict(request)
        self.line: Final = sent
        self.clauses: Final = tuple(clauses)


class PythonCallMismatch(AssertionError):  # noqa: N818 - it reads as what happened
    """A call of a Python implementation that did not do what the model allows.

    Worded as a protocol failure is: the call, what came back, what the model
    allows, and a line to paste that makes the call again; ``clauses`` are the
    clauses the wrong part breaks.
    """

    def __init__(
        self,
        call: str,
        came_back: str,
        allowed: str,
        /,
        *,
        clauses: Sequence[str],
        reproduction: str,
    ) -> None:
        super().__init__(
            "the call did not do what the model allows\n"
            f"  call:      {call}\n"
            f"  came back: {came_back}\n"
            f"  allowed:   {allowed}\n"
            f"reproduce: {reproduction}"
        )
        self.clauses: Final = tuple(clauses)


class ReplayMismatch(AssertionError):  # noqa: N818 - it reads as what happened
    """A ``replay`` reply whose states are not the model's within the pipeline's bound.

    ``wrong`` names the round, field and index, both values and the bound;
    ``clauses`` are the clauses the request checks (with those of ``more``,
    the names of other requests that failed alike, shown in one line).
    """

    def __init__(  # noqa: PLR0913 - the exchange, what is wrong, and what is blamed
        self,
        request: Mapping[str, object],
        reply: Mapping[str, object],
        wrong: str,
        /,
        *,
        allowed: str,
        clauses: Sequence[str],
        more: Sequence[str] = (),
    ) -> None:
        sent = encode(request)
        written = getattr(reply, "line", "") or encode(dict(reply))
        also = f"\n  more:    {len(more)} more failed too: {', '.join(more)}" if more else ""
        super().__init__(
            "the replayed states are not the model's within the bound\n"
            f"  request: {_shortened(sent)}\n"
            f"  reply:   {_shortened(written)}\n"
            f"  wrong:   {wrong}\n"
            f"  allowed: {allowed}{also}"
        )
        self.request: Final = dict(request)
        self.line: Final = sent
        self.clauses: Final = tuple(clauses)


def _shortened(text: str, /) -> str:
    return text if len(text) <= _REPLY_SHOWN else f"{text[: _REPLY_SHOWN - 3]}..."


def show_output(data: bytes, /) -> str:
    """What an adapter wrote, shortened: its lines as written, or a JSON string.

    Plain text shows as it is, a line after another; text with control
    characters, or bytes that are not UTF-8, shows as a JSON string, whose
    escapes any language reads the same.
    """
    text = data.decode("utf-8", "replace")
    limit = _OUTPUT_SHOWN_CHARACTERS
    shown = text if len(text) <= limit else text[: limit - 3] + "..."
    lines = shown.removesuffix("\n").split("\n")
    plain = "\ufffd" not in shown and not any(
        ord(character) < 0x20 or ord(character) == 0x7F for line in lines for character in line
    )
    if plain and any(lines):
        return "\n    ".join(lines)
    return json.dumps(shown, ensure_ascii=False)


def adapter_failure(
    argv: Sequence[str],
    breakage: Breakage,
    request: Mapping[str, object] | None,
    /,
    *,
    came_back: str = "(nothing)",
    stderr: str = "",
    **details: object,
) -> AdapterFailure:
    """The failure for ``breakage`` on ``request``, worded the one way.

    ``details`` fill the breakage's wording (``timeout``, ``code``, ...).
    """
    what = breakage.value.format(**details)
    if breakage is Breakage.CANNOT_START:
        return AdapterFailure(f"adapter {shlex.join(argv)} {what}", breakage, request)
    shown = (
        "(none)"
        if request is None
        else encode_value(dict(request), limit=_REQUEST_SHOWN_CHARACTERS)
    )
    op = None if request is None else request.get("op")
    tail = stderr.rstrip() or "(empty)"
    return AdapterFailure(
        f"adapter {shlex.join(argv)} {what}\n"
        f"  op: {op}\n"
        f"  request: {shown}\n"
        f"  came back: {came_back}\n"
        f"  stderr tail:\n    " + tail.replace("\n", "\n    "),
        breakage,
        request,
    )
