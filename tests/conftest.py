# SPDX-License-Identifier: MIT OR Apache-2.0
"""Hypothesis profiles and the choice of implementation under test."""

from __future__ import annotations

import importlib.util
import os
import shutil
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, Phase, Verbosity, settings

from spec.driver import Implementation, InProcessDriver, PythonApi
from spec.subprocess_driver import DEFAULT_TIMEOUT, SubprocessDriver, split_command
from tests.child import RUST_CRATE, run_cargo

if TYPE_CHECKING:
    from collections.abc import Iterator

# Timing belongs to benchmarks/, never to tests: no profile has a deadline.
_COMMON = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow],
}
settings.register_profile("dev", max_examples=60, **_COMMON)  # type: ignore[arg-type]
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
# The symbolic profile: CrossHair explores paths instead of drawing examples
# (pip install -e '.[crosshair]'); advisory, never a CI gate.
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

IMPL_CMD_ENV = "SSM_ROLLBACK_IMPL_CMD"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ssm-rollback-spec")
    group.addoption(
        "--impl-cmd",
        default=os.environ.get(IMPL_CMD_ENV),
        help=f"adapter command of the implementation under test (or ${IMPL_CMD_ENV}); "
        "without it, spec/rollback.py runs in-process",
    )
    group.addoption(
        "--impl-timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help="seconds an adapter may take over one reply",
    )
    group.addoption(
        "--impl-mutant",
        default=None,
        help="run against a deliberately wrong in-process implementation (the self-test)",
    )


def _implementation(config: pytest.Config) -> Implementation:
    command = config.getoption("--impl-cmd")
    mutant = config.getoption("--impl-mutant")
    if command and mutant:
        raise pytest.UsageError("--impl-cmd and --impl-mutant exclude each other")
    if command:
        try:
            argv = split_command(command)
        except ValueError as error:
            raise pytest.UsageError(str(error)) from None
        return SubprocessDriver(argv, timeout=config.getoption("--impl-timeout"))
    if mutant:
        from tests.selftest.mutants import in_process_mutant  # noqa: PLC0415 - self-test only

        try:
            return in_process_mutant(mutant)
        except KeyError as error:
            raise pytest.UsageError(str(error.args[0])) from None
    return InProcessDriver.reference()


@pytest.fixture(scope="session")
def impl(pytestconfig: pytest.Config) -> Iterator[Implementation]:
    with _implementation(pytestconfig) as implementation:
        yield implementation


@pytest.fixture(scope="session")
def python_api(impl: Implementation) -> PythonApi:
    if impl.python is None:
        pytest.skip(
            "needs the Python API (Python types and exceptions); "
            f"{impl.name} is reached over the protocol"
        )
    return impl.python


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    from tests.traceability import spec_clauses  # noqa: PLC0415 - needs the rootdir importable

    known = set(spec_clauses())
    for item in items:
        clauses = [clause for marker in item.iter_markers("clause") for clause in marker.args]
        unknown = sorted(set(clauses) - known)
        if unknown:
            raise pytest.UsageError(f"{item.nodeid} cites unknown clauses {unknown}; see SPEC.md")
        if not clauses and "tests/properties/" in item.nodeid:
            raise pytest.UsageError(f"{item.nodeid} is a property but cites no SPEC.md clause")
        item.user_properties.extend(("clause", clause) for clause in clauses)


@pytest.fixture(scope="session")
def cargo() -> str:
    found = shutil.which("cargo")
    if found is None:
        pytest.skip("cargo is not installed, so the Rust adapter cannot be built")
    return found


@pytest.fixture(scope="session")
def rust_adapter(cargo: str) -> str:
    built = run_cargo(cargo, "build")
    assert built.returncode == 0, built.stderr
    return str(RUST_CRATE / "target" / "release" / "ssm-rollback-adapter")
