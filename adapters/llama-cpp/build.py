# SPDX-License-Identifier: MIT OR Apache-2.0
"""llama.cpp from its released source, built here once per release: ggml, llama and the adapter.

``python adapters/llama-cpp/build.py [--version 0.3.36]`` fetches the
``llama-cpp-python`` sdist of that release with pip (it vendors llama.cpp
under ``vendor/llama.cpp``; its CHANGELOG names the commit), unpacks it under
the cache folder (``~/.cache/ssm-rollback-spec/llama-cpp/<version>/``, or
``$SSM_ROLLBACK_LLAMA_CPP_CACHE/<version>/``), builds the static ``llama``
library and the ggml it needs with CMake and Ninja, CPU only, for the
baseline x86-64 target (no native tuning, no AVX variants: the same
arithmetic on any x86-64 CPU here), compiles ``rollback.cpp`` and
``ggml_replay.cpp`` (the replay of ggml's own GDN ops) against it, and
writes the random Qwen3.5 and Qwen3-Next models the llamacpp tier loads. It prints one JSON
object: the release, the llama.cpp commit and licence, the adapter and the
model. A second run finds them and builds nothing; a changed ``rollback.cpp``
is compiled again, alone. Standard library only. Nothing of llama.cpp enters
the repository.

``--own-test`` builds, after that, llama.cpp's own
``tests/test-recurrent-state-rollback.cpp`` in the same CMake tree: the tree is
configured again with llama's common library and its tests (``OWN_TEST_FLAGS``;
ggml's and llama's compile lines do not change, so Ninja builds neither again),
then Ninja builds that one test and the common library it links. It prints
``OwnTest`` and keeps it as ``own-test.json``; a second run builds nothing.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Final, TypedDict

__all__ = [
    "CACHE_ENV",
    "CMAKE_FLAGS",
    "OWN_TEST",
    "OWN_TEST_FLAGS",
    "PINNED",
    "SERVER",
    "Built",
    "LlamaCppBuildError",
    "OwnTest",
    "build",
    "build_own_test",
    "build_server",
    "include_arguments",
    "link_arguments",
    "main",
    "version_problem",
]

#: The llama-cpp-python release whose vendored llama.cpp the tier builds by default.
PINNED: Final = "0.3.36"
#: The environment variable that moves the cache folder.
CACHE_ENV: Final = "SSM_ROLLBACK_LLAMA_CPP_CACHE"
#: The model's seed: the tier's logits are this model's.
MODEL_SEED: Final = 33
#: Only ggml and llama, CPU only, for the baseline x86-64 target.
CMAKE_FLAGS: Final = (
    "-G",
    "Ninja",
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_COMMON=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_TOOLS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_SERVER=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DGGML_NATIVE=OFF",
    "-DGGML_SSE42=OFF",
    "-DGGML_AVX=OFF",
    "-DGGML_AVX2=OFF",
    "-DGGML_BMI2=OFF",
    "-DGGML_FMA=OFF",
    "-DGGML_F16C=OFF",
    "-DGGML_OPENMP=OFF",
    "-DGGML_LLAMAFILE=OFF",
    "-DGGML_BACKEND_DL=OFF",
    "-DGGML_CPU_ALL_VARIANTS=OFF",
)
#: llama.cpp's own rollback test (tests/CMakeLists.txt builds it with ``llama_build``).
OWN_TEST: Final = "test-recurrent-state-rollback"
#: What the own test and llama-server need beyond ``CMAKE_FLAGS``: the common library, the
#: tests' targets, the tools with the server (tools/server), and no web UI (neither built
#: with npm nor downloaded: tools/ui/CMakeLists.txt, scripts/ui-assets.cmake). One set for
#: both, so that configuring the shared build folder for one never drops the other's targets.
OWN_TEST_FLAGS: Final = (
    "-DLLAMA_BUILD_COMMON=ON",
    "-DLLAMA_BUILD_TESTS=ON",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
)
#: llama.cpp's OpenAI-compatible server (tools/server), judged by serve-check.
SERVER: Final = "llama-server"
_HERE: Final = Path(__file__).resolve().parent
_ADAPTER_SOURCE: Final = _HERE / "rollback.cpp"
_REPLAY_SOURCE: Final = _HERE / "ggml_replay.cpp"
_NICE: Final = ("nice", "-n", "10")
_JOBS: Final = "-j2"
_STATIC_LIBS: Final = (
    "src/libllama.a",
    "ggml/src/libggml.a",
    "ggml/src/libggml-cpu.a",
    "ggml/src/libggml-base.a",
)


class Built(TypedDict):
    """What the build made, as printed and as kept in the cache's ``built.json``."""

    version: str
    commit: str
    licence: str
    adapter: str
    model: str
    adapter_sha256: str
    cmake_flags: list[str]
    replay_adapter: str
    replay_sha256: str
    qwen3next_model: str


