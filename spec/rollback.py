# SPDX-License-Identifier: MIT OR Apache-2.0
"""The SSM verify-rollback mode and the replay-ring sizing it implies.

One Python name for each item of the runtime module (``rollback.rs``, seed
``000_fd8074ae8876e187.txt``):

==========================================  =============================================
runtime module                              this module
==========================================  =============================================
``enum SsmRollbackMode``                    :class:`SsmRollbackMode`
``SsmRollbackMode::from_str``               :func:`parse_ssm_rollback_mode`
``static ROLLBACK_MODE: OnceLock``          ``_ROLLBACK_MODE`` (a :class:`FirstWriteWins`)
``set_ssm_rollback_mode``                   :func:`set_ssm_rollback_mode`
``ssm_rollback_mode``                       :func:`ssm_rollback_mode`
``ssm_replay_row_bytes``                    :func:`ssm_replay_row_bytes`
``ssm_replay_ring_bytes``                   :func:`ssm_replay_ring_bytes`
``require_verify_rollback_supported``       :func:`require_verify_rollback_supported`
==========================================  =============================================

Where Rust's ``usize`` arithmetic would wrap or panic, this module computes
the exact value and raises :class:`SsmReplayBytesOverflowError` past
``USIZE_MAX`` (SPEC.md, RB-SIZE-3).
"""

from __future__ import annotations

import enum
from typing import Final

from .first_write_wins import FirstWriteWins

__all__ = [
    "USIZE_MAX",
    "SsmReplayBytesOverflowError",
    "SsmRollbackMode",
    "SsmRollbackModeTypeError",
    "UnknownSsmRollbackModeError",
    "UsizeRangeError",
    "UsizeTypeError",
    "VerifyRollbackUnsupportedError",
    "parse_ssm_rollback_mode",
    "require_verify_rollback_supported",
    "set_ssm_rollback_mode",
    "ssm_replay_ring_bytes",
    "ssm_replay_row_bytes",
    "ssm_rollback_mode",
]

#: The largest value of the runtime's 64-bit ``usize``.
USIZE_MAX: Final = 2**64 - 1


class UnknownSsmRollbackModeError(ValueError):
    """A ``--ssm-rollback-mode`` text that names no mode (RB-PARSE-2)."""

    def __init__(self, text: str, /) -> None:
        super().__init__(f"unknown ssm-rollback-mode '{text}' (valid: snapshot, replay)")
        self.text: Final = text


class SsmRollbackModeTypeError(TypeError):
    """A mode, or a mode's text, of the wrong Python type (RB-PY-1)."""


class UsizeTypeError(TypeError):
    """A byte-size argument that is not an ``int`` (``bool`` included) (RB-PY-2)."""


class UsizeRangeError(ValueError):
    """A byte-size argument outside ``[0, USIZE_MAX]`` (RB-PY-3)."""


class SsmReplayBytesOverflowError(OverflowError):
    """A byte size whose exact value exceeds ``USIZE_MAX`` (RB-SIZE-3)."""


class VerifyRollbackUnsupportedError(NotImplementedError):
    """A speculative verify entered in a mode that cannot roll back (RB-VERIFY-2)."""

    def __init__(self, mode: SsmRollbackMode, /) -> None:
        super().__init__(
            f"speculative verify refused: ssm-rollback-mode '{mode}' "
            "has no capture or replay implementation"
        )
        self.mode: Final = mode


class SsmRollbackMode(enum.Enum):
    """How a partial accept rolls the recurrent state back (RB-MODE-1).

    ``SNAPSHOT`` restores from per-token state intermediates and is the
    default. ``REPLAY`` recomputes from a pre-verify checkpoint and a ring of
    per-token GDN inputs; it boots, but refuses every speculative verify.
    """

    SNAPSHOT = "snapshot"
    REPLAY = "replay"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def _missing_(cls, value: object) -> SsmRollbackMode:
        # Calling the enum on a text must fail exactly as the parse does.
        return parse_ssm_rollback_mode(value)  # type: ignore[arg-type]


_MODES_BY_TEXT: Final = {mode.value: mode for mode in SsmRollbackMode}


