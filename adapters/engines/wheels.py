# SPDX-License-Identifier: MIT OR Apache-2.0
"""The engines' released wheels: fetched by pip, cached, unpacked in part, licences read.

Nothing from the engines is in this repository. ``pip download --no-deps``
fetches each wheel from the package index the first time it is needed; the
wheel and the few files the adapters import from it are kept under the cache
folder, ``$SSM_ROLLBACK_ENGINE_CACHE`` or ``~/.cache/ssm-rollback-spec/engines``.

Each engine's module declares its :class:`EngineWheel` (``WHEEL``): its pinned
release, read from ``spec/releases.py`` (which declares it once), and
the files its kernels import; the registry (``registry.py``) lists them. An
adapter's ``--version`` asks for another release of the same engine
(:func:`release`), which is fetched and cached under its own version beside
the pinned one. Where an older release keeps the files the adapters read
elsewhere, the engine's ``moved`` says so, once, with its reason.

``python -m adapters.engines.wheels`` (from the repository root) fetches every
registered engine and prints, per engine, its version, its licence as its
wheel's metadata states it, and where its files are.
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from ssm_rollback_spec.releases import Release

__all__ = [
    "CACHE_ENV",
    "COMPILED_LIST",
    "EngineFetchError",
    "EngineWheel",
    "cache_root",
    "fetch",
    "main",
    "release",
    "select",
    "selected",
]

#: The environment variable that moves the cache folder.
CACHE_ENV: Final = "SSM_ROLLBACK_ENGINE_CACHE"


class EngineFetchError(RuntimeError):
    """An engine's wheel could not be fetched, unpacked, or is not under the licence expected."""


@dataclass(frozen=True)
class EngineWheel:
    """One engine release's wheel: its distribution, version, licence, and what adapters import."""

    name: str
    distribution: str
    version: str
    license: str
    #: Paths in the wheel, or folder prefixes ending in "/", that the adapters read.
    members: tuple[str, ...]
    #: The releases its adapter is run against (docs/engines.md, "Releases"):
    #: the pinned one first. ``--version`` takes any other release the index
    #: has, and says in ``describe`` that it is not one of these.
    supported: tuple[str, ...] = ()
    #: Files the adapter reads that an older release keeps at another path:
    #: (newest release that keeps the old path, path now, path then).
    moved: tuple[tuple[str, str, str], ...] = ()

    @classmethod
    def pinned(
        cls,
        name: str,
        release: Release,
        members: tuple[str, ...],
        /,
        *,
        also_supported: tuple[str, ...] = (),
        moved: tuple[tuple[str, str, str], ...] = (),
    ) -> EngineWheel:
        """The wheel of engine ``name`` pinned at ``release`` (``spec/releases.py``).

        The pinned release is supported, and ``also_supported`` besides.
        """
        return cls(
            name,
            release.distribution,
            release.version,
            release.license,
            members,
            supported=(release.version, *also_supported),
            moved=moved,
        )

    @property
    def requirement(self) -> str:
        """The exact requirement pip downloads."""
        return f"{self.distribution}=={self.version}"

    @property
    def dist_info(self) -> str:
        """The wheel's metadata folder."""
        return f"{self.distribution.replace('-', '_')}-{self.version}.dist-info/"


#: A release as the package index spells one (PEP 440's public versions, simply).
_VERSION: Final = re.compile(r"[0-9]+(\.[0-9]+){0,3}((a|b|rc|\.post|\.dev)[0-9]+)*")


def _key(version: str, /) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"[0-9]+", version)[:4])


def release(pinned: EngineWheel, version: str | None = None, /) -> EngineWheel:
    """The engine ``pinned`` at ``version`` (``pinned`` when None), members where it keeps them.

    Raises:
        EngineFetchError: ``version`` is not a release number.
    """
    if version is None or version == pinned.version:
        return pinned
    if not _VERSION.fullmatch(version):
        raise EngineFetchError(f"--version {version!r} is not a release number such as 0.33.0")
    members = list(pinned.members)
    for newest, now, then in pinned.moved:
        if _key(version) <= _key(newest):
            members = [then if member == now else member for member in members]
    return dataclasses.replace(pinned, version=version, members=tuple(members))


#: The file in an unpacked release that names its compiled modules left out.
COMPILED_LIST: Final = "compiled-modules.txt"
#: Compiled extensions, never unpacked: the adapters import an engine's Python only.
_COMPILED: Final = (".so", ".pyd")


#: The release each engine's adapter drives in this process (``--version``), by name.
_SELECTED: Final[dict[str, EngineWheel]] = {}


