# SPDX-License-Identifier: MIT OR Apache-2.0
"""Every public function's type and range errors, with their whole messages."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ssm_rollback_spec.rollback import SsmRollbackMode

from .conformance import parsed
from .strategies import USIZE_MAX, texts

if TYPE_CHECKING:
    from collections.abc import Callable

    from ssm_rollback_spec.harness.python_impl import PythonImplementation

ROW: Final = ("ssm_replay_row_bytes", ("qkvz_elems", "nv"))
RING: Final = (
    "ssm_replay_ring_bytes",
    ("num_ssm_layers", "row_bytes", "k_ceiling", "mtp_state_slots"),
)
not_ints: Final = st.one_of(
    st.booleans(),
    st.floats(allow_nan=False),
    texts(max_size=3),
    st.none(),
    st.just(1.0),
    st.just(b"1"),
    st.just([1]),
)
out_of_range: Final = st.one_of(
    st.integers(max_value=-1), st.integers(min_value=USIZE_MAX + 1), st.just(-1), st.just(2**64)
)


def _call_with_one_bad_argument(
    api: object, function: tuple[str, tuple[str, ...]], field: str, bad: object
) -> None:
    name, fields = function
    arguments: dict[str, object] = dict.fromkeys(fields, 1)
    arguments[field] = bad
    call: Callable[..., int] = getattr(api, name)
    call(**arguments)


@pytest.mark.clause("RB-PY-2")
@given(function=st.sampled_from([ROW, RING]), data=st.data(), bad=not_ints)
def test_a_non_int_size_argument_raises_type_error_naming_it(
    python_api: PythonImplementation,
    function: tuple[str, tuple[str, ...]],
    data: st.DataObject,
    bad: object,
) -> None:
    name, fields = function
    field = data.draw(st.sampled_from(fields))
    with pytest.raises(python_api.api.UsizeTypeError) as raised:
        _call_with_one_bad_argument(python_api.api, function, field, bad)
    assert str(raised.value) == (
        f"{name}() argument '{field}' must be int, not {type(bad).__name__}"
    )


@pytest.mark.clause("RB-PY-3")
@given(function=st.sampled_from([ROW, RING]), data=st.data(), bad=out_of_range)
def test_an_out_of_range_size_argument_raises_value_error_naming_it(
    python_api: PythonImplementation,
    function: tuple[str, tuple[str, ...]],
    data: st.DataObject,
    bad: int,
) -> None:
    name, fields = function
    field = data.draw(st.sampled_from(fields))
    with pytest.raises(python_api.api.UsizeRangeError) as raised:
        _call_with_one_bad_argument(python_api.api, function, field, bad)
    assert str(raised.value) == (
        f"{name}() argument '{field}' must be in [0, {USIZE_MAX}], got {bad}"
    )


@pytest.mark.clause("RB-PY-3", "RB-SIZE-3")
def test_the_range_ends_are_accepted(python_api: PythonImplementation) -> None:
    assert python_api.api.ssm_replay_row_bytes(0, 0) == 0
    assert python_api.api.ssm_replay_ring_bytes(USIZE_MAX, USIZE_MAX, 1, USIZE_MAX) == 0


@pytest.mark.clause("RB-SIZE-3")
def test_overflow_names_the_function_and_its_arguments(python_api: PythonImplementation) -> None:
    with pytest.raises(python_api.api.SsmReplayBytesOverflowError) as raised:
        python_api.api.ssm_replay_ring_bytes(2, USIZE_MAX, 2, 1)
    assert str(raised.value) == (
        "ssm_replay_ring_bytes(num_ssm_layers=2, row_bytes=18446744073709551615, "
        "k_ceiling=2, mtp_state_slots=1) = 36893488147419103230 "
        "exceeds usize max 18446744073709551615"
    )
    with pytest.raises(python_api.api.SsmReplayBytesOverflowError) as raised:
        python_api.api.ssm_replay_row_bytes(USIZE_MAX, 0)
    assert str(raised.value) == (
        "ssm_replay_row_bytes(qkvz_elems=18446744073709551615, nv=0) = 36893488147419103230 "
        "exceeds usize max 18446744073709551615"
    )


@pytest.mark.clause("RB-PY-1")
@given(
    bad=st.one_of(st.none(), st.integers(), st.binary(max_size=4), st.just(SsmRollbackMode.REPLAY))
)
def test_parsing_a_non_str_raises_type_error(python_api: PythonImplementation, bad: object) -> None:
    with pytest.raises(python_api.api.SsmRollbackModeTypeError) as raised:
        python_api.api.parse_ssm_rollback_mode(bad)  # type: ignore[arg-type]
    assert str(raised.value) == (f"parse_ssm_rollback_mode() takes a str, not {type(bad).__name__}")


@pytest.mark.clause("RB-PY-1", "RB-VERIFY-2")
@given(bad=st.one_of(st.sampled_from(["replay", "snapshot"]), st.none(), st.integers()))
def test_verify_entry_with_a_non_mode_raises_type_error(
    python_api: PythonImplementation, bad: object
) -> None:
    with pytest.raises(python_api.api.SsmRollbackModeTypeError) as raised:
        python_api.api.require_verify_rollback_supported(bad)  # type: ignore[arg-type]
    assert str(raised.value) == (
        f"require_verify_rollback_supported() takes an SsmRollbackMode, not {type(bad).__name__}"
    )


class _AlwaysEqualText(str):
    """A text that claims to equal, and hash like, every mode name."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return hash("replay")

    def __format__(self, spec: str) -> str:
        return "replay"


class _LyingNumber(int):
    """A number that claims to be in range and to multiply to nothing."""

    __slots__ = ()

    def __lt__(self, other: object) -> bool:
        return False

    def __le__(self, other: object) -> bool:
        return True

    def __ge__(self, other: object) -> bool:
        return True

    def __mul__(self, other: object) -> int:
        return 0

    __rmul__ = __mul__


@pytest.mark.clause("RB-PARSE-1", "RB-PARSE-2")
@given(text=texts(max_size=12))
@example(text="garbage")
@example(text="replay")
def test_a_str_subclass_is_judged_by_the_text_it_holds(
    python_api: PythonImplementation, text: str
) -> None:
    parsed(python_api, text, _AlwaysEqualText(text))


@pytest.mark.clause("RB-PY-3", "RB-SIZE-2")
@given(function=st.sampled_from([ROW, RING]), data=st.data(), held=st.integers(-3, 3))
def test_an_int_subclass_is_judged_by_the_number_it_holds(
    python_api: PythonImplementation,
    function: tuple[str, tuple[str, ...]],
    data: st.DataObject,
    held: int,
) -> None:
    name, fields = function
    field = data.draw(st.sampled_from(fields))
    call: Callable[..., int] = getattr(python_api.api, name)
    arguments: dict[str, object] = dict.fromkeys(fields, 2)
    plain = call(**(arguments | {field: held})) if held >= 0 else None
    arguments[field] = _LyingNumber(held)
    if plain is None:
        with pytest.raises(python_api.api.UsizeRangeError) as raised:
            call(**arguments)
        assert str(raised.value) == (
            f"{name}() argument '{field}' must be in [0, {USIZE_MAX}], got {held}"
        )
    else:
        assert call(**arguments) == plain
