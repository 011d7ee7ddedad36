# SPDX-License-Identifier: MIT OR Apache-2.0
"""llama.cpp as node-llama-cpp ships it, prebuilt: the adapter compiled against that release alone.

``python adapters/llama-cpp/prebuilt.py [--version 3.22.1]`` fetches two npm
packages of that node-llama-cpp release with ``npm pack``:
``@node-llama-cpp/linux-x64`` (the prebuilt CPU libraries: ``libllama``,
``libggml``, ``libggml-base`` and one ``libggml-cpu-*.so`` per x86-64
level, ggml's run-time variants) and ``node-llama-cpp`` (whose
``llama/gitRelease.bundle`` is the llama.cpp release those libraries were
built from, and ``llama/llama.cpp.info.json`` its tag). It unpacks them
under ``~/.cache/ssm-rollback-spec/llama-cpp/node-llama-cpp-<version>/`` (or
``$SSM_ROLLBACK_LLAMA_CPP_CACHE``), clones the bundle for the release's
headers, and compiles ``rollback.cpp``, the same source the sdist build
compiles, with ``ggml_cpu_variant.cpp`` (which loads a CPU variant before
``main``) against those headers, linked with the package's own libraries.
Nothing of llama.cpp is compiled here and nothing enters the repository.

It prints one JSON object: the package's version and licence, the llama.cpp
tag, the adapter, the baseline variant (``libggml-cpu-x64.so``) and the
variant ggml picks on this CPU from the package's folder. The adapter takes
the variant from ``SSM_GGML_CPU_VARIANT`` (a path) or picks it from
``SSM_GGML_BACKEND_DIR`` (ggml_cpu_variant.cpp). A second run builds nothing
while the sources are the same. Standard library only.

The models are the sdist build's (build.py): this release's
``llama_model_init_from_user`` refuses the tensors rollback.cpp's
``make-model`` gives it ("done_getting_tensors: too many tensors created"),
while it loads the files that build writes.
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

__all__ = ["CACHE_ENV", "PINNED", "Prebuilt", "PrebuiltError", "build", "link_arguments", "main"]

#: The node-llama-cpp release whose prebuilt llama.cpp the tier judges by default.
PINNED: Final = "3.22.1"
#: The cache's root, shared with build.py.
CACHE_ENV: Final = "SSM_ROLLBACK_LLAMA_CPP_CACHE"
#: The package of prebuilt libraries, and the one holding the release's source.
_BINARIES: Final = "@node-llama-cpp/linux-x64"
_SOURCE: Final = "node-llama-cpp"
#: The libraries the adapter links, by the names the package gives them.
_LINKED: Final = ("libllama.{tag}.so", "libggml.{tag}.so", "libggml-base.so")
#: ggml's baseline x86-64 variant: SSE2 only, the arithmetic of any x86-64 CPU.
_BASELINE: Final = "libggml-cpu-x64.so"
_HERE: Final = Path(__file__).resolve().parent
_SOURCES: Final = (_HERE / "rollback.cpp", _HERE / "ggml_cpu_variant.cpp")
_LOADED: Final = re.compile(r"loaded CPU backend from (\S+)")
_NICE: Final = ("nice", "-n", "10")


class PrebuiltError(RuntimeError):
    """A step of fetching, unpacking or compiling failed; the message names it."""


class Prebuilt(TypedDict):
    """What this script prints, and keeps as ``prebuilt.json``."""

    version: str
    licence: str
    release: str
    adapter: str
    adapter_sha256: str
    baseline: str
    native: str
    libraries: str


def cache_folder(version: str, /) -> Path:
    """``$SSM_ROLLBACK_LLAMA_CPP_CACHE/node-llama-cpp-<v>``, or the same under ~/.cache."""
    chosen = os.environ.get(CACHE_ENV)
    root = Path(chosen) if chosen else Path.home() / ".cache" / "ssm-rollback-spec" / "llama-cpp"
    return root / f"node-llama-cpp-{version}"


def _run(step: str, command: list[str], /, *, cwd: Path | None = None) -> str:
    """``command``'s standard error, or a :class:`PrebuiltError` naming ``step``."""
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
        raise PrebuiltError(f"{step} failed: {tail}")
    return done.stderr