class OwnTest(TypedDict):
    """The own test's build, as printed by ``--own-test`` and kept in ``own-test.json``."""

    version: str
    commit: str
    binary: str
    cmake_flags: list[str]


def version_problem(version: str, /) -> str | None:
    """What is wrong with ``version`` as a ``--version`` value, or None for a release number.

    Only ``X.Y.Z`` is taken: the value names a folder under the cache.
    """
    if re.fullmatch(r"\d+\.\d+\.\d+", version):
        return None
    return f"--version {version!r} is not a release number such as {PINNED}"


class LlamaCppBuildError(RuntimeError):
    """A step of the build failed; the message names the step."""


def cache_folder(version: str, /) -> Path:
    """``$SSM_ROLLBACK_LLAMA_CPP_CACHE/<v>``, or ``~/.cache/ssm-rollback-spec/llama-cpp/<v>``."""
    chosen = os.environ.get(CACHE_ENV)
    root = Path(chosen) if chosen else Path.home() / ".cache" / "ssm-rollback-spec" / "llama-cpp"
    return root / version


def _run(step: str, command: list[str], /, *, cwd: Path | None = None) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
        raise LlamaCppBuildError(f"{step} failed: {tail}")


def _source(folder: Path, version: str, /) -> Path:
    """The sdist's unpacked tree, fetched and unpacked when it is not there yet."""
    tree = folder / "src"
    if (tree / "vendor" / "llama.cpp" / "CMakeLists.txt").exists():
        return tree
    sdists = sorted(folder.glob(f"llama_cpp_python-{version}.tar.gz"))
    if not sdists:
        _run(
            f"pip download llama-cpp-python=={version}",
            [
                *_NICE,
                sys.executable,
                "-m",
                "pip",
                "--disable-pip-version-check",
                "-q",
                "download",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"llama-cpp-python=={version}",
                "-d",
                str(folder),
            ],
        )
        sdists = sorted(folder.glob(f"llama_cpp_python-{version}.tar.gz"))
        if not sdists:
            raise LlamaCppBuildError(f"pip download gave no sdist for llama-cpp-python=={version}")
    unpacking = folder / "unpacking"
    shutil.rmtree(unpacking, ignore_errors=True)
    with tarfile.open(sdists[0]) as archive:
        archive.extractall(unpacking, filter="data")
    (top,) = unpacking.iterdir()
    top.rename(tree)
    unpacking.rmdir()
    return tree


def _commit(tree: Path, version: str, /) -> str:
    """The llama.cpp commit the release's CHANGELOG names under its own heading."""
    changelog = (tree / "CHANGELOG.md").read_text(encoding="utf-8")
    section = re.search(
        rf"^## \[{re.escape(version)}\]\n(.*?)(?=^## \[)", changelog, re.MULTILINE | re.DOTALL
    )
    found = section and re.search(r"ggml-org/llama\.cpp@([0-9a-f]{7,40})", section.group(1))
    if not found:
        raise LlamaCppBuildError(f"the CHANGELOG of {version} names no llama.cpp commit")
    return found.group(1)


def _licence(tree: Path, /) -> str:
    """The first line of vendor/llama.cpp/LICENSE, e.g. ``MIT License``."""
    return (tree / "vendor" / "llama.cpp" / "LICENSE").read_text(encoding="utf-8").splitlines()[0]


def _library(tree: Path, folder: Path, /) -> Path:
    """The build folder, with ggml and llama built in it."""
    build_dir = folder / "build"
    if not (build_dir / "build.ninja").exists():
        _run(
            "cmake configure",
            [
                *_NICE,
                "cmake",
                "-S",
                str(tree / "vendor" / "llama.cpp"),
                "-B",
                str(build_dir),
                *CMAKE_FLAGS,
            ],
        )
    _run("ninja llama", [*_NICE, "ninja", "-C", str(build_dir), _JOBS, "llama"])
    return build_dir


