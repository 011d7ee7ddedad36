# SPDX-License-Identifier: MIT OR Apache-2.0
"""The findings' standalone C reproducers (docs/findings/llamacpp-*.c), run as their pages show.

Each page's "Reproducer" section holds two ``sh`` blocks: the reproducer
compiled against the sdist build (build.py's static libraries) and run, then
compiled against node-llama-cpp 3.22.1's prebuilt v0.5.0 libraries
(prebuilt.py) and run with the baseline and the native CPU variant. The tests
run those blocks as they are written, with bash from the repository root, as
a reader's shell session would, and hold each run to what the page says: the
snapshot way prints the wrong value (its order of magnitude) and exits 1 on
every affected build, the checkpoint way agrees and exits 0, and the sdist
build prints exactly the page's output. A page's compile lines are build.py's
and prebuilt.py's own arguments (``include_arguments``, ``link_arguments``).
They turn red the day a release fixes a finding.

Each page's suggested fix is tried here too, on a patched copy of the cached
file it changes (never committed): ``src/llama-memory-recurrent.cpp`` for
the two Qwen3.5 findings, ``src/llama-kv-cache-dsv4.cpp`` for DeepSeek-V4's.
The copy is compiled alone and linked ahead of the static ``libllama.a``,
whose own object for it the linker then leaves out. With it llama.cpp
refuses each shrunk case, and the tier's snapshot rounds that roll back
within each last window still pass bit for bit, every rollback accepted.
The DeepSeek-V4 page's first block writes its model with ``llama-rollback
make-model`` into ``mktemp -d``; the tests point ``TMPDIR`` at their own
temporary folder.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import shlex
import subprocess
import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Final, cast

import pytest

from tests.child import ROOT
from tests.llamacpp.engine import BUILD_SCRIPT, Way
from tests.llamacpp.machine import BOUND, Judged, rounds_machine, run_rounds

if TYPE_CHECKING:
    from types import ModuleType

    from tests.llamacpp.engine import Built

pytestmark = pytest.mark.llamacpp

_FINDINGS: Final = ROOT / "docs" / "findings"
_PREBUILT_SCRIPT: Final = ROOT / "adapters" / "llama-cpp" / "prebuilt.py"
#: The release node-llama-cpp 3.22.1's libraries are built from.
_RELEASE: Final = "v0.5.0"
#: A compile, or a run of the tiny model, takes seconds; prebuilt.py's first run fetches.
_SECONDS: Final = 900
_BLOCK: Final = re.compile(r"^```(?P<info>\w*)\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)
_RESULT: Final = re.compile(
    r"^(?P<verdict>differs|agrees): .*? \((?P<way>snapshot|checkpoint) way\), the kept tokens' "
    r"logits are (?P<value>\S+) \(max abs\).*\nexit (?P<status>\d+)$",
    re.MULTILINE,
)
_REFUSED: Final = re.compile(r"^llama\.cpp refuses .*: not reproduced$", re.MULTILINE)


class Finding(Enum):
    """The live findings with a C reproducer, by their pages' names."""

    WHOLE_WINDOW = "llamacpp-snapshot-whole-window"
    BESIDE_OTHER_SEQUENCES = "llamacpp-snapshot-beside-other-sequences"
    DSV4_PAST_THE_LAST_DECODE = "llamacpp-dsv4-rollback-past-the-last-decode"


