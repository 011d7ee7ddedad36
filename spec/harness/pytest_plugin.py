# SPDX-License-Identifier: MIT OR Apache-2.0
"""The pytest plugin the property suite runs under.

It registers the Hypothesis profiles, chooses the implementation under test
(``--impl-cmd``, ``--impl-module`` or the reference), gives the properties
their ``impl``, ``python_api``, ``new_cell`` and ``race_verdict`` fixtures
(``--require-race`` makes a race not seen fail), keeps the distances a
property measured against a bound (:func:`record_distance`), checks each property's
clause markers against SPEC.md's clauses, and selects properties
by clause (``--clause``, or ``-k`` on a clause ID). Load it with
``-p ssm_rollback_spec.harness.pytest_plugin``; the repository's ``tests/conftest.py``
loads it for the repository's own runs.
"""

from __future__ import annotations

import importlib.util
import os
from typing import TYPE_CHECKING, Final

import pytest
from hypothesis import HealthCheck, Phase, Verbosity, is_hypothesis_test, settings

from .clauses import CLAUSES, UnknownClauseError, select_clauses
from .driver import Implementation, InProcessDriver
from .python_impl import ARGPARSE_MODULE, ImplementationModuleError
from .race_evidence import REQUIRE_RACE_HELP, RaceOutcome, judge_races
from .subprocess_driver import (
    DEFAULT_RACE_BUDGET,
    DEFAULT_TIMEOUT,
    SubprocessDriver,
    parse_race_budget,
    parse_timeout,
    split_command,
)

if TYPE_CHECKING:
    import types
    from collections.abc import Callable, Generator, Iterator

    from .python_impl import Cell, PythonImplementation
    from .race_evidence import RaceTally

__all__ = [
    "IMPL_CMD_ENV",
    "IMPL_MODULE_ENV",
    "MEASURED",
    "PROFILES",
    "argparse_option",
    "impl",
    "new_cell",
    "pytest_addoption",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_runtest_call",
    "python_api",
    "race_budget",
    "race_verdict",
    "record_distance",
]

#: The environment variables beside ``--impl-cmd`` and ``--impl-module``.
IMPL_CMD_ENV: Final = "SSM_ROLLBACK_IMPL_CMD"
IMPL_MODULE_ENV: Final = "SSM_ROLLBACK_IMPL_MODULE"

#: The user property under which a property keeps each ``[distance, bound]`` it measured.
MEASURED: Final = "measured"

#: The test running now, whose user properties :func:`record_distance` adds to.
_running: list[pytest.Item] = []

#: The Hypothesis profiles, by the name ``HYPOTHESIS_PROFILE`` selects.
PROFILES: Final = ("dev", "ci", "thorough", "crosshair", "interpreter")

# Timing belongs to benchmarks/, never to tests: no profile has a deadline.
_COMMON: Final = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
# The everyday local run: a quick random search, new each time; CI's gate is
# ci's derandomized hundred, and thorough searches deep.
settings.register_profile("dev", max_examples=30, **_COMMON)  # type: ignore[arg-type]
settings.register_profile(
    "ci",
    max_examples=100,
    derandomize=True,
    print_blob=True,
    database=None,
    verbosity=Verbosity.normal,
    **_COMMON,  # type: ignore[arg-type]
)
settings.register_profile(
    "thorough",
    max_examples=1500,
    phases=list(Phase),
    print_blob=True,
    **_COMMON,  # type: ignore[arg-type]
)
# For an adapter whose replay runs on a slow interpreter (the engines' Triton
# kernels on a CPU, docs/engines.md) or that loads a model: few examples,
# reproducible, and a failure reported as first found. Shrinking one through
# such an adapter takes Hypothesis's whole five minutes; ci shrinks it.
settings.register_profile(
    "interpreter",
    max_examples=6,
    phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target),
    derandomize=True,
    print_blob=True,
    database=None,
    **_COMMON,  # type: ignore[arg-type]
)
# The symbolic profile: CrossHair explores paths instead of drawing examples
# (the crosshair extra); advisory, never a CI gate.
if importlib.util.find_spec("hypothesis_crosshair_provider") is not None:
    settings.register_profile(
        "crosshair",
        backend="crosshair",
        max_examples=200,
        print_blob=True,
        database=None,
        **_COMMON,  # type: ignore[arg-type]
    )
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
)


