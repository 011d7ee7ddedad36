# SPDX-License-Identifier: MIT OR Apache-2.0
"""Deliberately wrong implementations: the suite must reject every one.

Each mutant is the reference with one plausible mistake. A property earns
its place by rejecting at least one of them; ``test_mutants.py`` requires the
suite to reject them all, in-process and through the protocol.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import TYPE_CHECKING, ClassVar, Final, Generic, TypeVar

from spec import rollback
from spec.driver import InProcessDriver, PythonApi
from spec.first_write_wins import FirstWriteWins
from spec.rollback import SsmRollbackMode

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from spec.adapter import RollbackApi
    from spec.driver import Cell

_T = TypeVar("_T")
_MAX: Final = rollback.USIZE_MAX


# --- wrong cells ------------------------------------------------------------


class _LastWriteWinsCell(Generic[_T]):
    def __init__(self) -> None:
        self._value: _T | None = None
        self._written = False

    def set(self, value: _T, /) -> _T:
        self._value, self._written = value, True
        return value

    def get_or_init(self, default: _T, /) -> _T:
        if not self._written:
            self._value, self._written = default, True
        return self._value  # type: ignore[return-value]

    def get(self) -> _T | None:
        return self._value


class _NonPinningCell(FirstWriteWins[_T]):
    def get_or_init(self, default: _T, /) -> _T:
        current = self.get()
        return default if current is None else current


class _RacyCell(Generic[_T]):
    """Check, then set, with no lock between them."""

    def __init__(self) -> None:
        self._value: _T | None = None
        self._written = False

    def set(self, value: _T, /) -> _T:
        if not self._written:
            # A real racy cell does more work here: it computes the value,
            # logs, allocates. The sleep stands for that window.
            time.sleep(0)
            self._value = value
            self._written = True
        return self._value  # type: ignore[return-value]

    def get_or_init(self, default: _T, /) -> _T:
        return self.set(default)

    def get(self) -> _T | None:
        return self._value


class _ThreadLocalCell(Generic[_T]):
    def __init__(self) -> None:
        self._local = threading.local()

    def _cell(self) -> FirstWriteWins[_T]:
        if not hasattr(self._local, "cell"):
            self._local.cell = FirstWriteWins()
        cell: FirstWriteWins[_T] = self._local.cell
        return cell

    def set(self, value: _T, /) -> _T:
        return self._cell().set(value)

    def get_or_init(self, default: _T, /) -> _T:
        return self._cell().get_or_init(default)

    def get(self) -> _T | None:
        return self._cell().get()


# --- the mutants ------------------------------------------------------------


class Mutant:
    """The reference, on a published mode of its own; subclasses break one thing."""

    new_cell: ClassVar[Callable[[], Cell[object]]] = FirstWriteWins
    #: Whether only the Python API can show the mistake.
    python_only: ClassVar[bool] = False
    default: ClassVar[SsmRollbackMode] = SsmRollbackMode.SNAPSHOT
    #: The property family (``tests/properties/test_<family>.py``) that must reject it.
    family: ClassVar[str]

    def __init__(self) -> None:
        self._published: Cell[object] = type(self).new_cell()

    def parse_ssm_rollback_mode(self, text: str, /) -> SsmRollbackMode:
        return rollback.parse_ssm_rollback_mode(text)

    def set_ssm_rollback_mode(self, mode: object, /) -> SsmRollbackMode:
        if not isinstance(mode, SsmRollbackMode):
            # The reference raises its own type error here.
            return rollback.set_ssm_rollback_mode(mode)  # type: ignore[arg-type]
        return self._published.set(mode)  # type: ignore[return-value]

    def ssm_rollback_mode(self) -> SsmRollbackMode:
        return self._published.get_or_init(self.default)  # type: ignore[return-value]

    def ssm_replay_row_bytes(self, qkvz_elems: int, nv: int) -> int:
        _checked("ssm_replay_row_bytes", qkvz_elems=qkvz_elems, nv=nv)
        return self._row(qkvz_elems, nv)

    def ssm_replay_ring_bytes(
        self, num_ssm_layers: int, row_bytes: int, k_ceiling: int, mtp_state_slots: int
    ) -> int:
        _checked(
            "ssm_replay_ring_bytes",
            num_ssm_layers=num_ssm_layers,
            row_bytes=row_bytes,
            k_ceiling=k_ceiling,
            mtp_state_slots=mtp_state_slots,
        )
        return self._ring(mtp_state_slots, k_ceiling, num_ssm_layers, row_bytes)

    # The arithmetic mutants override these two, after the reference's type
    # and range checks have run, so only the mistake under test differs.
    def _row(self, qkvz_elems: int, nv: int, /) -> int:
        return rollback.ssm_replay_row_bytes(qkvz_elems, nv)

    def _ring(self, slots: int, k: int, layers: int, row: int, /) -> int:
        return rollback.ssm_replay_ring_bytes(layers, row, k, slots)

    def require_verify_rollback_supported(self, mode: SsmRollbackMode, /) -> None:
        rollback.require_verify_rollback_supported(mode)


class LastWriteWins(Mutant):
    family = "published_mode"
    new_cell = _LastWriteWinsCell


class ReadDoesNotPin(Mutant):
    family = "published_mode"
    new_cell = _NonPinningCell


class RacyCheckThenSet(Mutant):
    family = "published_mode"
    new_cell = _RacyCell


class ThreadLocalMode(Mutant):
    family = "published_mode"
    new_cell = _ThreadLocalCell


class DefaultIsReplay(Mutant):
    family = "published_mode"
    default = SsmRollbackMode.REPLAY


class CaseInsensitiveParse(Mutant):
    family = "parse"

    def parse_ssm_rollback_mode(self, text: str, /) -> SsmRollbackMode:
        return rollback.parse_ssm_rollback_mode(text.lower())


class TrimmingParse(Mutant):
    family = "parse"

    def parse_ssm_rollback_mode(self, text: str, /) -> SsmRollbackMode:
        return rollback.parse_ssm_rollback_mode(text.strip())


class PrefixParse(Mutant):
    family = "parse"

    def parse_ssm_rollback_mode(self, text: str, /) -> SsmRollbackMode:
        for mode in SsmRollbackMode:
            if text and mode.value.startswith(text):
                return mode
        return rollback.parse_ssm_rollback_mode(text)


def _parse_with_message(text: str, message: str, /) -> SsmRollbackMode:
    # The reference's parse, but its error says ``message`` instead.
    try:
        return rollback.parse_ssm_rollback_mode(text)
    except rollback.UnknownSsmRollbackModeError as error:
        error.args = (message,)
        raise


class ReprQuotedError(Mutant):
    family = "parse"

    def parse_ssm_rollback_mode(self, text: str, /) -> SsmRollbackMode:
        message = f"unknown ssm-rollback-mode {text!r} (valid: snapshot, replay)"
        return _parse_with_message(text, message)


class ErrorListsModesBackwards(Mutant):
    family = "parse"

    def parse_ssm_rollback_mode(self, text: str, /) -> SsmRollbackMode:
        message = f"unknown ssm-rollback-mode '{text}' (valid: replay, snapshot)"
        return _parse_with_message(text, message)


def _checked(function: str, /, **arguments: int) -> None:
    # Keep the reference's type and range errors, so that only the mistake
    # under test can tell a mutant apart.
    for name, value in arguments.items():
        rollback._usize(function, name, value)  # noqa: SLF001


def _overflow(value: int) -> int:
    if value > _MAX:
        raise rollback.SsmReplayBytesOverflowError("overflow")
    return value


class KInsteadOfKMinusOne(Mutant):
    family = "sizes"

    def _ring(self, slots: int, k: int, layers: int, row: int, /) -> int:
        return _overflow(slots * k * layers * row)


class KMinusOneUnsaturated(Mutant):
    family = "sizes"

    def _ring(self, slots: int, k: int, layers: int, row: int, /) -> int:
        return _overflow(slots * (k - 1) * layers * row)


class RingWrapsAround(Mutant):
    family = "sizes"

    def _ring(self, slots: int, k: int, layers: int, row: int, /) -> int:
        return (slots * max(k - 1, 0) * layers * row) % (_MAX + 1)


class RowWrapsAround(Mutant):
    family = "sizes"

    def _row(self, qkvz_elems: int, nv: int, /) -> int:
        return (qkvz_elems * 2 + nv * 8) % (_MAX + 1)


class RingSaturates(Mutant):
    family = "sizes"

    def _ring(self, slots: int, k: int, layers: int, row: int, /) -> int:
        return min(slots * max(k - 1, 0) * layers * row, _MAX)


class RingOverflowsOneEarly(Mutant):
    family = "sizes"

    def _ring(self, slots: int, k: int, layers: int, row: int, /) -> int:
        exact = slots * max(k - 1, 0) * layers * row
        if exact >= _MAX:
            raise rollback.SsmReplayBytesOverflowError("overflow")
        return exact


class RowOverflowsOneLate(Mutant):
    family = "sizes"

    def _row(self, qkvz_elems: int, nv: int, /) -> int:
        exact = qkvz_elems * 2 + nv * 8
        if exact > _MAX + 1:
            raise rollback.SsmReplayBytesOverflowError("overflow")
        return exact


class RingCheckedLeftToRight(Mutant):
    """Rust's debug build: an intermediate product overflows before a later zero."""

    family = "sizes"

    def _ring(self, slots: int, k: int, layers: int, row: int, /) -> int:
        product = 1
        for factor in (slots, max(k - 1, 0), layers, row):
            product = _overflow(product * factor)
        return product