def _package(folder: Path, name: str, version: str, /) -> Path:
    """The npm package ``name@version``, packed and unpacked under ``folder``, once."""
    unpacked = folder / name.replace("/", "+")
    if (unpacked / "package.json").is_file():
        return unpacked
    tarballs = folder / "tarballs"
    tarballs.mkdir(parents=True, exist_ok=True)
    stem = name.removeprefix("@").replace("/", "-")
    found = sorted(tarballs.glob(f"{stem}-{version}.tgz"))
    if not found:
        _run(
            f"npm pack {name}@{version}",
            ["npm", "pack", "--silent", f"{name}@{version}"],
            cwd=tarballs,
        )
        found = sorted(tarballs.glob(f"{stem}-{version}.tgz"))
        if not found:
            raise PrebuiltError(f"npm pack {name}@{version} wrote no {stem}-{version}.tgz")
    partial = unpacked.with_name(unpacked.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    with tarfile.open(found[0]) as archive:
        archive.extractall(partial, filter="data")
    (partial / "package").rename(unpacked)
    partial.rmdir()
    return unpacked


def _release(source: Path, folder: Path, /) -> tuple[str, Path]:
    """The llama.cpp tag the package names, and its tree cloned from the package's bundle."""
    info = json.loads((source / "llama" / "llama.cpp.info.json").read_text(encoding="utf-8"))
    tag = str(info["tag"])
    tree = folder / "llama.cpp"
    if not (tree / "include" / "llama.h").is_file():
        shutil.rmtree(tree, ignore_errors=True)
        bundle = source / "llama" / "gitRelease.bundle"
        _run("git clone of the release bundle", ["git", "clone", "-q", str(bundle), str(tree)])
    return tag, tree


def link_arguments(libraries: Path, tag: str, /) -> list[str]:
    """The linker's arguments for a program against the package's ``libraries`` of release ``tag``.

    Its libllama, libggml and libggml-base by their file names, then the
    folder, searched at link time and at run time (rpath): rollback.cpp and
    the findings' C reproducers (docs/findings/llamacpp-*.c) link them so.
    """
    return [
        *(f"-l:{name.format(tag=tag)}" for name in _LINKED),
        f"-L{libraries}",
        f"-Wl,-rpath,{libraries}",
    ]


def _digest(paths: tuple[Path, ...], /) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def build(version: str = PINNED, /) -> Prebuilt:
    """The adapter against node-llama-cpp ``version``'s prebuilt llama.cpp, built or found.

    Raises:
        PrebuiltError: a step failed (npm pack, git clone, g++), or the
            package lacks a library the adapter links.
    """
    folder = cache_folder(version)
    folder.mkdir(parents=True, exist_ok=True)
    record = folder / "prebuilt.json"
    sha = _digest(_SOURCES)
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if record.exists():
            found: Prebuilt = json.loads(record.read_text(encoding="utf-8"))
            if found["adapter_sha256"] == sha and Path(found["adapter"]).is_file():
                return found
        binaries = _package(folder, _BINARIES, version)
        source = _package(folder, _SOURCE, version)
        tag, tree = _release(source, folder)
        libraries = binaries / "bins" / "linux-x64"
        linked = [libraries / name.format(tag=tag) for name in _LINKED]
        missing = [path.name for path in [*linked, libraries / _BASELINE] if not path.is_file()]
        if missing:
            raise PrebuiltError(f"{_BINARIES}@{version} lacks {', '.join(missing)}")
        adapter = folder / "bin" / "llama-rollback"
        adapter.parent.mkdir(exist_ok=True)
        _run(
            "compiling rollback.cpp",
            [
                *_NICE,
                "g++",
                "-O2",
                "-std=c++17",
                f'-DLLAMA_CPP_COMMIT="{tag}"',
                "-I",
                str(tree / "include"),
                "-I",
                str(tree / "ggml" / "include"),
                *(str(path) for path in _SOURCES),
                "-o",
                str(adapter),
                *link_arguments(libraries, tag),
            ],
        )
        # The adapter's usage line comes after ggml's own line naming the variant it loaded.
        probe = subprocess.run(
            [str(adapter)],
            env={**os.environ, "SSM_GGML_BACKEND_DIR": str(libraries)},
            capture_output=True,
            text=True,
            check=False,
        )
        chosen = _LOADED.search(probe.stderr)
        if chosen is None:
            raise PrebuiltError(f"ggml loaded no CPU variant from {libraries}")
        package = json.loads((binaries / "package.json").read_text(encoding="utf-8"))
        made = Prebuilt(
            version=version,
            licence=str(package["license"]),
            release=tag,
            adapter=str(adapter),
            adapter_sha256=sha,
            baseline=str(libraries / _BASELINE),
            native=chosen.group(1),
            libraries=str(libraries),
        )
        partial = record.with_suffix(".partial")
        partial.write_text(json.dumps(made, indent=2) + "\n", encoding="utf-8")
        partial.replace(record)
        return made


def main(argv: list[str] | None = None) -> int:
    """Build (or find) the adapter against the prebuilt release and print what was built."""
    parser = argparse.ArgumentParser(
        prog="adapters/llama-cpp/prebuilt.py", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--version", default=PINNED, help=f"node-llama-cpp's release ({PINNED})")
    arguments = parser.parse_args(argv)
    try:
        made = build(arguments.version)
    except PrebuiltError as error:
        print(f"prebuilt.py: {error}", file=sys.stderr)
        return 1
    print(json.dumps(made, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