def parse_ssm_rollback_mode(text: str, /) -> SsmRollbackMode:
    """Parse a ``--ssm-rollback-mode`` value: exactly ``snapshot`` or ``replay``.

    Implements RB-PARSE-1 and RB-PARSE-2.

    Raises:
        UnknownSsmRollbackModeError: ``text`` is not exactly a mode's name.
        SsmRollbackModeTypeError: ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise SsmRollbackModeTypeError(
            f"parse_ssm_rollback_mode() takes a str, not {type(text).__name__}"
        )
    # A str subclass is judged by the text it holds, never by its own
    # __eq__, __hash__ or __format__ (SPEC.md, "Python API types").
    plain = str.__str__(text)
    try:
        return _MODES_BY_TEXT[plain]
    except KeyError:
        raise UnknownSsmRollbackModeError(plain) from None


# The process-wide published mode: written from the serve command line, read
# by pool construction and preflight.
_ROLLBACK_MODE: FirstWriteWins[SsmRollbackMode] = FirstWriteWins()


def _require_mode(function: str, mode: object, /) -> SsmRollbackMode:
    if not isinstance(mode, SsmRollbackMode):
        raise SsmRollbackModeTypeError(
            f"{function}() takes an SsmRollbackMode, not {type(mode).__name__}"
        )
    return mode


def set_ssm_rollback_mode(mode: SsmRollbackMode, /) -> SsmRollbackMode:
    """Publish the command line's mode and return the mode in force.

    The first write wins for the life of the process. Implements RB-PUB-1
    and RB-PUB-3.

    Raises:
        SsmRollbackModeTypeError: ``mode`` is not an :class:`SsmRollbackMode`;
            nothing is published.
    """
    return _ROLLBACK_MODE.set(_require_mode("set_ssm_rollback_mode", mode))


def ssm_rollback_mode() -> SsmRollbackMode:
    """Return the mode in force, pinning ``SNAPSHOT`` when nothing was published.

    Implements RB-PUB-2 and RB-PUB-3.
    """
    return _ROLLBACK_MODE.get_or_init(SsmRollbackMode.SNAPSHOT)


def _usize(function: str, name: str, value: object, /) -> int:
    # bool is an int subclass, but a flag is never a count.
    if not isinstance(value, int) or isinstance(value, bool):
        raise UsizeTypeError(
            f"{function}() argument '{name}' must be int, not {type(value).__name__}"
        )
    # An int subclass is judged by the number it holds, never by its own
    # comparisons or arithmetic (SPEC.md, "Python API types").
    plain = int.__int__(value)
    if not 0 <= plain <= USIZE_MAX:
        raise UsizeRangeError(
            f"{function}() argument '{name}' must be in [0, {USIZE_MAX}], got {plain}"
        )
    return plain


def _fits(function: str, arguments: dict[str, int], value: int, /) -> int:
    if value > USIZE_MAX:
        shown = ", ".join(f"{name}={number}" for name, number in arguments.items())
        raise SsmReplayBytesOverflowError(
            f"{function}({shown}) = {value} exceeds usize max {USIZE_MAX}"
        )
    return value


def ssm_replay_row_bytes(qkvz_elems: int, nv: int) -> int:
    """Bytes of one cached verify row of GDN inputs for one SSM layer.

    The row is ``qkvz_elems`` BF16 values (2 bytes each) plus a gate and a
    beta FP32 value (4 bytes each) for each of the ``nv`` value heads.
    Implements RB-SIZE-1 and RB-SIZE-3.

    Raises:
        UsizeTypeError: an argument is not an ``int``.
        UsizeRangeError: an argument is outside ``[0, USIZE_MAX]``.
        SsmReplayBytesOverflowError: the exact size exceeds ``USIZE_MAX``.
    """
    arguments = {
        "qkvz_elems": _usize("ssm_replay_row_bytes", "qkvz_elems", qkvz_elems),
        "nv": _usize("ssm_replay_row_bytes", "nv", nv),
    }
    bytes_of_row = arguments["qkvz_elems"] * 2 + arguments["nv"] * 2 * 4
    return _fits("ssm_replay_row_bytes", arguments, bytes_of_row)


def ssm_replay_ring_bytes(
    num_ssm_layers: int,
    row_bytes: int,
    k_ceiling: int,
    mtp_state_slots: int,
) -> int:
    """Bytes of the replay-mode ring of verify-window GDN inputs.

    A partial accept replays at most K-1 tokens, so the ring holds
    ``k_ceiling - 1`` rows (none when ``k_ceiling`` is 0 or 1) per slot and
    per layer. Implements RB-SIZE-2 and RB-SIZE-3.

    Raises:
        UsizeTypeError: an argument is not an ``int``.
        UsizeRangeError: an argument is outside ``[0, USIZE_MAX]``.
        SsmReplayBytesOverflowError: the exact size exceeds ``USIZE_MAX``.
    """
    function = "ssm_replay_ring_bytes"
    arguments = {
        "num_ssm_layers": _usize(function, "num_ssm_layers", num_ssm_layers),
        "row_bytes": _usize(function, "row_bytes", row_bytes),
        "k_ceiling": _usize(function, "k_ceiling", k_ceiling),
        "mtp_state_slots": _usize(function, "mtp_state_slots", mtp_state_slots),
    }
    replayed_tokens = max(arguments["k_ceiling"] - 1, 0)
    ring = (
        arguments["mtp_state_slots"]
        * replayed_tokens
        * arguments["num_ssm_layers"]
        * arguments["row_bytes"]
    )
    return _fits(function, arguments, ring)


def require_verify_rollback_supported(mode: SsmRollbackMode, /) -> None:
    """Let a speculative verify enter only in a mode that can roll back.

    Replay mode boots, but its capture and replay are not implemented, so
    every verify entry refuses. Implements RB-VERIFY-1 and RB-VERIFY-2.

    Raises:
        VerifyRollbackUnsupportedError: ``mode`` is ``REPLAY``.
        SsmRollbackModeTypeError: ``mode`` is not an :class:`SsmRollbackMode`.
    """
    if _require_mode("require_verify_rollback_supported", mode) is SsmRollbackMode.REPLAY:
        raise VerifyRollbackUnsupportedError(mode)