class RowGatesAsBf16(Mutant):
    family = "sizes"

    def _row(self, qkvz_elems: int, nv: int, /) -> int:
        return _overflow(qkvz_elems * 2 + nv * 2 * 2)


class RowWithoutGates(Mutant):
    family = "sizes"

    def _row(self, qkvz_elems: int, nv: int, /) -> int:
        del nv
        return _overflow(qkvz_elems * 2)


class RingCountsTheDummySlot(Mutant):
    family = "sizes"

    def _ring(self, slots: int, k: int, layers: int, row: int, /) -> int:
        return _overflow((slots + 1) * max(k - 1, 0) * layers * row)


class ReplayVerifyEnters(Mutant):
    family = "verify"

    def require_verify_rollback_supported(self, mode: SsmRollbackMode, /) -> None:
        pass


class SnapshotVerifyRefused(Mutant):
    family = "verify"

    def require_verify_rollback_supported(self, mode: SsmRollbackMode, /) -> None:
        raise rollback.VerifyRollbackUnsupportedError(mode)


class SetPublishesAnything(Mutant):
    family = "published_mode"
    python_only = True

    def set_ssm_rollback_mode(self, mode: object, /) -> SsmRollbackMode:
        return self._published.set(mode)  # type: ignore[return-value]


class BoolIsAUsize(Mutant):
    family = "bad_input"
    python_only = True

    def ssm_replay_row_bytes(self, qkvz_elems: int, nv: int) -> int:
        return rollback.ssm_replay_row_bytes(int(qkvz_elems), int(nv))


