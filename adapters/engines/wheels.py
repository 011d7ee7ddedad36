# SPDX-License-Identifier: MIT OR Apache-2.0
"""The engines' released wheels: fetched by pip, cached, unpacked in part, licences read.

Nothing from the engines is in this repository. ``pip download --no-deps``
fetches each wheel from the package index the first time it is needed; the
wheel and the few files the adapters import from it are kept under the cache
folder, ``$SSM_ROLLBACK_ENGINE_CACHE`` or ``~/.cache/ssm-rollback-spec/engines``.

Each engine's pinned release is its default (``spec/sizing/releases.py``
declares it once); an adapter's ``--version`` asks for another release of the
same engine (:func:`release`), which is fetched and cached under its own
version beside the pinned one. Where an older release keeps the files the
adapters read elsewhere, :data:`MOVED` says so, once, with its reason.

``python adapters/engines/wheels.py`` fetches all three and prints, per
engine, its version, its licence as its wheel's metadata states it, and where
its files are.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ssm_rollback_spec.sizing.releases import SGLANG, VLLM

__all__ = [
    "CACHE_ENV",
    "COMPILED_LIST",
    "ENGINES",
    "MOVED",
    "SUPPORTED",
    "Engine",
    "EngineFetchError",
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
class Engine:
    """One engine: its distribution, version, licence, and the files the adapters import."""

    name: str
    distribution: str
    version: str
    license: str
    #: Paths in the wheel, or folder prefixes ending in "/", that the adapters read.
    members: tuple[str, ...]

    @property
    def requirement(self) -> str:
        """The exact requirement pip downloads."""
        return f"{self.distribution}=={self.version}"

    @property
    def dist_info(self) -> str:
        """The wheel's metadata folder."""
        return f"{self.distribution.replace('-', '_')}-{self.version}.dist-info/"


ENGINES: Final = {
    "vllm": Engine(
        "vllm",
        "vllm",
        VLLM.version,
        "Apache-2.0",
        # The whole package's Python (its compiled extensions are never unpacked):
        # replay_batch imports vLLM's own metadata builder and GDN layer, which
        # import its configuration, as the planners tier does.
        (
            "vllm/",
            "vllm/model_executor/layers/mamba/ops/causal_conv1d.py",
            "vllm/third_party/flash_linear_attention/ops/fused_sigmoid_gating.py",
            "vllm/v1/attention/backends/utils.py",
            "vllm/v1/attention/backends/gdn_attn.py",
        ),
    ),
    "sglang": Engine(
        "sglang",
        "sglang",
        SGLANG.version,
        "Apache-2.0",
        (
            "sglang/kernels/ops/mamba/causal_conv1d_triton.py",
            "sglang/kernels/ops/attention/linear/gdn_replayssm_spec_decode.py",
        ),
    ),
    "fla": Engine("fla", "fla-core", "0.6.0", "MIT", ("fla/",)),
}


#: The releases each engine adapter is run against (docs/engines.md, "Releases"):
#: the pinned one first. ``--version`` takes any other release the index has, and
#: says in ``describe`` that it is not one of these.
SUPPORTED: Final = {
    "vllm": (VLLM.version,),
    "sglang": (SGLANG.version,),
    "fla": ("0.6.0",),
}

#: Files the adapters read that an older release keeps at another path, per
#: engine: (newest release that keeps the old path, path now, path then). vLLM
#: moved FLA's gating kernel under ``third_party/`` in 0.26.0; 0.25.1 keeps it
#: in ``model_executor/layers/fla/ops/`` (read in both wheels). The releases in
#: :data:`SUPPORTED` keep every member where the pinned one does.
MOVED: Final[dict[str, tuple[tuple[str, str, str], ...]]] = {
    "vllm": (
        (
            "0.25.1",
            "vllm/third_party/flash_linear_attention/ops/fused_sigmoid_gating.py",
            "vllm/model_executor/layers/fla/ops/fused_sigmoid_gating.py",
        ),
    ),
    "sglang": (),
    "fla": (),
}

#: A release as the package index spells one (PEP 440's public versions, simply).
_VERSION: Final = re.compile(r"[0-9]+(\.[0-9]+){0,3}((a|b|rc|\.post|\.dev)[0-9]+)*")


def _key(version: str, /) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"[0-9]+", version)[:4])


def release(name: str, version: str | None = None, /) -> Engine:
    """Engine ``name`` at ``version`` (the pinned release when None), members where it keeps them.

    Raises:
        EngineFetchError: ``version`` is not a release number.
    """
    pinned = ENGINES[name]
    if version is None or version == pinned.version:
        return pinned
    if not _VERSION.fullmatch(version):
        raise EngineFetchError(f"--version {version!r} is not a release number such as 0.33.0")
    members = list(pinned.members)
    for newest, now, then in MOVED[name]:
        if _key(version) <= _key(newest):
            members = [then if member == now else member for member in members]
    return dataclasses.replace(pinned, version=version, members=tuple(members))


#: The file in an unpacked release that names its compiled modules left out.
COMPILED_LIST: Final = "compiled-modules.txt"
#: Compiled extensions, never unpacked: the adapters import an engine's Python only.
_COMPILED: Final = (".so", ".pyd")


#: The release each engine's adapter drives in this process (``--version``), by name.
_SELECTED: Final[dict[str, Engine]] = {}


def select(engine: Engine, /) -> None:
    """Drive ``engine`` (a release of one engine) in this process, for :func:`selected`."""
    _SELECTED[engine.name] = engine


def selected(name: str, /) -> Engine:
    """The release of engine ``name`` this process drives: the one selected, else the pinned one."""
    return _SELECTED.get(name, ENGINES[name])


def cache_root() -> Path:
    """``$SSM_ROLLBACK_ENGINE_CACHE``, or ``~/.cache/ssm-rollback-spec/engines``."""
    chosen = os.environ.get(CACHE_ENV)
    return Path(chosen) if chosen else Path.home() / ".cache" / "ssm-rollback-spec" / "engines"


def _wheel(engine: Engine, wheels: Path, /) -> Path:
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


def fetch(engine: Engine, /) -> Path:
    """The folder holding ``engine``'s kernel files, fetching and unpacking them once.

    Raises:
        EngineFetchError: pip could not download the wheel, the wheel lacks a
            file the adapters need, or its licence is not the one expected.
    """
    root = cache_root()
    unpacked = root / "unpacked" / f"{engine.distribution}-{engine.version}"
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
    found = _license(unpacked / engine.dist_info)
    if found != engine.license:
        raise EngineFetchError(
            f"{engine.requirement}: its metadata states the licence {found!r}, "
            f"not {engine.license!r}"
        )
    return unpacked


def main() -> int:
    """Fetch every engine and print what was found; 1 with one line on a failure."""
    for engine in ENGINES.values():
        try:
            where = fetch(engine)
        except EngineFetchError as error:
            sys.stderr.write(f"wheels.py: {error}\n")
            return 1
        sys.stdout.write(f"{engine.requirement}  {engine.license}  {where}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
