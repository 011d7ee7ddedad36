# SPDX-License-Identifier: MIT OR Apache-2.0
"""The subprocess driver: any runtime's adapter command, reached over pipes.

It survives a broken adapter. A crash, a hang, a line that is not a reply,
extra lines, silence or an early exit each become an :class:`AdapterFailure`
naming the operation, the request, what came back and the tail of the
adapter's stderr; the adapter's whole process group is killed, so nothing is
left behind.
"""

from __future__ import annotations

import contextlib
import os
import queue
import selectors
import shlex
import signal
import subprocess
import threading
import time
from typing import IO, TYPE_CHECKING, Final

from spec import protocol
from spec.driver import Implementation, is_stateful

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["DEFAULT_TIMEOUT", "AdapterFailure", "SubprocessDriver", "split_command"]

#: Seconds an adapter may take over one reply, or to exit at end of input.
DEFAULT_TIMEOUT: Final = 10.0

# After this many hangs, the driver stops waiting on the adapter: shrinking a
# failing example would otherwise wait out the timeout again and again.
_HANGS_BEFORE_GIVING_UP: Final = 2

_STDERR_TAIL_BYTES: Final = 2000


class AdapterFailure(AssertionError):  # noqa: N818 - it reads as what happened
    """The adapter under test broke the protocol (RB-PROTO-1 to RB-PROTO-5).

    ``hung`` says the adapter went silent (no reply, or no exit) for its whole
    timeout, rather than answering wrongly.
    """

    def __init__(self, message: str, /, *, hung: bool = False) -> None:
        super().__init__(message)
        self.hung: Final = hung


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


