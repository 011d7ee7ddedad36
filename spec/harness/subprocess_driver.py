# SPDX-License-Identifier: MIT OR Apache-2.0
"""The subprocess driver: any runtime's adapter command, reached over pipes.

It survives a broken adapter. A crash, a hang, a line that is not a reply,
extra lines, silence or an early exit each become an :class:`AdapterFailure`
(worded in :mod:`ssm_rollback_spec.harness.failures`); the adapter's whole process group
is killed, so nothing of the harness's is left behind.
"""

from __future__ import annotations

import math
import shlex
import threading
import time
from typing import TYPE_CHECKING, Final

from . import protocol
from .driver import Implementation, is_stateful
from .failures import AdapterFailure, Breakage, adapter_failure, show_output
from .process import AdapterProcess, Timeout

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "DEFAULT_RACE_BUDGET",
    "DEFAULT_TIMEOUT",
    "MAX_TIMEOUT",
    "SubprocessDriver",
    "parse_race_budget",
    "parse_timeout",
    "split_command",
]

#: Seconds an adapter may take over one reply, or to exit at end of input.
DEFAULT_TIMEOUT: Final = 10.0

#: Seconds the suite spends racing in fresh processes by default (``--race-budget``).
DEFAULT_RACE_BUDGET: Final = 4.0

#: The longest timeout accepted: a day is past any sane reply, and keeps deadlines finite.
MAX_TIMEOUT: Final = 86_400.0

# After this many hangs, the driver stops waiting on the adapter: shrinking a
# failing example would otherwise wait out the timeout again and again.
_HANGS_BEFORE_GIVING_UP: Final = 2

# How long an adapter's stdout may stay open after it exits: a child of its
# own group holding it is killed then, and one outside the group reported.
_OUTPUT_GRACE_SECONDS: Final = 1.0
_EXIT_CODE_SECONDS: Final = 2.0


def parse_timeout(text: str, /) -> float:
    """A timeout in seconds: a finite number above 0 and at most ``MAX_TIMEOUT``.

    Raises:
        ValueError: ``text`` is not such a number.
    """
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= MAX_TIMEOUT:
        raise ValueError(
            f"must be a number of seconds above 0 and at most {MAX_TIMEOUT:g}, got {text!r}"
        )
    return seconds


def parse_race_budget(text: str, /) -> float:
    """A race budget in seconds: a finite number from 0 to ``MAX_TIMEOUT``.

    Raises:
        ValueError: ``text`` is not such a number.
    """
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds <= MAX_TIMEOUT:
        raise ValueError(f"must be a number of seconds from 0 to {MAX_TIMEOUT:g}, got {text!r}")
    return seconds


def _line_bytes(line: str, /) -> bytes:
    try:
        return line.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        raise protocol.UnencodableMessageError(
            f"cannot be sent as UTF-8, it holds a lone surrogate: {line[:200]!a}"
        ) from None


def split_command(command: str, /) -> list[str]:
    """Split an adapter command with shell rules; it is never run by a shell.

    Raises:
        ValueError: the command is empty or its quoting is unbalanced.
    """
    try:
        argv = shlex.split(command)
    except ValueError as error:
        raise ValueError(f"cannot split adapter command {command!r}: {error}") from None
    if not argv:
        raise ValueError("the adapter command is empty")
    return argv