#: The order of magnitude of each wrong value on every build (the pages: 5.28e-3,
#: 1.74e-2, 8.28e-3 and 8.33e-3).
_MAGNITUDE: Final = {
    Finding.WHOLE_WINDOW: -3,
    Finding.BESIDE_OTHER_SEQUENCES: -2,
    Finding.DSV4_PAST_THE_LAST_DECODE: -3,
}
#: The file each page's suggested fix changes, in the llama.cpp tree.
_RECURRENT_FILE: Final = "src/llama-memory-recurrent.cpp"
_DSV4_FILE: Final = "src/llama-kv-cache-dsv4.cpp"
_FIXED_FILE: Final = {
    Finding.WHOLE_WINDOW: _RECURRENT_FILE,
    Finding.BESIDE_OTHER_SEQUENCES: _RECURRENT_FILE,
    Finding.DSV4_PAST_THE_LAST_DECODE: _DSV4_FILE,
}
#: The architecture of each finding's model: the tier's own Qwen3.5 model, or
#: one ``llama-rollback make-model`` writes (test_architectures.py's seed).
_ARCH: Final = {
    Finding.WHOLE_WINDOW: "qwen35",
    Finding.BESIDE_OTHER_SEQUENCES: "qwen35",
    Finding.DSV4_PAST_THE_LAST_DECODE: "deepseek4",
}
_SEED: Final = 33
#: DeepSeek-V4's drawn rounds take a twelfth of the profile's examples, as in
#: test_architectures.py (its model costs several times Qwen3.5's a decode).
_DSV4_SHARE: Final = 12


def _id(finding: Finding, /) -> str:
    return finding.name.lower()


def _script(path: Path, name: str, /) -> ModuleType:
    """build.py or prebuilt.py as a module (their folder is no package)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _page(finding: Finding, /) -> str:
    return (_FINDINGS / f"{finding.value}.md").read_text(encoding="utf-8")


def _blocks(finding: Finding, info: str, /) -> list[str]:
    """The bodies of the page's fenced blocks of ``info`` (``sh``, ``text``, ``diff``)."""
    return [m["body"] for m in _BLOCK.finditer(_page(finding)) if m["info"] == info]


def _shell(script: str, temporary: Path, /) -> subprocess.CompletedProcess[str]:
    """``script`` run by bash from the root, ``python`` this interpreter, output captured.

    ``mktemp`` makes its folders under ``temporary``.
    """
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return subprocess.run(
        ["/bin/bash", "-c", script],
        cwd=ROOT,
        env={**os.environ, "PATH": path, "TMPDIR": str(temporary)},
        capture_output=True,
        text=True,
        timeout=_SECONDS,
        check=False,
    )


def _results(output: str, /) -> list[tuple[str, str, float, int]]:
    """Each run's verdict, way, printed difference and exit status, in order."""
    return [
        (m["verdict"], m["way"], float(m["value"]), int(m["status"]))
        for m in _RESULT.finditer(output)
    ]


def _assert_the_finding_and_its_control(
    finding: Finding, results: list[tuple[str, str, float, int]], /
) -> None:
    """The snapshot way differs at the finding's magnitude, exit 1; the checkpoint way agrees."""
    snapshot, checkpoint = results
    verdict, way, value, status = snapshot
    assert (verdict, way, status) == ("differs", "snapshot", 1), f"fixed? {results}"
    assert math.floor(math.log10(value)) == _MAGNITUDE[finding], value
    assert checkpoint[0::3] == ("agrees", 0)
    assert checkpoint[1] == "checkpoint"
    assert checkpoint[2] <= 1e-3


