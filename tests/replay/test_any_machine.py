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


def _dispatch_levels() -> list[str]:
    """The optional SIMD levels this machine has, oldest first, as numpy names them."""
    return [name for name, found in _generate({})["features"].items() if found]


def _settings() -> list[dict[str, str]]:
    """All features on; then each newest level turned off in turn, down to the baseline."""
    levels = _dispatch_levels()
    settings = [{"NPY_DISABLE_CPU_FEATURES": ""}]
    settings += [{"NPY_DISABLE_CPU_FEATURES": " ".join(levels[i:])} for i in range(len(levels))]
    if platform.machine() in {"x86_64", "AMD64"}:
        # OpenBLAS's own kernel choice, old and new, beside the SIMD levels.
        settings += [
            {"NPY_DISABLE_CPU_FEATURES": "", "OPENBLAS_CORETYPE": core}
            for core in ("Prescott", "Haswell")
        ]
    return settings


def _committed(names: list[str], /) -> dict[str, str]:
    vectors = _ROOT / "vectors"
    return {name: hashlib.sha256((vectors / name).read_bytes()).hexdigest() for name in names}


@pytest.mark.clause("RB-REPLAY-1")
def test_every_cpu_feature_setting_generates_the_committed_vectors_byte_for_byte() -> None:
    settings = _settings()
    # On this project's x86-64 machines: at least AVX-512 off and AVX2 off as well.
    assert len(settings) >= 3 or platform.machine() not in {"x86_64", "AMD64"}
    replay = sorted(f"replay/{p.name}" for p in (_ROOT / "vectors" / "replay").glob("*.json"))
    committed = _committed([*replay, *(p.name for p in (_ROOT / "vectors").glob("*.json"))])
    kernels = set()
    for setting in settings:
        generation = _generate(setting)
        disabled = setting["NPY_DISABLE_CPU_FEATURES"].split()
        assert not any(generation["features"][name] for name in disabled), setting
        kernels.add(tuple(generation["blas"]))
        # Every replay file is generated; the protocol corpus's schema is written by hand.
        assert set(replay) <= set(generation["files"]) <= set(committed)
        assert generation["files"] == {name: committed[name] for name in generation["files"]}, (
            f"{setting}: a generated file differs from the committed one; the corpus "
            "depends on the machine (run ssm-rollback-spec vectors generate, and see "
            "docs/replay.md)"
        )
    # OPENBLAS_CORETYPE took effect: the settings ran more than one BLAS kernel.
    assert len(kernels) >= 2 or platform.machine() not in {"x86_64", "AMD64"}, kernels
