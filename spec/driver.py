# SPDX-License-Identifier: MIT OR Apache-2.0
"""The one interface the properties talk to, and its in-process driver.

A property sends a protocol request and judges the reply; it never learns
which driver answered. :mod:`spec.subprocess_driver` is the other driver.
"""

from __future__ import annotations

import abc
import contextlib
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, Self, TypeVar

from spec import protocol, rollback
from spec.adapter import respond
from spec.first_write_wins import FirstWriteWins
from spec.protocol import STATEFUL_OPS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from contextlib import AbstractContextManager

    from spec.adapter import RollbackApi

__all__ = ["Cell", "Implementation", "InProcessDriver", "PythonApi", "is_stateful"]

_T = TypeVar("_T")


class Cell(Protocol, Generic[_T]):
    """The first-write-wins cell's Python API (:class:`FirstWriteWins` is one)."""

    def set(self, value: _T, /) -> _T: ...  # noqa: D102
    def get_or_init(self, default: _T, /) -> _T: ...  # noqa: D102
    def get(self) -> _T | None: ...  # noqa: D102


@dataclass(frozen=True)
class PythonApi:
    """What only an in-process implementation offers: its Python objects.

    ``fresh`` gives the API with a published mode nobody has written yet, for
    as long as its context lasts; ``new_cell`` makes an empty cell;
    ``import_path`` (``module`` or ``module:attribute``) loads the same API in
    a fresh interpreter, for the checks that need a whole process.
    """

    api: RollbackApi
    import_path: str
    fresh: Callable[[], AbstractContextManager[RollbackApi]]
    new_cell: Callable[[], Cell[object]]


class Implementation(abc.ABC):
    """An implementation under test, reached through the adapter protocol."""

    #: How reports name this implementation.
    name: str
    #: The Python objects, for in-process implementations only.
    python: PythonApi | None

    @abc.abstractmethod
    def request(self, request: Mapping[str, object], /) -> dict[str, object]:
        """Send one request and return its reply, checked for shape.

        ``trace`` and ``race`` each see a published mode nobody has written.
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
    """Answers requests by calling a Python API in this process."""

    def __init__(self, name: str, python: PythonApi, /) -> None:
        self.name = name
        self.python = python

    def __repr__(self) -> str:
        return f"InProcessDriver({self.name!r})"

    @classmethod
    def reference(cls) -> InProcessDriver:
        """The driver over :mod:`spec.rollback`."""
        return cls(
            "spec.rollback (in-process)",
            PythonApi(
                api=rollback,
                import_path="spec.rollback",
                fresh=_fresh_reference,
                new_cell=FirstWriteWins,
            ),
        )

    def request(self, request: Mapping[str, object], /) -> dict[str, object]:
        """Answer ``request`` through the adapter's own translation."""
        assert self.python is not None
        line = protocol.encode(request)
        if is_stateful(request):
            with self.python.fresh() as api:
                reply = respond(api, line)
        else:
            reply = respond(self.python.api, line)
        # A round trip through the wire format, so a reply that could not be
        # sent fails here as it would from an adapter.
        return protocol.decode_reply(protocol.encode(reply))


# One fresh published mode at a time: the reference has a single module cell.
_REFERENCE_CELL_LOCK = threading.Lock()


@contextlib.contextmanager
def _fresh_reference() -> Iterator[RollbackApi]:
    # The published mode cannot be reset, by design; the harness swaps the
    # module's cell instead, so the real public functions see an empty one.
    with _REFERENCE_CELL_LOCK:
        saved = rollback._ROLLBACK_MODE  # noqa: SLF001 - the harness's one test seam
        rollback._ROLLBACK_MODE = FirstWriteWins()  # noqa: SLF001
        try:
            yield rollback
        finally:
            rollback._ROLLBACK_MODE = saved  # noqa: SLF001
