# SPDX-License-Identifier: MIT OR Apache-2.0
"""Deliberately wrong implementations: the suite must reject every one.

Each is the reference with one plausible mistake. A property earns its place
by rejecting at least one of them; ``test_wrong_implementations.py`` requires
the suite to reject them all, in-process (``--impl-module
tests.fakes.wrong:NAME``) and through the protocol (``python -m
ssm_rollback_spec.harness.adapter --impl-module tests.fakes.wrong:NAME``). mutmut's
generated mutants are another matter: see docs/mutation.md.
"""

from __future__ import annotations

import enum
import threading
import time
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Final, Generic, TypeVar

from ssm_rollback_spec import rollback
from ssm_rollback_spec.first_write_wins import FirstWriteWins

if TYPE_CHECKING:
    from collections.abc import Callable

    from ssm_rollback_spec.harness.python_impl import Cell

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


class _GetStoresCell(FirstWriteWins[_T]):
    """A look that stores: get() on an empty cell writes None."""

    def get(self) -> _T | None:
        return self.set(None)  # type: ignore[arg-type]


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


# --- the wrong implementations ----------------------------------------------


class Family(enum.Enum):
    """The property module that must reject a wrong implementation."""

    PARSE = "test_parse.py"
    CELL = "test_cell.py"
    PUBLISHED_MODE = "test_published_mode.py"
    SIZES = "test_sizes.py"
    VERIFY = "test_verify.py"
    BAD_INPUT = "test_bad_input.py"


class WrongImplementation:
    """The reference, on a published mode of its own; subclasses break one thing.

    It exposes the public names of ssm_rollback_spec.rollback, so the harness loads it as
    any other Python implementation; each instance is a fresh process's worth
    of state.
    """

    USIZE_MAX = rollback.USIZE_MAX
    SsmRollbackMode = rollback.SsmRollbackMode
    UnknownSsmRollbackModeError = rollback.UnknownSsmRollbackModeError
    SsmRollbackModeTypeError = rollback.SsmRollbackModeTypeError
    UsizeTypeError = rollback.UsizeTypeError
    UsizeRangeError = rollback.UsizeRangeError
    SsmReplayBytesOverflowError = rollback.SsmReplayBytesOverflowError
    VerifyRollbackUnsupportedError = rollback.VerifyRollbackUnsupportedError

    #: The cell type, which the cell properties check (RB-CELL-*).
    FirstWriteWins: ClassVar[Callable[[], Cell[object]]] = FirstWriteWins
    default: ClassVar[rollback.SsmRollbackMode] = SsmRollbackMode.SNAPSHOT

    def __init__(self) -> None:
        self._published: Cell[object] = type(self).FirstWriteWins()

    def parse_ssm_rollback_mode(self, text: str, /) -> rollback.SsmRollbackMode:
        return rollback.parse_ssm_rollback_mode(text)

    def set_ssm_rollback_mode(self, mode: object, /) -> rollback.SsmRollbackMode:
        if not isinstance(mode, rollback.SsmRollbackMode):
            # The reference raises its own type error here.
            return rollback.set_ssm_rollback_mode(mode)  # type: ignore[arg-type]
        return self._published.set(mode)  # type: ignore[return-value]

    def ssm_rollback_mode(self) -> rollback.SsmRollbackMode:
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

    # The arithmetic wrong implementations override these two, after the reference's type
    # and range checks have run, so only the mistake under test differs.
    def _row(self, qkvz_elems: int, nv: int, /) -> int:
        return rollback.ssm_replay_row_bytes(qkvz_elems, nv)

    def _ring(self, slots: int, k: int, layers: int, row: int, /) -> int:
        return rollback.ssm_replay_ring_bytes(layers, row, k, slots)

    def require_verify_rollback_supported(self, mode: rollback.SsmRollbackMode, /) -> None:
        rollback.require_verify_rollback_supported(mode)


class LastWriteWins(WrongImplementation):
    FirstWriteWins = _LastWriteWinsCell


class GetStoresNone(WrongImplementation):
    FirstWriteWins = _GetStoresCell


class ReadDoesNotPin(WrongImplementation):
    FirstWriteWins = _NonPinningCell


