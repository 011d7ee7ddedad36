# SPDX-License-Identifier: MIT OR Apache-2.0
"""Parsing ``--ssm-rollback-mode``: exact names in, exact error text out."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import pytest
from hypothesis import example, given

from ssm_rollback_spec import model

from .conformance import exchange, option_parsed, parsed
from .strategies import MODE_NAMES, mode_texts, near_miss_texts

if TYPE_CHECKING:
    import types
    from collections.abc import Callable

    from ssm_rollback_spec.harness.driver import Implementation
    from ssm_rollback_spec.harness.python_impl import PythonImplementation

#: One explicit example for every negated phrase of RB-PARSE-1 and RB-PARSE-2
#: (docs/mutation.md's phrase table names each), run first under every profile.
NEGATED_PHRASE_EXAMPLES: Final = (
    # case-sensitive
    "Snapshot",
    # nothing trimmed
    " replay",
    "replay\n",
    # exactly the text: nothing after a whole name, a NUL included (a C-string parse)
    "snapshot\x00junk",
    "replay\x00",
    # no prefix or abbreviation
    "snap",
    "replays",
    # no Unicode folding or normalisation
    "r\u0435play",
    "\uff52\uff45\uff50\uff4c\uff41\uff59",
    # verbatim: no quoting
    "re'play",
    '"snapshot"',
    # no escaping
    "back\\slash",
    "snap\x1bshot\U0001f600",
    # no truncation
    "replay " + "'\\" * 2_048,
)


def _with_negated_phrase_examples(test: Callable[..., None], /) -> Callable[..., None]:
    for text in reversed(NEGATED_PHRASE_EXAMPLES):
        test = example(text=text)(test)
    return test


@pytest.mark.clause("RB-MODE-1", "RB-PARSE-1")
@pytest.mark.parametrize("name", MODE_NAMES)
def test_each_mode_name_parses_to_itself(impl: Implementation, name: str) -> None:
    assert exchange(impl, {"op": "parse", "text": name}) == {"ok": name}


@pytest.mark.clause("RB-PARSE-1", "RB-PARSE-2")
@given(text=mode_texts)
@example(text="")
@_with_negated_phrase_examples
def test_parse_returns_the_named_mode_or_the_exact_error(impl: Implementation, text: str) -> None:
    exchange(impl, {"op": "parse", "text": text})


@pytest.mark.clause("RB-PARSE-1", "RB-PARSE-2")
@given(text=near_miss_texts())
@_with_negated_phrase_examples
def test_every_near_miss_is_rejected_with_its_text_verbatim(
    impl: Implementation, text: str
) -> None:
    exchange(impl, {"op": "parse", "text": text})


@pytest.mark.clause("RB-MODE-1", "RB-PARSE-1")
@given(text=mode_texts)
def test_parse_and_str_round_trip_both_ways(python_api: PythonImplementation, text: str) -> None:
    for name in MODE_NAMES:
        parsed(python_api, name)
    mode = parsed(python_api, text)
    if mode is not None:
        parsed(python_api, text, str(mode))


@pytest.mark.clause("RB-PARSE-1", "RB-PARSE-2")
@given(text=mode_texts)
@example(text="garbage")
@example(text="replay")
@example(text="-x")
def test_the_command_line_option_beside_the_implementation_takes_what_the_parse_takes(
    python_api: PythonImplementation, argparse_option: types.ModuleType, text: str
) -> None:
    option_parsed(argparse_option, python_api.import_path, text)


@pytest.mark.clause("RB-MODE-1", "RB-PARSE-2")
@given(text=mode_texts)
def test_calling_the_enum_fails_exactly_as_the_parse_does(
    python_api: PythonImplementation, text: str
) -> None:
    api = python_api.api
    parse = api.parse_ssm_rollback_mode
    if isinstance(model.parse(text), model.Rejected):
        with pytest.raises(api.UnknownSsmRollbackModeError) as parse_error:
            parse(text)
        with pytest.raises(api.UnknownSsmRollbackModeError) as enum_error:
            api.SsmRollbackMode(text)
        assert str(enum_error.value) == str(parse_error.value)
        assert getattr(enum_error.value, "text", None) == text
    else:
        assert api.SsmRollbackMode(text) is parse(text)


@pytest.mark.clause("RB-MODE-1")
def test_there_are_exactly_two_modes_with_their_canonical_texts(
    python_api: PythonImplementation,
) -> None:
    modes = python_api.api.SsmRollbackMode
    assert [mode.value for mode in modes] == ["snapshot", "replay"]
    assert [str(mode) for mode in modes] == ["snapshot", "replay"]
    assert modes.SNAPSHOT.name == "SNAPSHOT"
    assert modes.REPLAY.name == "REPLAY"
