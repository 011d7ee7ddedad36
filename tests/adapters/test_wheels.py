# SPDX-License-Identifier: MIT OR Apache-2.0
"""The engines' wheel cache (adapters/engines/wheels.py), on a small wheel made here.

No index is reached: the wheel is put where pip would have downloaded it.
"""

from __future__ import annotations

import fcntl
import threading
import zipfile
from typing import TYPE_CHECKING, Final

import pytest

from adapters.engines import wheels

if TYPE_CHECKING:
    from pathlib import Path

ENGINE: Final = wheels.EngineWheel("toy", "toy-engine", "1.0.0", "MIT", ("toy/ops/",))


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache folder holding the toy engine's wheel, as if pip had fetched it."""
    (tmp_path / "wheels").mkdir()
    with zipfile.ZipFile(tmp_path / "wheels" / "toy_engine-1.0.0-py3-none-any.whl", "w") as wheel:
        wheel.writestr("toy/ops/kernel.py", "SCALE = 2\n")
        wheel.writestr("toy/ops/fast.so", "compiled")
        wheel.writestr("toy/other.py", "")
        wheel.writestr("toy_engine-1.0.0.dist-info/METADATA", "License-Expression: MIT\n")
    monkeypatch.setenv(wheels.CACHE_ENV, str(tmp_path))
    return tmp_path


def test_a_fetch_unpacks_the_members_and_names_the_compiled_modules_left_out(cache: Path) -> None:
    folder = wheels.fetch(ENGINE)
    assert folder == cache / "unpacked" / "toy-engine-1.0.0"
    unpacked = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert unpacked == [
        ".complete",
        wheels.COMPILED_LIST,
        "toy/ops/kernel.py",
        "toy_engine-1.0.0.dist-info/METADATA",
    ]
    assert (folder / wheels.COMPILED_LIST).read_text(encoding="utf-8") == "toy.ops.fast\n"


@pytest.mark.usefixtures("cache")
def test_a_wheel_under_another_licence_is_refused() -> None:
    other = wheels.EngineWheel("toy", "toy-engine", "1.0.0", "Apache-2.0", ("toy/ops/",))
    with pytest.raises(wheels.EngineFetchError) as raised:
        wheels.fetch(other)
    assert str(raised.value) == (
        "toy-engine==1.0.0: its metadata states the licence 'MIT', not 'Apache-2.0'"
    )


def test_a_fetch_waits_for_another_processs_unpacking_of_the_release(cache: Path) -> None:
    lock_path = cache / "unpacked" / "toy-engine-1.0.0.lock"
    lock_path.parent.mkdir(parents=True)
    fetched: list[Path] = []
    with lock_path.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        fetcher = threading.Thread(target=lambda: fetched.append(wheels.fetch(ENGINE)))
        fetcher.start()
        fetcher.join(timeout=0.5)
        # While the lock is held, nothing is unpacked beside the other process's work.
        assert fetcher.is_alive()
        assert not (cache / "unpacked" / "toy-engine-1.0.0").exists()
    fetcher.join(timeout=60)
    assert fetched == [cache / "unpacked" / "toy-engine-1.0.0"]