class RacyCheckThenSet(WrongImplementation):
    FirstWriteWins = _RacyCell


class ThreadLocalMode(WrongImplementation):
    FirstWriteWins = _ThreadLocalCell


class DefaultIsReplay(WrongImplementation):
    default = rollback.SsmRollbackMode.REPLAY


class CaseInsensitiveParse(WrongImplementation):
    def parse_ssm_rollback_mode(self, text: str, /) -> rollback.SsmRollbackMode:
        return rollback.parse_ssm_rollback_mode(text.lower())


class TrimmingParse(WrongImplementation):
    def parse_ssm_rollback_mode(self, text: str, /) -> rollback.SsmRollbackMode:
        return rollback.parse_ssm_rollback_mode(text.strip())


class PrefixParse(WrongImplementation):
    def parse_ssm_rollback_mode(self, text: str, /) -> rollback.SsmRollbackMode:
        for mode in rollback.SsmRollbackMode:
            if text and mode.value.startswith(text):
                return mode
        return rollback.parse_ssm_rollback_mode(text)


class NulCutParse(WrongImplementation):
    """Reads the text as a C string: whatever follows a NUL is never seen."""

    def parse_ssm_rollback_mode(self, text: str, /) -> rollback.SsmRollbackMode:
        return rollback.parse_ssm_rollback_mode(text.split("\x00", 1)[0])


def _parse_with_message(text: str, message: str, /) -> rollback.SsmRollbackMode:
    # The reference's parse, but its error says ``message`` instead.
    try:
        return rollback.parse_ssm_rollback_mode(text)
    except rollback.UnknownSsmRollbackModeError as error:
        error.args = (message,)
        raise


class ReprQuotedError(WrongImplementation):
    def parse_ssm_rollback_mode(self, text: str, /) -> rollback.SsmRollbackMode:
        message = f"unknown ssm-rollback-mode {text!r} (valid: snapshot, replay)"
        return _parse_with_message(text, message)


class NormalisingParse(WrongImplementation):
    """Folds compatibility forms first: fullwidth or bold letters parse as ASCII."""

    def parse_ssm_rollback_mode(self, text: str, /) -> rollback.SsmRollbackMode:
        return rollback.parse_ssm_rollback_mode(unicodedata.normalize("NFKC", text))


class EscapingErrorText(WrongImplementation):
    """Escapes backslashes, control and non-ASCII characters in the error text."""

    def parse_ssm_rollback_mode(self, text: str, /) -> rollback.SsmRollbackMode:
        shown = text.encode("unicode_escape").decode("ascii")
        message = f"unknown ssm-rollback-mode '{shown}' (valid: snapshot, replay)"
        return _parse_with_message(text, message)


class TruncatingErrorText(WrongImplementation):
    """Shortens a long text in the error, as a logger with a line limit would."""

    def parse_ssm_rollback_mode(self, text: str, /) -> rollback.SsmRollbackMode:
        shown = text if len(text) <= 256 else f"{text[:253]}..."
        message = f"unknown ssm-rollback-mode '{shown}' (valid: snapshot, replay)"
        return _parse_with_message(text, message)


class ErrorListsModesBackwards(WrongImplementation):
    def parse_ssm_rollback_mode(self, text: str, /) -> rollback.SsmRollbackMode:
        message = f"unknown ssm-rollback-mode '{text}' (valid: replay, snapshot)"
        return _parse_with_message(text, message)


def _checked(function: str, /, **arguments: int) -> None:
    # Keep the reference's type and range errors, so that only the mistake
    # under test can tell one apart.
    for name, value in arguments.items():
        rollback._usize(function, name, value)  # noqa: SLF001


def _overflow(value: int) -> int:
    if value > _MAX:
        raise rollback.SsmReplayBytesOverflowError("overflow")
    return value


class KInsteadOfKMinusOne(WrongImplementation):
    def _ring(self, slots: int, k: int, layers: int, row: int, /) -> int:
        return _overflow(slots * k * layers * row)


class KMinusOneUnsaturated(WrongImplementation):
    def _ring(self, slots: int, k: int, layers: int, row: int, /) -> int:
        return _overflow(slots * (k - 1) * layers * row)


