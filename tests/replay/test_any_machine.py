# SPDX-License-Identifier: MIT OR Apache-2.0
"""Every generated, committed file comes out the same at every SIMD level and BLAS kernel.

numpy picks a kernel for ``exp`` and for its reductions by the CPU features it
finds at import; ``NPY_DISABLE_CPU_FEATURES`` turns the newer ones off, and
``OPENBLAS_CORETYPE`` picks OpenBLAS's kernel. Each setting regenerates both
corpora in a fresh interpreter, which also reports the features it ran with,
so a setting that did not take effect cannot pass for one that did.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Final, TypedDict

import pytest

_ROOT: Final = Path(__file__).resolve().parents[2]
_CHILD: Final = """
import hashlib, json, sys
import threadpoolctl
from numpy._core import _multiarray_umath as m
from ssm_rollback_spec.corpus.replay_cases import generate_replay_vectors
from ssm_rollback_spec.corpus.protocol_cases import generate
files = {"replay/" + k: v for k, v in generate_replay_vectors().items()}
files.update(generate())
features = {k: bool(m.__cpu_features__.get(k)) for k in m.__cpu_dispatch__}
digests = {k: hashlib.sha256(v.encode("ascii")).hexdigest() for k, v in files.items()}
blas = [i.get("architecture", "") for i in threadpoolctl.threadpool_info()]
json.dump({"features": features, "blas": blas, "files": digests}, sys.stdout)
"""


class _Generation(TypedDict):
    features: dict[str, bool]
    #: The kernel each BLAS numpy loaded runs, as threadpoolctl reports it.
    blas: list[str]
    files: dict[str, str]


def _generate(environment: dict[str, str], /) -> _Generation:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD],
        cwd=_ROOT,
        env={**os.environ, **environment},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    generation: _Generation = json.loads(done.stdout)
    return generation


def _levels(generation: _Generation, /) -> list[str]:
    """The optional SIMD levels a generation ran with, oldest first, as numpy names them."""
    return [name for name, found in generation["features"].items() if found]


def _committed(names: list[str], /) -> dict[str, str]:
    vectors = _ROOT / "vectors"
    return {name: hashlib.sha256((vectors / name).read_bytes()).hexdigest() for name in names}


def _assert_committed(setting: dict[str, str], generation: _Generation, /) -> None:
    """Every file ``generation`` made under ``setting`` is the committed one, byte for byte."""
    replay = sorted(f"replay/{p.name}" for p in (_ROOT / "vectors" / "replay").glob("*.json"))
    committed = _committed([*replay, *(p.name for p in (_ROOT / "vectors").glob("*.json"))])
    disabled = setting.get("NPY_DISABLE_CPU_FEATURES", "").split()
    assert not any(generation["features"][name] for name in disabled), setting
    # Every replay file is generated; the protocol corpus's schema is written by hand.
    assert set(replay) <= set(generation["files"]) <= set(committed)
    assert generation["files"] == {name: committed[name] for name in generation["files"]}, (
        f"{setting}: a generated file differs from the committed one; the corpus "
        "depends on the machine (run ssm-rollback-spec vectors generate, and see "
        "docs/replay.md)"
    )


_X86: Final = platform.machine() in {"x86_64", "AMD64"}


@pytest.mark.slow
@pytest.mark.clause("RB-REPLAY-1")
def test_the_newest_and_oldest_simd_levels_and_two_blas_kernels_give_the_committed_vectors() -> (
    None
):
    # All features on (the first generation, which also names this machine's levels),
    # then down to the baseline, then OpenBLAS's own kernel choice, old and new.
    first = _generate({})
    _assert_committed({}, first)
    settings = [{"NPY_DISABLE_CPU_FEATURES": " ".join(_levels(first))}]
    if _X86:
        settings += [{"OPENBLAS_CORETYPE": core} for core in ("Prescott", "Haswell")]
    kernels = {tuple(first["blas"])}
    for setting in settings:
        generation = _generate(setting)
        _assert_committed(setting, generation)
        kernels.add(tuple(generation["blas"]))
    # OPENBLAS_CORETYPE took effect: the settings ran more than one BLAS kernel.
    assert len(kernels) >= 2 or not _X86, kernels


@pytest.mark.slow
@pytest.mark.clause("RB-REPLAY-1")
def test_every_simd_level_between_generates_the_committed_vectors_byte_for_byte() -> None:
    levels = _levels(_generate({}))
    # This project's x86-64 machines have x86-64-v3 (AVX2) at least; one with
    # AVX-512 has levels between it and the baseline.
    assert len(levels) >= 1 or not _X86
    # Each newest level turned off in turn; the oldest alone is the test above's.
    for i in range(1, len(levels)):
        setting = {"NPY_DISABLE_CPU_FEATURES": " ".join(levels[i:])}
        _assert_committed(setting, _generate(setting))