def include_arguments(llama: Path, /) -> list[str]:
    """The compiler's ``-I`` arguments for llama.h and the ggml headers it includes, in ``llama``.

    ``llama`` is the llama.cpp source (the sdist's ``vendor/llama.cpp``).
    """
    return ["-I", str(llama / "include"), "-I", str(llama / "ggml" / "include")]


def link_arguments(build_dir: Path, /) -> list[str]:
    """The linker's arguments for a program against llama.h: ``build_dir``'s static libraries.

    The archives of llama and ggml in one group, then pthreads and libm. A C
    program adds ``-lstdc++`` after them (docs/findings/llamacpp-*.c); g++
    links it itself.
    """
    return [
        "-Wl,--start-group",
        *(str(build_dir / lib) for lib in _STATIC_LIBS),
        "-Wl,--end-group",
        "-lpthread",
        "-lm",
    ]


def _adapter(
    tree: Path, build_dir: Path, folder: Path, commit: str, /, *, source: Path = _ADAPTER_SOURCE
) -> Path:
    """``source`` (rollback.cpp, or ggml_replay.cpp) compiled and linked against the libraries."""
    llama = tree / "vendor" / "llama.cpp"
    name = "llama-rollback" if source == _ADAPTER_SOURCE else "ggml-replay"
    out = folder / "bin" / name
    out.parent.mkdir(exist_ok=True)
    _run(
        f"compiling {source.name}",
        [
            *_NICE,
            "g++",
            "-O2",
            "-std=c++17",
            f'-DLLAMA_CPP_COMMIT="{commit}"',
            *include_arguments(llama),
            str(source),
            "-o",
            str(out),
            *link_arguments(build_dir),
        ],
    )
    return out


def _found(record: Path, adapter_sha: str, replay_sha: str, /) -> Built | None:
    """The build ``record`` names, when it is of these sources and every file is there."""
    if not record.exists():
        return None
    built: Built = json.loads(record.read_text(encoding="utf-8"))
    if (
        built["adapter_sha256"] == adapter_sha
        and built.get("replay_sha256") == replay_sha
        and built["cmake_flags"] == list(CMAKE_FLAGS)
        and Path(built["adapter"]).exists()
        and Path(built["replay_adapter"]).exists()
        and Path(built["model"]).exists()
        and Path(built.get("qwen3next_model", "")).is_file()
    ):
        return built
    return None


def build(version: str = PINNED, /) -> Built:
    """The release's adapter and model, built the first time and found in the cache after.

    Raises:
        LlamaCppBuildError: a step failed (pip, tar, cmake, ninja, g++, the model).
    """
    folder = cache_folder(version)
    folder.mkdir(parents=True, exist_ok=True)
    record = folder / "built.json"
    adapter_sha = hashlib.sha256(_ADAPTER_SOURCE.read_bytes()).hexdigest()
    replay_sha = hashlib.sha256(_REPLAY_SOURCE.read_bytes()).hexdigest()
    # A complete build is found without the lock (built.json is replaced whole),
    # so the tier never waits on a --own-test build that holds it.
    found = _found(record, adapter_sha, replay_sha)
    if found is not None:
        return found
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = _found(record, adapter_sha, replay_sha)
        if found is not None:
            return found
        tree = _source(folder, version)
        commit = _commit(tree, version)
        build_dir = _library(tree, folder)
        adapter = _adapter(tree, build_dir, folder, commit)
        replay = _adapter(tree, build_dir, folder, commit, source=_REPLAY_SOURCE)
        # rollback.cpp makes the model, so a changed one makes it anew.
        model = folder / "models" / f"qwen35-seed{MODEL_SEED}-{adapter_sha[:12]}.gguf"
        model.parent.mkdir(exist_ok=True)
        if not model.exists():
            _run("make-model", [str(adapter), "make-model", str(model), str(MODEL_SEED)])
        # Qwen3-Next: no n_rs_seq snapshots in llama.cpp, so the checkpoint way only.
        qwen3next = folder / "models" / f"qwen3next-seed{MODEL_SEED}-{adapter_sha[:12]}.gguf"
        if not qwen3next.exists():
            _run(
                "make-model qwen3next",
                [str(adapter), "make-model", str(qwen3next), str(MODEL_SEED), "qwen3next"],
            )
        built = Built(
            version=version,
            commit=commit,
            licence=_licence(tree),
            adapter=str(adapter),
            model=str(model),
            adapter_sha256=adapter_sha,
            cmake_flags=list(CMAKE_FLAGS),
            replay_adapter=str(replay),
            replay_sha256=replay_sha,
            qwen3next_model=str(qwen3next),
        )
        partial = record.with_suffix(".partial")
        partial.write_text(json.dumps(built, indent=2) + "\n", encoding="utf-8")
        partial.replace(record)
        return built


