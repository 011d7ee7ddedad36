# SPDX-License-Identifier: MIT OR Apache-2.0
"""The repository's own runs: the suite's plugin, and the Rust adapter's build."""

from __future__ import annotations

import os
import shutil
import threading
from typing import TYPE_CHECKING, Final

import pytest

from tests.child import RACY_TARGET, ROOT, RUST_CRATE, run_cargo, wrong_target
from tests.installed import Installed, install_wheel

if TYPE_CHECKING:
    from collections.abc import Iterator

# The plugin the installed suite runs under: profiles, the implementation
# under test, clause markers and selection.
pytest_plugins = ("ssm_rollback_spec.harness.pytest_plugin",)

# The suite starts hundreds of Python children (pytest runs, adapters, the
# command), and each would compile the clone's modules and pytest's rewritten
# tests anew where PYTHONDONTWRITEBYTECODE is set, as on some CI hosts: about
# half of a child pytest's start. They cache their bytecode instead, outside
# the source tree, where no build or copy of the tree can pick it up.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    os.environ["PYTHONPYCACHEPREFIX"] = str(ROOT / ".pytest_cache" / "pycache")


#: The longest tests, by name, wherever their files move: run first, so that
#: under ``-n`` they overlap the many short ones instead of ending the run on
#: one worker while the others wait (each runs a document's commands, a
#: minute or so).
_LONGEST_FIRST: Final = ("test_every_command_a_document_shows_works_as_pasted",)
#: Tests that judge what many others make once a run (the kernels tier's
#: reports): run last, when it is made, so that no worker waits on the other
#: making the same report in the same order.
_LAST: Final = ("test_the_committed_results_page_is_what_this_runs_reports_give",)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the longest tests to the front and the gathering ones to the end, else as collected."""
    first = [item for item in items if getattr(item, "originalname", None) in _LONGEST_FIRST]
    last = [item for item in items if getattr(item, "originalname", None) in _LAST]
    items[:] = first + [item for item in items if item not in first and item not in last] + last


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


@pytest.fixture(scope="session")
def racy_rust_adapter(cargo: str) -> str:
    built = run_cargo(cargo, "build", racy=True)
    assert built.returncode == 0, built.stderr
    return str(RACY_TARGET / "release" / "ssm-rollback-adapter")


@pytest.fixture(scope="session", params=["replay-one-short", "replay-stale-rows"])
def wrong_replay_rust_adapter(request: pytest.FixtureRequest, cargo: str) -> tuple[str, str]:
    """A wrong replay build of the Rust adapter (a cargo feature) and the feature's name."""
    feature: str = request.param
    built = run_cargo(cargo, "build", feature=feature)
    assert built.returncode == 0, built.stderr
    return feature, str(wrong_target(feature) / "release" / "ssm-rollback-adapter")


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The built wheel in a fresh venv, made once per run and shared by every worker."""
    return install_wheel(tmp_path_factory)


def _build_quietly(tmp_path_factory: pytest.TempPathFactory, /) -> None:
    try:
        install_wheel(tmp_path_factory)
    except Exception:  # noqa: BLE001 - the fixture that needs it builds again and says why
        return


@pytest.fixture(scope="session", autouse=True)
def _wheel_built_early(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Start the wheel's build beside the first tests, when any test of the run installs it.

    Under ``-n``, a worker that reaches such a test while another builds
    waits for it; begun early, the build overlaps the other tests instead.
    """
    needed = (
        isinstance(item, pytest.Function) and "installed" in item.fixturenames
        for item in request.session.items
    )
    if not any(needed):
        yield
        return
    # The run's temporary folder is made here, once, before the thread and the
    # first test could both make it at the same moment.
    tmp_path_factory.getbasetemp()
    early = threading.Thread(target=_build_quietly, args=(tmp_path_factory,), daemon=True)
    early.start()
    yield
    early.join()