def _timeout(text: str, /) -> float:
    try:
        return parse_timeout(text)
    except ValueError as error:
        raise pytest.UsageError(f"--impl-timeout {error}") from None


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add the options that choose and bound the implementation under test."""
    group = parser.getgroup("ssm-rollback-spec")
    group.addoption(
        "--impl-cmd",
        default=os.environ.get(IMPL_CMD_ENV),
        metavar="CMD",
        help=f"adapter command of the implementation under test (or ${IMPL_CMD_ENV})",
    )
    group.addoption(
        "--impl-argv",
        action="append",
        default=[],
        metavar="ARG",
        help="the adapter's argument vector, one argument to each option, in order: an "
        "adapter command already split (check passes its --impl-cmd so, split once)",
    )
    group.addoption(
        "--impl-module",
        default=os.environ.get(IMPL_MODULE_ENV),
        metavar="MODULE[:ATTR]",
        help="a Python implementation with the public names of ssm_rollback_spec.rollback, "
        f"checked in-process (or ${IMPL_MODULE_ENV}); default: ssm_rollback_spec.rollback",
    )
    group.addoption(
        "--impl-timeout",
        default=str(DEFAULT_TIMEOUT),
        metavar="SECONDS",
        help=f"seconds an adapter may take over one reply (default {DEFAULT_TIMEOUT:g})",
    )
    group.addoption(
        "--race-budget",
        default=str(DEFAULT_RACE_BUDGET),
        metavar="SECONDS",
        help="seconds spent on races in fresh processes, one after another until they are "
        f"spent (default {DEFAULT_RACE_BUDGET:g}; 0 skips them)",
    )
    group.addoption(
        "--require-race",
        action="store_true",
        help=REQUIRE_RACE_HELP,
    )
    group.addoption(
        "--clause",
        action="append",
        default=[],
        metavar="ID",
        help="run only the properties citing this clause; a family such as RB-SIZE "
        "selects all of it (repeatable)",
    )
    group.addoption(
        "--unshrunk",
        action="append",
        default=[],
        metavar="CLAUSE|PROPERTY",
        help="report the properties citing this clause, or this property (its node ID), "
        "at their first failing example, not shrunk: check passes each deviation it is "
        "given, whose failure is known (repeatable)",
    )


def _race_budget(text: str, /) -> float:
    try:
        return parse_race_budget(text)
    except ValueError as error:
        raise pytest.UsageError(f"--race-budget {error}") from None


def pytest_configure(config: pytest.Config) -> None:
    """Register the clause marker and check the options."""
    config.addinivalue_line("markers", "clause(*ids): the SPEC.md clause IDs this test checks")
    _timeout(config.getoption("--impl-timeout"))
    _race_budget(config.getoption("--race-budget"))
    chosen = config.getoption("--impl-cmd") or config.getoption("--impl-module")
    if config.getoption("--impl-argv") and chosen:
        raise pytest.UsageError("--impl-argv excludes --impl-cmd and --impl-module")
    try:
        select_clauses(config.getoption("--clause"))
    except UnknownClauseError as error:
        raise pytest.UsageError(f"--clause: {error}") from None


def _implementation(config: pytest.Config, /) -> Implementation:
    command = config.getoption("--impl-cmd")
    module = config.getoption("--impl-module")
    argv = config.getoption("--impl-argv")
    if command and module:
        raise pytest.UsageError("--impl-cmd and --impl-module exclude each other")
    if argv:
        return SubprocessDriver(argv, timeout=_timeout(config.getoption("--impl-timeout")))
    if command:
        try:
            argv = split_command(command)
        except ValueError as error:
            raise pytest.UsageError(f"--impl-cmd: {error}") from None
        return SubprocessDriver(argv, timeout=_timeout(config.getoption("--impl-timeout")))
    try:
        return InProcessDriver.load(module) if module else InProcessDriver.load()
    except ImplementationModuleError as error:
        raise pytest.UsageError(f"--impl-module: {error}") from None


@pytest.fixture(scope="session")
def impl(pytestconfig: pytest.Config) -> Iterator[Implementation]:
    """The implementation under test, reached through the protocol."""
    with _implementation(pytestconfig) as implementation:
        yield implementation


@pytest.fixture(scope="session")
def race_budget(pytestconfig: pytest.Config) -> float:
    """Seconds to spend on races in fresh processes (``--race-budget``)."""
    return _race_budget(pytestconfig.getoption("--race-budget"))


@pytest.fixture(scope="session")
def race_verdict(pytestconfig: pytest.Config) -> Callable[[RaceTally], None]:
    """Judges what a property's races showed: passes when two calls of one overlapped.

    Otherwise the property is not observed: skipped, with a reason that opens
    ``not observed: `` (``check`` reports that outcome, never a pass), or,
    under ``--require-race``, failed.
    """
    required = bool(pytestconfig.getoption("--require-race"))

    def judge(tally: RaceTally, /) -> None:
        verdict = judge_races(tally, required=required)
        if verdict.failure is not None:
            raise verdict.failure
        if verdict.outcome is RaceOutcome.NOT_OBSERVED:
            pytest.skip(verdict.detail)

    return judge


@pytest.fixture(scope="session")
def python_api(impl: Implementation) -> PythonImplementation:
    """The implementation's Python objects; the property skips over the protocol."""
    if impl.python is None:
        pytest.skip(
            "needs the Python API (Python types and exceptions); "
            "the implementation is reached over the protocol"
        )
    return impl.python