class SubprocessDriver(Implementation):
    """Drives an adapter command over the JSON-lines protocol.

    Stateless requests share one long-lived adapter; each ``trace`` and
    ``race`` gets a fresh adapter process of its own (RB-PROTO-5).
    """

    python = None

    def __init__(self, argv: Sequence[str], /, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.argv = list(argv)
        self.name = shlex.join(self.argv)
        self.timeout = timeout
        self._shared: AdapterProcess | None = None
        self._hangs = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SubprocessDriver({self.name!r})"

    def request(
        self, request: Mapping[str, object], /, *, line: str | None = None
    ) -> dict[str, object]:
        """Send ``request`` (or the exact ``line``) and return the adapter's checked reply.

        Raises:
            AdapterFailure: the adapter broke the protocol.
            UnencodableMessageError: ``request`` cannot be sent as UTF-8.
        """
        data = protocol.encode_line(request) if line is None else _line_bytes(line)
        try:
            return self._request_data(request, data)
        except AdapterFailure as failure:
            if line is not None:
                failure.line = line
            raise

    def _request_data(self, request: Mapping[str, object], line: bytes, /) -> dict[str, object]:
        with self._lock:
            self._require_not_given_up(request)
            try:
                if is_stateful(request):
                    return self._request_fresh(request, line)
                adapter = self._shared_adapter(request)
                adapter.write(line)
                return self._receive(adapter, request)
            except AdapterFailure as failure:
                self._note(failure)
                raise

    def request_many(
        self,
        requests: Sequence[Mapping[str, object]],
        /,
        lines: Sequence[str | None] = (),
    ) -> list[dict[str, object] | AdapterFailure]:
        """Pipeline stateless requests through the shared adapter.

        The first request goes alone, so an adapter that does not flush its
        replies fails there, on one request, instead of hiding behind the
        pipeline. A failure ends the batch: that request and every later one
        get the failure. ``lines`` holds, request by request, the exact line
        to send instead of the request encoded, or None.

        Raises:
            UnencodableMessageError: a request cannot be sent as UTF-8.
        """
        exact = [*lines, *[None] * (len(requests) - len(lines))]
        lines_sent = [
            protocol.encode_line(request) if text is None else _line_bytes(text)
            for request, text in zip(requests, exact, strict=True)
        ]
        replies: list[dict[str, object] | AdapterFailure] = []
        with self._lock:
            try:
                for index, request in enumerate(requests):
                    if index <= 1:
                        # Lines waiting now were asked for by nobody.
                        self._require_not_given_up(request)
                        adapter = self._shared_adapter(request)
                        for line in lines_sent[:1] if index == 0 else lines_sent[1:]:
                            adapter.write(line)
                    replies.append(self._receive(adapter, request))
            except AdapterFailure as failure:
                self._note(failure)
                replies.extend([failure] * (len(requests) - len(replies)))
        return replies

    def close(self) -> None:
        """End the shared adapter, requiring a clean exit.

        Raises:
            AdapterFailure: the adapter did not exit cleanly at end of input.
        """
        with self._lock:
            adapter, self._shared = self._shared, None
        if adapter is not None:
            try:
                self._finish(adapter, None)
            finally:
                adapter.kill()

    def __exit__(self, *raised: object) -> None:
        # Left by an exception (a stop signal among them): the adapter is ended
        # at once, not waited for, and the exception is the one that counts.
        if raised[0] is None:
            self.close()
        else:
            self.abandon()

    def abandon(self) -> None:
        """End the shared adapter, its process group killed, without judging how it ends."""
        with self._lock:
            adapter, self._shared = self._shared, None
        if adapter is not None:
            adapter.kill()

    def _note(self, failure: AdapterFailure, /) -> None:
        # The shared adapter is dead now; the next request starts a new one,
        # so one bad reply cannot poison the replies to every request after.
        self._shared = None
        if failure.hung:
            self._hangs += 1

    def _require_not_given_up(self, request: Mapping[str, object], /) -> None:
        if self._hangs >= _HANGS_BEFORE_GIVING_UP:
            raise adapter_failure(self.argv, Breakage.GAVE_UP, request, hangs=self._hangs)

    def _start(self, request: Mapping[str, object], /) -> AdapterProcess:
        try:
            return AdapterProcess(self.argv)
        except OSError as error:
            raise adapter_failure(self.argv, Breakage.CANNOT_START, request, error=error) from None

    def _shared_adapter(self, request: Mapping[str, object], /) -> AdapterProcess:
        if self._shared is None:
            self._shared = self._start(request)
        else:
            extra = self._shared.unread_output()
            if extra:
                raise self._fail(
                    self._shared, Breakage.EXTRA_LINES, request, came_back=show_output(extra)
                )
        return self._shared

    def _fail(
        self,
        adapter: AdapterProcess,
        breakage: Breakage,
        request: Mapping[str, object] | None,
        /,
        *,
        came_back: str = "(nothing)",
        error: object = None,
    ) -> AdapterFailure:
        adapter.kill()
        return adapter_failure(
            self.argv,
            breakage,
            request,
            came_back=came_back,
            stderr=adapter.stderr_tail(),
            timeout=self.timeout,
            code=adapter.returncode,
            error=error,
        )

    def _receive(
        self, adapter: AdapterProcess, request: Mapping[str, object], /
    ) -> dict[str, object]:
        line = adapter.read_line(time.monotonic() + self.timeout)
        if line is Timeout.TIMEOUT:
            raise self._fail(adapter, Breakage.HANG, request)
        if line is None:
            adapter.wait_exit(time.monotonic() + min(self.timeout, _EXIT_CODE_SECONDS))
            raise self._fail(
                adapter, Breakage.EXITED_WITHOUT_REPLY, request, came_back="(end of output)"
            )
        try:
            return protocol.decode_reply(line.decode("utf-8"))
        except (UnicodeDecodeError, protocol.MalformedReplyError) as error:
            raise self._fail(
                adapter, Breakage.MALFORMED_REPLY, request, came_back=show_output(line), error=error
            ) from None

    def _finish(self, adapter: AdapterProcess, request: Mapping[str, object] | None, /) -> None:
        # End of input, then a clean exit with nothing more written.
        adapter.close_input()
        now = time.monotonic()
        code = adapter.wait_exit(now + self.timeout)
        if code is None:
            raise self._fail(adapter, Breakage.NO_EXIT, request)
        grace = min(self.timeout, _OUTPUT_GRACE_SECONDS)
        if not adapter.wait_end_of_output(time.monotonic() + grace):
            # A child still in the adapter's group dies with it; one that
            # left the group keeps the pipe open, and is reported.
            adapter.kill_group()
            if not adapter.wait_end_of_output(time.monotonic() + grace):
                raise self._fail(adapter, Breakage.OUTPUT_HELD, request)
        extra = adapter.unread_output()
        if extra:
            raise self._fail(adapter, Breakage.EXTRA_LINES, request, came_back=show_output(extra))
        if code != 0:
            raise self._fail(adapter, Breakage.BAD_EXIT, request)
        adapter.kill()

    def _request_fresh(self, request: Mapping[str, object], line: bytes, /) -> dict[str, object]:
        adapter = self._start(request)
        try:
            adapter.write(line)
            adapter.close_input()
            reply = self._receive(adapter, request)
            self._finish(adapter, request)
        finally:
            adapter.kill()
        return reply