class RingWrapsAround(WrongImplementation):
    def _ring(self, slots: int, k: int, layers: int, row: int, /) -> int:
        return (slots * max(k - 1, 0) * layers * row) % (_MAX + 1)


class RowWrapsAround(WrongImplementation):
    def _row(self, qkvz_elems: int, nv: int, /) -> int:
        return (qkvz_elems * 2 + nv * 8) % (_MAX + 1)


class RingSaturates(WrongImplementation):
    def _ring(self, slots: int, k: int, layers: int, row: int, /) -> int:
        return min(slots * max(k - 1, 0) * layers * row, _MAX)


class RingOverflowsOneEarly(WrongImplementation):
    def _ring(self, slots: int, k: int, layers: int, row: int, /) -> int:
        exact = slots * max(k - 1, 0) * layers * row
        if exact >= _MAX:
            raise rollback.SsmReplayBytesOverflowError("overflow")
        return exact


class RowOverflowsOneLate(WrongImplementation):
    def _row(self, qkvz_elems: int, nv: int, /) -> int:
        exact = qkvz_elems * 2 + nv * 8
        if exact > _MAX + 1:
            raise rollback.SsmReplayBytesOverflowError("overflow")
        return exact


class RingCheckedLeftToRight(WrongImplementation):
    """Rust's debug build: an intermediate product overflows before a later zero."""

    def _ring(self, slots: int, k: int, layers: int, row: int, /) -> int:
        product = 1
        for factor in (slots, max(k - 1, 0), layers, row):
            product = _overflow(product * factor)
        return product


class RowGatesAsBf16(WrongImplementation):
    def _row(self, qkvz_elems: int, nv: int, /) -> int:
        return _overflow(qkvz_elems * 2 + nv * 2 * 2)


class RowWithoutGates(WrongImplementation):
    def _row(self, qkvz_elems: int, nv: int, /) -> int:
        del nv
        return _overflow(qkvz_elems * 2)


class RingCountsTheDummySlot(WrongImplementation):
    def _ring(self, slots: int, k: int, layers: int, row: int, /) -> int:
        return _overflow((slots + 1) * max(k - 1, 0) * layers * row)


class ReplayVerifyEnters(WrongImplementation):
    def require_verify_rollback_supported(self, mode: rollback.SsmRollbackMode, /) -> None:
        pass


class SnapshotVerifyRefused(WrongImplementation):
    def require_verify_rollback_supported(self, mode: rollback.SsmRollbackMode, /) -> None:
        raise rollback.VerifyRollbackUnsupportedError(mode)


class SetPublishesAnything(WrongImplementation):
    def set_ssm_rollback_mode(self, mode: object, /) -> rollback.SsmRollbackMode:
        return self._published.set(mode)  # type: ignore[return-value]


class BoolIsAUsize(WrongImplementation):
    def ssm_replay_row_bytes(self, qkvz_elems: int, nv: int) -> int:
        return rollback.ssm_replay_row_bytes(int(qkvz_elems), int(nv))


class NegativeSizeWraps(WrongImplementation):
    def ssm_replay_ring_bytes(
        self, num_ssm_layers: object, row_bytes: object, k_ceiling: object, mtp_state_slots: object
    ) -> int:
        arguments = (num_ssm_layers, row_bytes, k_ceiling, mtp_state_slots)
        wrapped = [v % (_MAX + 1) if isinstance(v, int) else v for v in arguments]
        return rollback.ssm_replay_ring_bytes(*wrapped)  # type: ignore[arg-type]


class ParseAcceptsBytes(WrongImplementation):
    def parse_ssm_rollback_mode(self, text: object, /) -> rollback.SsmRollbackMode:
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        return rollback.parse_ssm_rollback_mode(text)  # type: ignore[arg-type]