class NegativeSizeWraps(Mutant):
    family = "bad_input"
    python_only = True

    def ssm_replay_ring_bytes(
        self, num_ssm_layers: object, row_bytes: object, k_ceiling: object, mtp_state_slots: object
    ) -> int:
        arguments = (num_ssm_layers, row_bytes, k_ceiling, mtp_state_slots)
        wrapped = [v % (_MAX + 1) if isinstance(v, int) else v for v in arguments]
        return rollback.ssm_replay_ring_bytes(*wrapped)  # type: ignore[arg-type]


class ParseAcceptsBytes(Mutant):
    family = "bad_input"
    python_only = True

    def parse_ssm_rollback_mode(self, text: object, /) -> SsmRollbackMode:
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        return rollback.parse_ssm_rollback_mode(text)  # type: ignore[arg-type]


#: Every mutant, by the name the self-test and ``--impl-mutant`` use.
MUTANTS: Final[dict[str, type[Mutant]]] = {cls.__name__: cls for cls in Mutant.__subclasses__()}


def in_process_mutant(name: str, /) -> InProcessDriver:
    """An in-process driver over the mutant called ``name``.

    Raises:
        KeyError: no mutant has that name.
    """
    try:
        cls = MUTANTS[name]
    except KeyError:
        raise KeyError(f"no mutant {name!r}; known: {', '.join(sorted(MUTANTS))}") from None

    @contextlib.contextmanager
    def fresh() -> Iterator[RollbackApi]:
        yield cls()

    python = PythonApi(
        api=cls(),
        import_path=f"{__name__}:{name}",
        fresh=fresh,
        new_cell=cls.new_cell,
    )
    return InProcessDriver(f"mutant {name} (in-process)", python)