@pytest.fixture(scope="session")
def argparse_option(python_api: PythonImplementation) -> types.ModuleType:
    """The ``argparse_mode`` module beside the implementation; the property skips without one."""
    if python_api.argparse_mode is None:
        pytest.skip(f"no {ARGPARSE_MODULE} module beside the implementation")
    return python_api.argparse_mode


@pytest.fixture(scope="session")
def new_cell(python_api: PythonImplementation) -> Callable[[], Cell[object]]:
    """The implementation's first-write-wins cell type; the property skips without one."""
    if python_api.new_cell is None:
        pytest.skip("needs a FirstWriteWins cell type, which the implementation does not expose")
    return python_api.new_cell


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Check clause markers, make clause IDs ``-k`` keywords, and apply ``--clause``.

    A property is a test that takes an implementation; each must cite a clause.
    """
    known = set(CLAUSES)
    selected = select_clauses(config.getoption("--clause"))
    kept, dropped = [], []
    for item in items:
        clauses = [clause for marker in item.iter_markers("clause") for clause in marker.args]
        unknown = sorted(set(clauses) - known)
        if unknown:
            raise pytest.UsageError(f"{item.nodeid} cites unknown clauses {unknown}; see SPEC.md")
        fixtures = set(getattr(item, "fixturenames", ()))
        if not clauses and fixtures & {"impl", "python_api", "new_cell", "argparse_option"}:
            raise pytest.UsageError(f"{item.nodeid} is a property but cites no SPEC.md clause")
        item.user_properties.extend(("clause", clause) for clause in clauses)
        item.extra_keyword_matches.update(clauses)
        if selected and not selected & set(clauses):
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    unshrunk = set(config.getoption("--unshrunk"))
    for item in kept:
        if unshrunk & {item.nodeid, *item.extra_keyword_matches}:
            _leave_unshrunk(item)


#: Set on an item that ``--unshrunk`` names, for :func:`pytest_runtest_call`.
_UNSHRUNK_KEY: Final = pytest.StashKey[bool]()
#: The ``@given`` functions already given settings with no shrink phase, by ``id``.
_unshrunk_tests: set[int] = set()
#: The profiles :func:`pytest_runtest_call` loads around an unshrunk property, and after it.
_PROFILE_UNSHRUNK: Final = "ssm-rollback-spec-unshrunk"
_PROFILE_AROUND: Final = "ssm-rollback-spec-around-unshrunk"


def _no_shrinking(base: settings, /) -> settings:
    return settings(base, phases=tuple(phase for phase in base.phases if phase is not Phase.shrink))


def _leave_unshrunk(item: pytest.Item, /) -> None:
    """Mark ``item`` so that its examples are not shrunk.

    A ``@given`` property takes settings with no shrink phase, once per
    function (its parametrized items share it); a property that builds its
    settings as it runs (the model's state machine) reads the profile that
    :func:`pytest_runtest_call` loads around it.
    """
    item.stash[_UNSHRUNK_KEY] = True
    test = getattr(item, "obj", None)
    if is_hypothesis_test(test) and id(test) not in _unshrunk_tests:
        _unshrunk_tests.add(id(test))
        _no_shrinking(settings())(test)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """Know which test runs, for :func:`record_distance`; leave an ``--unshrunk`` one unshrunk."""
    _running.append(item)
    unshrunk = item.stash.get(_UNSHRUNK_KEY, False)
    if unshrunk:
        settings.register_profile(_PROFILE_AROUND, settings())
        settings.register_profile(_PROFILE_UNSHRUNK, _no_shrinking(settings()))
        settings.load_profile(_PROFILE_UNSHRUNK)
    try:
        yield
    finally:
        _running.pop()
        if unshrunk:
            settings.load_profile(_PROFILE_AROUND)


def record_distance(distance: float, bound: float, /) -> None:
    """Keep a distance the running property measured, and the bound it was judged within.

    A replay property's relative error (RB-REPLAY-1) goes into ``check``'s
    report, as a replay case's does into ``vectors run``'s; outside a test
    it is dropped.
    """
    if _running:
        _running[-1].user_properties.append((MEASURED, [distance, bound]))
