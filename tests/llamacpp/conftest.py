# SPDX-License-Identifier: MIT OR Apache-2.0
"""The llamacpp tier's llama.cpp: built from the released sdist once, then found in the cache."""

from __future__ import annotations

import pytest

from tests.llamacpp.engine import AdapterError, Built, build


@pytest.fixture(scope="session")
def llamacpp() -> Built:
    """The pinned release's adapter and model (adapters/llama-cpp/build.py; it locks its cache)."""
    try:
        return build()
    except AdapterError as error:
        pytest.fail(str(error), pytrace=False)


def pytest_configure(config: pytest.Config) -> None:
    """Write the tier report of the llama.h tests (tests/llamacpp/results.py, ``describe``)."""
    from tests.llamacpp import results  # noqa: PLC0415 - its paths, once pytest has started
    from tests.results.tier_recorder import TierRecorder  # noqa: PLC0415

    recorder = TierRecorder(results.TIER, results.TIER_REPORT, results.describe)
    config.pluginmanager.register(recorder, "llamacpp-tier-recorder")