def _own_test_flags() -> list[str]:
    """``CMAKE_FLAGS`` with the common library and the tests turned on."""
    turned_on = {flag.split("=")[0] for flag in OWN_TEST_FLAGS}
    kept = [flag for flag in CMAKE_FLAGS if flag.split("=")[0] not in turned_on]
    return [*kept, *OWN_TEST_FLAGS]


def _build_target(version: str, target: str, record_name: str, /) -> OwnTest:
    """``target`` built in the release's tree with :func:`_own_test_flags` the first time.

    The libraries, adapters and models come first (:func:`build`); the record
    ``record_name`` in the cache finds the target after, while the flags hold.
    """
    built = build(version)
    folder = cache_folder(version)
    record = folder / record_name
    flags = _own_test_flags()
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if record.exists():
            found: OwnTest = json.loads(record.read_text(encoding="utf-8"))
            if found["cmake_flags"] == flags and Path(found["binary"]).is_file():
                return found
        build_dir = folder / "build"
        _run(
            "cmake configure with the common library, the tests, the tools and the server",
            [
                *_NICE,
                "cmake",
                "-S",
                str(folder / "src" / "vendor" / "llama.cpp"),
                "-B",
                str(build_dir),
                *flags,
            ],
        )
        _run(f"ninja {target}", [*_NICE, "ninja", "-C", str(build_dir), _JOBS, target])
        binary = build_dir / "bin" / target
        if not binary.is_file():
            raise LlamaCppBuildError(f"ninja {target} made no {binary}")
        made = OwnTest(
            version=version, commit=built["commit"], binary=str(binary), cmake_flags=flags
        )
        partial = record.with_suffix(".partial")
        partial.write_text(json.dumps(made, indent=2) + "\n", encoding="utf-8")
        partial.replace(record)
        return made


def build_own_test(version: str = PINNED, /) -> OwnTest:
    """llama.cpp's own rollback test, built in the release's tree the first time, found after.

    The libraries, adapters and models come first (:func:`build`), so the
    tier's other checks never wait on this build.

    Raises:
        LlamaCppBuildError: a step failed (the library build, cmake, ninja).
    """
    return _build_target(version, OWN_TEST, "own-test.json")


def build_server(version: str = PINNED, /) -> OwnTest:
    """llama-server, built in the release's tree the first time, found after.

    It shares the own test's build folder and flags (:data:`OWN_TEST_FLAGS`),
    so ggml and llama are compiled once for both.

    Raises:
        LlamaCppBuildError: a step failed (the library build, cmake, ninja).
    """
    return _build_target(version, SERVER, "server.json")


def main(argv: list[str] | None = None) -> int:
    """Build (or find) the release's adapter and print what was built as one JSON object."""
    parser = argparse.ArgumentParser(
        prog="adapters/llama-cpp/build.py", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--version", default=PINNED, help=f"a llama-cpp-python release (default {PINNED})"
    )
    parser.add_argument(
        "--own-test",
        action="store_true",
        help=f"also build llama.cpp's own {OWN_TEST} and print where it is",
    )
    parser.add_argument(
        "--server",
        action="store_true",
        help=f"also build llama.cpp's {SERVER} and print where it is",
    )
    arguments = parser.parse_args(argv)
    problem = version_problem(arguments.version)
    if problem:
        parser.error(problem)
    try:
        made: object
        if arguments.server:
            made = build_server(arguments.version)
        elif arguments.own_test:
            made = build_own_test(arguments.version)
        else:
            made = build(arguments.version)
    except LlamaCppBuildError as error:
        print(f"adapters/llama-cpp/build.py: {error}", file=sys.stderr)
        return 1
    print(json.dumps(made))
    return 0


if __name__ == "__main__":
    sys.exit(main())