@pytest.mark.parametrize("finding", list(Finding), ids=_id)
def test_the_reproducer_as_its_page_shows_it_still_fails_on_the_sdist_build(
    llamacpp: Built, finding: Finding, tmp_path: Path
) -> None:
    assert llamacpp["commit"] == "0c1e57098"
    sdist = _blocks(finding, "sh")[0]
    done = _shell(sdist, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    results = _results(done.stdout)
    assert len(results) == 2, done.stdout + done.stderr[-2000:]
    _assert_the_finding_and_its_control(finding, results)
    # The baseline build's arithmetic is the same on any x86-64 CPU: the page shows it exactly.
    assert done.stdout == _blocks(finding, "text")[0]


@pytest.mark.usefixtures("llamacpp")
@pytest.mark.parametrize("finding", list(Finding), ids=_id)
def test_the_reproducer_as_its_page_shows_it_still_fails_on_the_prebuilt_release(
    finding: Finding, tmp_path: Path
) -> None:
    # The sdist block first: it sets MODEL, the tier's model, which this release loads.
    sdist, prebuilt = _blocks(finding, "sh")
    done = _shell(sdist + prebuilt, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    results = _results(done.stdout)
    assert len(results) == 6, done.stdout + done.stderr[-2000:]
    # The sdist build, then the baseline variant, then the one ggml picks here.
    for pair in (results[0:2], results[2:4], results[4:6]):
        _assert_the_finding_and_its_control(finding, pair)
    # ggml names each variant it loads on standard error, before the reproducer quiets it.
    folder = _script(_PREBUILT_SCRIPT, "llamacpp_prebuilt").cache_folder("3.22.1")
    record = cast("dict[str, str]", json.loads((folder / "prebuilt.json").read_text("utf-8")))
    for variant in ("baseline", "native"):
        assert f"loaded CPU backend from {record[variant]}\n" in done.stderr


def _compile_lines(block: str, /) -> list[list[str]]:
    """The ``cc`` commands of a block, as the shell splits them (variables left unexpanded)."""
    joined = block.replace("\\\n", " ")
    return [shlex.split(line) for line in joined.splitlines() if line.startswith("cc ")]


@pytest.mark.parametrize("finding", list(Finding), ids=_id)
def test_the_pages_compile_lines_are_the_build_scripts_own(finding: Finding) -> None:
    build = _script(BUILD_SCRIPT, "llamacpp_build")
    prebuilt = _script(_PREBUILT_SCRIPT, "llamacpp_prebuilt")
    sdist_block, prebuilt_block = _blocks(finding, "sh")
    (sdist,) = _compile_lines(sdist_block)
    (package,) = _compile_lines(prebuilt_block)
    source = f"docs/findings/{finding.value}.c"
    assert sdist == [
        "cc",
        "-O2",
        "-std=c11",
        *build.include_arguments(Path("$L/src/vendor/llama.cpp")),
        source,
        "-o",
        f"$L/bin/{finding.value}",
        *build.link_arguments(Path("$L/build")),
        "-lstdc++",
    ]
    assert package == [
        "cc",
        "-O2",
        "-std=c11",
        *build.include_arguments(Path("$N/llama.cpp")),
        source,
        "-o",
        f"$N/bin/{finding.value}",
        *prebuilt.link_arguments(Path("$LIBS"), _RELEASE),
    ]


def _compiled(built: Built, source: Path, out: Path, /, *objects: Path) -> Path:
    """``source`` (C, or C++ by its suffix) built against the sdist build, ``objects`` first."""
    build = _script(BUILD_SCRIPT, "llamacpp_build")
    folder = Path(built["adapter"]).parents[1]
    cxx = source.suffix == ".cpp"
    command = [
        "g++" if cxx else "cc",
        "-O2",
        "-std=c++17" if cxx else "-std=c11",
        *([f'-DLLAMA_CPP_COMMIT="{built["commit"]}"'] if cxx else []),
        *cast("list[str]", build.include_arguments(folder / "src" / "vendor" / "llama.cpp")),
        str(source),
        "-o",
        str(out),
        *(str(path) for path in objects),
        *cast("list[str]", build.link_arguments(folder / "build")),
        *([] if cxx else ["-lstdc++"]),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=_SECONDS, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


@pytest.mark.parametrize("finding", list(Finding), ids=_id)
def test_a_reproducer_given_a_bad_command_line_says_so_in_one_line_and_exits_2(
    llamacpp: Built, finding: Finding, tmp_path: Path
) -> None:
    binary = _compiled(llamacpp, _FINDINGS / f"{finding.value}.c", tmp_path / "reproducer")
    not_a_model = tmp_path / "not-a-model.gguf"
    not_a_model.write_text("GGUF? no\n", encoding="utf-8")
    for arguments, said in (
        ([], "usage: "),
        ([llamacpp["model"], "snapshot", "extra"], "usage: "),
        ([llamacpp["model"], "sideways"], "the way is snapshot or checkpoint, not sideways"),
        ([str(tmp_path / "absent.gguf")], "llama.cpp cannot load the model"),
        ([str(not_a_model)], "llama.cpp cannot load the model"),
    ):
        done = subprocess.run(
            [str(binary), *arguments], capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 2, arguments
        assert done.stdout == ""
        assert done.stderr.count("\n") == 1, done.stderr
        assert said in done.stderr


def _fix(finding: Finding, /) -> str:
    """The page's suggested fix: its one ``diff`` block, a patch of the file it changes."""
    (diff,) = _blocks(finding, "diff")
    return diff


def _model(built: Built, finding: Finding, folder: Path, /) -> str:
    """The finding's model: the tier's own, or the one ``make-model`` writes of its architecture."""
    arch = _ARCH[finding]
    if arch == "qwen35":
        return built["model"]
    path = folder / f"{arch}-seed{_SEED}.gguf"
    done = subprocess.run(
        [built["adapter"], "make-model", str(path), str(_SEED), arch],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return str(path)


def _fixed_object(built: Built, fixed_file: str, diff: str, work: Path, /) -> Path:
    """``diff`` applied to a copy of the cached ``fixed_file``, compiled alone as libllama does."""
    folder = Path(built["adapter"]).parents[1]
    llama = folder / "src" / "vendor" / "llama.cpp"
    copy = work / fixed_file
    copy.parent.mkdir()
    copy.write_bytes((llama / fixed_file).read_bytes())
    patched = subprocess.run(
        ["/usr/bin/patch", "-p1", "--forward", "--batch", "-d", str(work)],
        input=diff,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert patched.returncode == 0, f"the fix no longer applies: {patched.stdout}"
    build = _script(BUILD_SCRIPT, "llamacpp_build")
    # libllama's own flags for it (build.ninja): its folder and the generated headers' first.
    out = work / Path(fixed_file).with_suffix(".o").name
    command = [
        "c++",
        "-O3",
        "-DNDEBUG",
        "-DGGML_USE_CPU",
        "-I",
        str(llama / "src"),
        "-I",
        str(folder / "build" / "src"),
        *cast("list[str]", build.include_arguments(llama)),
        "-c",
        str(copy),
        "-o",
        str(out),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=_SECONDS, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def fixed_object(llamacpp: Built, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Qwen3.5 pages' fix of ``src/llama-memory-recurrent.cpp``, compiled."""
    work = tmp_path_factory.mktemp("fixed-recurrent")
    return _fixed_object(llamacpp, _RECURRENT_FILE, _fix(Finding.WHOLE_WINDOW), work)


@pytest.fixture(scope="module")
def dsv4_fixed_object(llamacpp: Built, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The DeepSeek-V4 page's fix of ``src/llama-kv-cache-dsv4.cpp``, compiled."""
    work = tmp_path_factory.mktemp("fixed-dsv4")
    fix = _fix(Finding.DSV4_PAST_THE_LAST_DECODE)
    return _fixed_object(llamacpp, _DSV4_FILE, fix, work)


def test_both_qwen35_pages_suggest_the_one_fix() -> None:
    # One patch serves both recurrent findings; each page shows it whole.
    assert _fix(Finding.WHOLE_WINDOW) == _fix(Finding.BESIDE_OTHER_SEQUENCES)
    assert _fix(Finding.WHOLE_WINDOW) != _fix(Finding.DSV4_PAST_THE_LAST_DECODE)


@pytest.mark.parametrize("finding", list(Finding), ids=_id)
def test_each_pages_fix_patches_the_file_it_names(finding: Finding) -> None:
    fixed_file = _FIXED_FILE[finding]
    assert _fix(finding).startswith(f"--- a/{fixed_file}\n+++ b/{fixed_file}\n")
    assert f"`{fixed_file}` patched and linked ahead of `libllama.a`" in _page(finding)


@pytest.mark.parametrize(
    "finding", [Finding.WHOLE_WINDOW, Finding.DSV4_PAST_THE_LAST_DECODE], ids=_id
)
def test_the_suggested_fix_applies_unchanged_to_the_prebuilt_releases_source(
    finding: Finding, tmp_path: Path
) -> None:
    # The pages say so; v0.5.0 itself is not rebuilt with it (its libraries are prebuilt).
    done = subprocess.run(
        [sys.executable, str(_PREBUILT_SCRIPT)],
        capture_output=True,
        text=True,
        timeout=_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    adapter = cast("dict[str, str]", json.loads(done.stdout))["adapter"]
    fixed_file = _FIXED_FILE[finding]
    release = Path(adapter).parents[1] / "llama.cpp" / fixed_file
    copy = tmp_path / fixed_file
    copy.parent.mkdir()
    copy.write_bytes(release.read_bytes())
    patched = subprocess.run(
        ["/usr/bin/patch", "-p1", "--dry-run", "--forward", "--batch", "-d", str(tmp_path)],
        input=_fix(finding),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert patched.returncode == 0, patched.stdout
    assert "offset" not in patched.stdout
    assert "fuzz" not in patched.stdout


@pytest.mark.parametrize("finding", list(Finding), ids=_id)
def test_with_the_suggested_fix_llama_cpp_refuses_the_rollback_it_cannot_serve(
    llamacpp: Built, finding: Finding, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    fixture = "dsv4_fixed_object" if _FIXED_FILE[finding] == _DSV4_FILE else "fixed_object"
    fixed = cast("Path", request.getfixturevalue(fixture))
    binary = _compiled(llamacpp, _FINDINGS / f"{finding.value}.c", tmp_path / "reproducer", fixed)
    model = _model(llamacpp, finding, tmp_path)
    for way, status in (("snapshot", 0), ("checkpoint", 0)):
        done = subprocess.run(
            [str(binary), model, way],
            capture_output=True,
            text=True,
            timeout=_SECONDS,
            check=False,
        )
        assert done.returncode == status, done.stdout + done.stderr
        if way == "snapshot":
            assert _REFUSED.search(done.stdout), done.stdout
        else:
            assert done.stdout.startswith("agrees: ")


def _fixed_adapter(built: Built, fixed: Path, folder: Path, /) -> Built:
    """The tier's adapter built with ``fixed`` linked ahead of ``libllama.a``."""
    adapter = _compiled(
        built, ROOT / "adapters" / "llama-cpp" / "rollback.cpp", folder / "llama-rollback", fixed
    )
    return cast("Built", {**built, "adapter": str(adapter)})


def test_with_the_suggested_fix_one_sequences_snapshot_rollbacks_stay_exact(
    llamacpp: Built, fixed_object: Path, tmp_path: Path
) -> None:
    # The tier's rounds on one sequence, rolled back within each window: the
    # fix must accept every such rollback (the machine asserts it) and keep
    # the logits of decoding only the kept tokens, bit for bit.
    judged = Judged()
    built = _fixed_adapter(llamacpp, fixed_object, tmp_path)
    run_rounds(rounds_machine(built, Way.SNAPSHOT, slots=1, judged=judged))
    assert judged.tokens > 0
    assert judged.largest <= BOUND


def test_with_the_dsv4_fix_its_snapshot_rollbacks_within_the_last_window_stay_exact(
    llamacpp: Built, dsv4_fixed_object: Path, tmp_path: Path
) -> None:
    # DeepSeek-V4's rounds as test_architectures.py draws them exact on
    # 0c1e57098: several sequences, rollbacks up to each whole last window.
    # The fix must accept every one (the machine asserts it), bit for bit.
    judged = Judged()
    built = _fixed_adapter(llamacpp, dsv4_fixed_object, tmp_path)
    model = _model(built, Finding.DSV4_PAST_THE_LAST_DECODE, tmp_path)
    machine = rounds_machine(
        built,
        Way.SNAPSHOT,
        model=model,
        whole_window=True,
        past_window=False,
        judged=judged,
    )
    run_rounds(machine, share=_DSV4_SHARE)
    assert judged.tokens > 0
    assert judged.largest <= BOUND