def select(engine: EngineWheel, /) -> None:
    """Drive ``engine`` (a release of one engine) in this process, for :func:`selected`."""
    _SELECTED[engine.name] = engine


def selected(pinned: EngineWheel, /) -> EngineWheel:
    """The release of engine ``pinned`` this process drives: the one selected, else ``pinned``."""
    return _SELECTED.get(pinned.name, pinned)


def cache_root() -> Path:
    """``$SSM_ROLLBACK_ENGINE_CACHE``, or ``~/.cache/ssm-rollback-spec/engines``."""
    chosen = os.environ.get(CACHE_ENV)
    return Path(chosen) if chosen else Path.home() / ".cache" / "ssm-rollback-spec" / "engines"


def _wheel(engine: EngineWheel, wheels: Path, /) -> Path:
    stem = f"{engine.distribution.replace('-', '_')}-{engine.version}-"
    found = sorted(wheels.glob(f"{stem}*.whl"))
    if found:
        return found[0]
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    command += ["--quiet", "--dest", str(wheels), engine.requirement]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    found = sorted(wheels.glob(f"{stem}*.whl"))
    if done.returncode != 0 or not found:
        last = (done.stderr.strip().splitlines() or ["no wheel written"])[-1]
        raise EngineFetchError(f"pip download {engine.requirement} failed: {last}")
    return found[0]


def _license(dist_info: Path, /) -> str:
    metadata = (dist_info / "METADATA").read_text(encoding="utf-8")
    for line in metadata.splitlines():
        if line.startswith("License-Expression:"):
            return line.partition(":")[2].strip()
    texts = [path.read_text(encoding="utf-8") for path in sorted(dist_info.rglob("LICENSE*"))]
    opening = " ".join(" ".join(texts[0].split()[:6]).split()) if texts else ""
    if opening.startswith("Apache License Version 2.0"):
        return "Apache-2.0"
    if opening.startswith("MIT License"):
        return "MIT"
    return opening or "unstated"


def fetch(engine: EngineWheel, /) -> Path:
    """The folder holding ``engine``'s kernel files, fetching and unpacking them once.

    Raises:
        EngineFetchError: pip could not download the wheel, the wheel lacks a
            file the adapters need, or its licence is not the one expected.
    """
    root = cache_root()
    unpacked = root / "unpacked" / f"{engine.distribution}-{engine.version}"
    unpacked.parent.mkdir(parents=True, exist_ok=True)
    # Adapters started together (a CI's workers, two terminals) fetch one release
    # at a time: the second waits, then finds it unpacked.
    with (unpacked.parent / f"{unpacked.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _unpack(engine, root, unpacked)
    found = _license(unpacked / engine.dist_info)
    if found != engine.license:
        raise EngineFetchError(
            f"{engine.requirement}: its metadata states the licence {found!r}, "
            f"not {engine.license!r}"
        )
    return unpacked


def _unpack(engine: EngineWheel, root: Path, unpacked: Path, /) -> None:
    done = unpacked / ".complete"
    # The marker names the members too, so a change of them unpacks again.
    wanted = (*engine.members, engine.dist_info)
    if not done.exists() or done.read_text(encoding="utf-8").split("\n")[1:-1] != list(wanted):
        wheels = root / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        wheel = _wheel(engine, wheels)
        with zipfile.ZipFile(wheel) as archive:
            names = [
                name
                for name in archive.namelist()
                if any(name == w or (w.endswith("/") and name.startswith(w)) for w in wanted)
                and not name.endswith(_COMPILED)
            ]
            missing = [m for m in engine.members if not any(n.startswith(m) for n in names)]
            if missing:
                raise EngineFetchError(f"{wheel.name} lacks {', '.join(missing)}")
            archive.extractall(unpacked, members=names)
            # The compiled extensions left out, by module name, for the stand-ins.
            compiled = [
                name.split(".")[0].replace("/", ".")
                for name in archive.namelist()
                if name.endswith(_COMPILED) and any(name.startswith(w) for w in wanted)
            ]
            (unpacked / COMPILED_LIST).write_text("".join(f"{c}\n" for c in compiled), "utf-8")
        done.write_text("\n".join([wheel.name, *wanted]) + "\n", encoding="utf-8")


def main() -> int:
    """Fetch every registered engine and print what was found; 1 with one line on a failure."""
    from .registry import ENGINES  # noqa: PLC0415 - the registry imports each engine, which imports this

    for adapter in ENGINES.values():
        engine = adapter.wheel
        try:
            where = fetch(engine)
        except EngineFetchError as error:
            sys.stderr.write(f"adapters.engines.wheels: {error}\n")
            return 1
        sys.stdout.write(f"{engine.requirement}  {engine.license}  {where}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
