# SPDX-License-Identifier: MIT OR Apache-2.0
"""The one interface the properties talk to, and its in-process driver.

A property sends a protocol request and judges the reply; it never learns
which driver answered. :mod:`ssm_rollback_spec.harness.subprocess_driver` is the other
driver.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Self

from . import protocol
from .adapter import respond
from .protocol import STATEFUL_OPS
from .python_impl import REFERENCE, load_python_implementation

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .python_impl import PythonImplementation

__all__ = ["Implementation", "InProcessDriver", "is_stateful"]


class Implementation(abc.ABC):
    """An implementation under test, reached through the adapter protocol."""

    #: How reports name this implementation.
    name: str
    #: The Python objects, for in-process implementations only.
    python: PythonImplementation | None

    @abc.abstractmethod
    def request(
        self, request: Mapping[str, object], /, *, line: str | None = None
    ) -> dict[str, object]:
        """Send one request and return its reply, checked for shape.

        ``trace`` and ``race`` each see a published mode nobody has written.
        ``line`` is the exact text to send instead of ``request`` encoded,
        for what an encoder never writes (``1e2``, ``-0``, a duplicate key);
        ``request`` is then what it decodes to.
        """

    def close(self) -> None:  # noqa: B027 - most drivers hold nothing
        """Release whatever the driver holds; it may not be used afterwards."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def is_stateful(request: Mapping[str, object], /) -> bool:
    """Whether ``request`` needs a published mode nobody has written (RB-PROTO-5)."""
    return request.get("op") in {op.value for op in STATEFUL_OPS}


class InProcessDriver(Implementation):
    """Answers requests by calling a Python implementation in this process."""

    python: PythonImplementation

    def __init__(self, python: PythonImplementation, /) -> None:
        self.name = f"{python.import_path} (in-process)"
        self.python = python

    def __repr__(self) -> str:
        return f"InProcessDriver({self.python.import_path!r})"

    @classmethod
    def load(cls, import_path: str = REFERENCE, /) -> InProcessDriver:
        """The driver over the implementation at ``import_path`` (the reference by default).

        Raises:
            ImplementationModuleError: ``import_path`` names no implementation.
        """
        return cls(load_python_implementation(import_path))

    def request(
        self, request: Mapping[str, object], /, *, line: str | None = None
    ) -> dict[str, object]:
        """Answer ``request`` (or ``line``) through the adapter's own translation."""
        line = protocol.encode(request) if line is None else line
        api = self.python.fresh() if is_stateful(request) else self.python.api
        reply = respond(api, line)
        # A round trip through the wire format, so a reply that could not be
        # sent fails here as it would from an adapter.
        return protocol.decode_reply(protocol.encode(reply))