class _AdapterProcess:
    """One running adapter, with its output read on threads so no read blocks."""

    def __init__(self, argv: Sequence[str], timeout: float, /) -> None:
        self.argv = list(argv)
        self.timeout = timeout
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._stderr = bytearray()
        self._stderr_lock = threading.Lock()
        self._process = _start(self.argv)
        assert self._process.stdout is not None
        assert self._process.stderr is not None
        self._readers = [
            threading.Thread(target=self._read_lines, args=(self._process.stdout,), daemon=True),
            threading.Thread(target=self._read_stderr, args=(self._process.stderr,), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_lines(self, stream: IO[bytes], /) -> None:
        for line in stream:
            self._lines.put(line)
        self._lines.put(None)

    def _read_stderr(self, stream: IO[bytes], /) -> None:
        while chunk := stream.read1(4096):  # type: ignore[attr-defined]
            with self._stderr_lock:
                self._stderr += chunk
                del self._stderr[:-_STDERR_TAIL_BYTES]

    def stderr_tail(self) -> str:
        with self._stderr_lock:
            return self._stderr.decode("utf-8", "replace")

    def failure(
        self, what: str, request: object, came_back: str, /, *, hung: bool = False
    ) -> AdapterFailure:
        """Kill the adapter and describe what went wrong."""
        self.kill()
        return _failure(self.argv, what, request, came_back, self.stderr_tail(), hung=hung)

    def _extra_output(self) -> list[bytes]:
        extra = []
        with contextlib.suppress(queue.Empty):
            while (line := self._lines.get_nowait()) is not None:
                extra.append(line)
        return extra

    def require_no_extra_output(self, request: Mapping[str, object], /) -> None:
        """Fail, naming ``request``, if lines came that no request asked for."""
        extra = self._extra_output()
        if extra:
            shown = _show(b"".join(extra))
            raise self.failure("wrote lines nobody asked for", dict(request), shown)

    def send(self, request: Mapping[str, object], /) -> None:
        self.require_no_extra_output(request)
        assert self._process.stdin is not None
        try:
            self._process.stdin.write(protocol.encode(request).encode("utf-8") + b"\n")
            self._process.stdin.flush()
        except (BrokenPipeError, OSError):
            code = self._exit_code()
            raise self.failure(
                f"exited (code {code}) before the request", dict(request), "(nothing)"
            ) from None

    def send_all(self, requests: Sequence[Mapping[str, object]], /) -> None:
        """Write every request; stop quietly if the adapter goes away."""
        assert self._process.stdin is not None
        data = b"".join(protocol.encode(r).encode("utf-8") + b"\n" for r in requests)
        with contextlib.suppress(OSError, ValueError):
            self._process.stdin.write(data)
            self._process.stdin.flush()

    def receive(self, request: Mapping[str, object], /) -> dict[str, object]:
        try:
            line = self._lines.get(timeout=self.timeout)
        except queue.Empty:
            raise self.failure(
                f"sent no reply within {self.timeout:g} s (hang)",
                dict(request),
                "(nothing)",
                hung=True,
            ) from None
        if line is None:
            code = self._exit_code()
            raise self.failure(
                f"exited (code {code}) without replying", dict(request), "(end of output)"
            )
        try:
            return protocol.decode_reply(line.decode("utf-8"))
        except (UnicodeDecodeError, protocol.MalformedReplyError) as error:
            raise self.failure(
                f"sent a malformed reply: {error}", dict(request), _show(line)
            ) from None

    def _exit_code(self) -> int | None:
        try:
            return self._process.wait(timeout=min(self.timeout, 2.0))
        except subprocess.TimeoutExpired:
            return None

    def finish(self, last_request: Mapping[str, object] | None, /) -> None:
        """Close stdin and require a clean exit with no further output."""
        request = dict(last_request) if last_request is not None else None
        with contextlib.suppress(OSError):
            assert self._process.stdin is not None
            self._process.stdin.close()
        # Wait on the end of stdout, which wakes at once, rather than on
        # Popen.wait's polling, which sleeps in growing steps.
        deadline = time.monotonic() + self.timeout
        self._readers[0].join(timeout=self.timeout)
        try:
            code = self._process.wait(timeout=max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            raise self.failure(
                f"did not exit within {self.timeout:g} s of end of input",
                request,
                "(nothing)",
                hung=True,
            ) from None
        self._readers[1].join(timeout=max(deadline - time.monotonic(), 0.01))
        extra = self._extra_output()
        if extra:
            raise self.failure("wrote lines nobody asked for", request, _show(b"".join(extra)))
        if code != 0:
            raise self.failure(f"exited with code {code} at end of input", request, "(nothing)")
        self.kill()

    def kill(self) -> None:
        """Kill the adapter's whole process group and reap it."""
        _kill_group(self._process)


def _failure(  # noqa: PLR0913 - the parts of one message
    argv: Sequence[str],
    what: str,
    request: object,
    came_back: str,
    stderr: str,
    /,
    *,
    hung: bool = False,
) -> AdapterFailure:
    op = request.get("op") if isinstance(request, dict) else None
    tail = stderr[-_STDERR_TAIL_BYTES:].rstrip() or "(empty)"
    return AdapterFailure(
        f"adapter {shlex.join(argv)} {what}\n"
        f"  op: {op}\n"
        f"  request: {_shown_request(request)}\n"
        f"  came back: {came_back}\n"
        f"  stderr tail:\n    " + tail.replace("\n", "\n    "),
        hung=hung,
    )


def _start(argv: Sequence[str], /) -> subprocess.Popen[bytes]:
    try:
        # Running the user's own adapter is the point; argv, never a shell.
        return subprocess.Popen(  # noqa: S603
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as error:
        raise AdapterFailure(f"cannot start adapter {shlex.join(argv)}: {error}") from None


def _kill_group(process: subprocess.Popen[bytes], /) -> None:
    # The adapter leads its own session, so this reaches its children too.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5.0)
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


def _exchange_once(
    process: subprocess.Popen[bytes], line: bytes, timeout: float, /
) -> tuple[bytes, bytes, bool]:
    """Send one line, then end of input; collect all output until exit or ``timeout``.

    Returns stdout, stderr and whether the deadline passed first. Done by hand
    with a selector over the pipes and a pidfd: Popen.communicate(timeout=...)
    waits for the exit by polling in growing sleeps, which costs a fast
    adapter more than its whole run.
    """
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    with contextlib.suppress(BrokenPipeError):
        process.stdin.write(line)
    with contextlib.suppress(BrokenPipeError):
        process.stdin.close()
    deadline = time.monotonic() + timeout
    out_fd, err_fd = process.stdout.fileno(), process.stderr.fileno()
    chunks: dict[int, list[bytes]] = {out_fd: [], err_fd: []}
    with contextlib.ExitStack() as stack:
        selector = stack.enter_context(selectors.DefaultSelector())
        selector.register(out_fd, selectors.EVENT_READ)
        selector.register(err_fd, selectors.EVENT_READ)
        pidfd = _pidfd(process)
        if pidfd is not None:
            stack.callback(os.close, pidfd)
            selector.register(pidfd, selectors.EVENT_READ)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            ready = selector.select(remaining) if remaining > 0 else []
            if not ready:
                break
            for key, _ in ready:
                if key.fd == pidfd:
                    selector.unregister(key.fd)
                    continue
                data = os.read(key.fd, 65536)
                if data:
                    chunks[key.fd].append(data)
                else:
                    selector.unregister(key.fd)
    out, err = b"".join(chunks[out_fd]), b"".join(chunks[err_fd])
    try:
        process.wait(timeout=max(deadline - time.monotonic(), 0.01))
    except subprocess.TimeoutExpired:
        return out, err, True
    return out, err, False


def _pidfd(process: subprocess.Popen[bytes], /) -> int | None:
    # A pidfd turns readable when the process exits (Linux 5.3 and later).
    try:
        return os.pidfd_open(process.pid)
    except (AttributeError, OSError):
        return None


def _shown_request(request: object, /) -> str:
    # Long enough for any request the properties send, so the counterexample
    # can be replayed from the message alone.
    return "(none)" if request is None else protocol.encode_value(request, limit=2000)


def _show(data: bytes, /) -> str:
    text = data.decode("utf-8", "replace")
    return repr(text if len(text) <= 300 else text[:297] + "...")


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
        self._shared: _AdapterProcess | None = None
        self._hangs = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SubprocessDriver({self.name!r})"

    def request(self, request: Mapping[str, object], /) -> dict[str, object]:
        """Send ``request`` and return the adapter's checked reply.

        Raises:
            AdapterFailure: the adapter broke the protocol.
        """
        if self._hangs >= _HANGS_BEFORE_GIVING_UP:
            raise AdapterFailure(
                f"adapter {self.name} hung {self._hangs} times; not asked again\n"
                f"  op: {request.get('op')}\n"
                f"  request: {_shown_request(dict(request))}"
            )
        with self._lock:
            try:
                if is_stateful(request):
                    return self._request_fresh(request)
                return self._request_shared(request)
            except AdapterFailure as failure:
                if failure.hung:
                    self._hangs += 1
                raise

    def request_many(
        self, requests: Sequence[Mapping[str, object]], /
    ) -> list[dict[str, object] | AdapterFailure]:
        """Pipeline stateless requests through the shared adapter.

        Requests are written on a thread while replies are read, so neither
        side's pipe can fill and stall the other. A failure ends the batch:
        that request and every later one get the failure.
        """
        with self._lock:
            if self._shared is None:
                self._shared = _AdapterProcess(self.argv, self.timeout)
            adapter = self._shared
            replies: list[dict[str, object] | AdapterFailure] = []
            if not requests:
                return replies
            writer = threading.Thread(target=adapter.send_all, args=(requests,), daemon=True)
            try:
                adapter.require_no_extra_output(requests[0])
                writer.start()
                replies.extend(adapter.receive(request) for request in requests)
            except AdapterFailure as failure:
                self._shared = None
                replies.extend([failure] * (len(requests) - len(replies)))
            if writer.ident is not None:
                writer.join(timeout=self.timeout)
            return replies

    def _request_fresh(self, request: Mapping[str, object], /) -> dict[str, object]:
        # One request, then end of input, read without threads (see
        # _exchange_once), which keeps a fresh process close to a bare start.
        process = _start(self.argv)
        line = protocol.encode(request).encode("utf-8") + b"\n"
        try:
            out, err, timed_out = _exchange_once(process, line, self.timeout)
        finally:
            _kill_group(process)
        lines = out.splitlines(keepends=True)
        stderr = err.decode("utf-8", "replace")

        def fail(what: str, came_back: str, /, *, hung: bool = False) -> AdapterFailure:
            return _failure(self.argv, what, dict(request), came_back, stderr, hung=hung)

        if not lines:
            if timed_out:
                raise fail(
                    f"sent no reply within {self.timeout:g} s (hang)", "(nothing)", hung=True
                )
            raise fail(f"exited (code {process.returncode}) without replying", "(end of output)")
        if len(lines) > 1:
            raise fail("wrote lines nobody asked for", _show(b"".join(lines[1:])))
        try:
            reply = protocol.decode_reply(lines[0].decode("utf-8"))
        except (UnicodeDecodeError, protocol.MalformedReplyError) as error:
            raise fail(f"sent a malformed reply: {error}", _show(lines[0])) from None
        if timed_out:
            what = f"did not exit within {self.timeout:g} s of end of input"
            raise fail(what, "(nothing)", hung=True)
        if process.returncode != 0:
            raise fail(f"exited with code {process.returncode} at end of input", "(nothing)")
        return reply

    def _request_shared(self, request: Mapping[str, object], /) -> dict[str, object]:
        if self._shared is None:
            self._shared = _AdapterProcess(self.argv, self.timeout)
        adapter = self._shared
        try:
            adapter.send(request)
            return adapter.receive(request)
        except AdapterFailure:
            # The next request starts a new adapter, so one bad reply cannot
            # poison the replies to every request after it.
            self._shared = None
            raise

    def close(self) -> None:
        """End the shared adapter, requiring a clean exit.

        Raises:
            AdapterFailure: the adapter did not exit cleanly at end of input.
        """
        with self._lock:
            adapter, self._shared = self._shared, None
        if adapter is not None:
            try:
                adapter.finish(None)
            finally:
                adapter.kill()