class TrustsSubclassOverrides(WrongImplementation):
    """Looks a text up, and checks a size, through the value's own methods."""

    def parse_ssm_rollback_mode(self, text: str, /) -> rollback.SsmRollbackMode:
        for mode in rollback.SsmRollbackMode:
            if text == mode.value:
                return mode
        return rollback.parse_ssm_rollback_mode(text)

    def ssm_replay_ring_bytes(
        self, num_ssm_layers: object, row_bytes: object, k_ceiling: object, mtp_state_slots: object
    ) -> int:
        arguments = (num_ssm_layers, row_bytes, k_ceiling, mtp_state_slots)
        if all(isinstance(a, int) and 0 <= a <= _MAX for a in arguments):
            assert isinstance(num_ssm_layers, int)
            assert isinstance(row_bytes, int)
            assert isinstance(k_ceiling, int)
            assert isinstance(mtp_state_slots, int)
            return _overflow(mtp_state_slots * max(k_ceiling - 1, 0) * num_ssm_layers * row_bytes)
        return rollback.ssm_replay_ring_bytes(*arguments)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Expectation:
    """Which property module must reject a wrong implementation, and how far it reaches.

    ``python_only`` says only the Python API can show the mistake, so the
    protocol cannot be required to. ``caught_by`` names the one property of
    the family that rejects it, which the protocol's self-test then runs
    alone: the family's others pass it, each starting a fresh adapter for
    every example, and would only make the self-test slow.
    """

    family: Family
    python_only: bool = False
    caught_by: str | None = None


_CONCURRENT_CALLS: Final = "test_concurrent_calls_all_return_the_mode_of_whichever_call_won"

#: Every wrong implementation, by the name ``--impl-module tests.fakes.wrong:NAME`` uses.
WRONG: Final[dict[str, Expectation]] = {
    "LastWriteWins": Expectation(Family.PUBLISHED_MODE),
    "ReadDoesNotPin": Expectation(Family.PUBLISHED_MODE),
    "RacyCheckThenSet": Expectation(Family.PUBLISHED_MODE, caught_by=_CONCURRENT_CALLS),
    "ThreadLocalMode": Expectation(Family.PUBLISHED_MODE, caught_by=_CONCURRENT_CALLS),
    "DefaultIsReplay": Expectation(Family.PUBLISHED_MODE),
    "SetPublishesAnything": Expectation(Family.PUBLISHED_MODE, python_only=True),
    "CaseInsensitiveParse": Expectation(Family.PARSE),
    "TrimmingParse": Expectation(Family.PARSE),
    "PrefixParse": Expectation(Family.PARSE),
    "NulCutParse": Expectation(Family.PARSE),
    "ReprQuotedError": Expectation(Family.PARSE),
    "ErrorListsModesBackwards": Expectation(Family.PARSE),
    "NormalisingParse": Expectation(Family.PARSE),
    "EscapingErrorText": Expectation(Family.PARSE),
    "TruncatingErrorText": Expectation(Family.PARSE),
    "GetStoresNone": Expectation(Family.CELL, python_only=True),
    "KInsteadOfKMinusOne": Expectation(Family.SIZES),
    "KMinusOneUnsaturated": Expectation(Family.SIZES),
    "RingWrapsAround": Expectation(Family.SIZES),
    "RowWrapsAround": Expectation(Family.SIZES),
    "RingSaturates": Expectation(Family.SIZES),
    "RingOverflowsOneEarly": Expectation(Family.SIZES),
    "RowOverflowsOneLate": Expectation(Family.SIZES),
    "RingCheckedLeftToRight": Expectation(Family.SIZES),
    "RowGatesAsBf16": Expectation(Family.SIZES),
    "RowWithoutGates": Expectation(Family.SIZES),
    "RingCountsTheDummySlot": Expectation(Family.SIZES),
    "ReplayVerifyEnters": Expectation(Family.VERIFY),
    "SnapshotVerifyRefused": Expectation(Family.VERIFY),
    "BoolIsAUsize": Expectation(Family.BAD_INPUT, python_only=True),
    "NegativeSizeWraps": Expectation(Family.BAD_INPUT, python_only=True),
    "ParseAcceptsBytes": Expectation(Family.BAD_INPUT, python_only=True),
    "TrustsSubclassOverrides": Expectation(Family.BAD_INPUT, python_only=True),
}


def import_path(name: str, /) -> str:
    """The ``--impl-module`` value of the wrong implementation called ``name``."""
    return f"{__name__}:{name}"
