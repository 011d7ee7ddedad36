# SPDX-License-Identifier: MIT OR Apache-2.0
"""What users install works without the repository: the wheel, in a fresh venv, elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any, Final

import pytest

from tests.child import ROOT, run_module

# One worker builds the wheel (python -m build writes build/ in the clone) and
# installs it once for the module's tests.
pytestmark = pytest.mark.xdist_group("installed-wheel")

SUITE: Final = ROOT / "tests" / "properties"
CORPUS: Final = ROOT / "vectors"


class Installed:
    """A fresh virtual environment holding only the built wheel and its ``check`` extra."""

    def __init__(self, root: Path, wheel: Path, elsewhere: Path) -> None:
        self.root = root
        self.wheel = wheel
        self.elsewhere = elsewhere
        self.python = root / "bin" / "python"
        self.command = root / "bin" / "ssm-rollback-spec"

    def run(self, *arguments: str) -> subprocess.CompletedProcess[str]:
        """The installed command, run from a folder that is not a clone."""
        env = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith(("PYTHON", "SSM_ROLLBACK_", "VIRTUAL_ENV", "HYPOTHESIS_"))
        }
        return subprocess.run(
            [str(self.command), *arguments],
            cwd=self.elsewhere,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )

    def adapter(self) -> str:
        """The installed Python adapter's command."""
        return f"{self.python} -m ssm_rollback_spec.harness.adapter"


def _checked(command: list[str], /, cwd: Path = ROOT) -> None:
    finished = subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=900, check=False
    )
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    dist = tmp_path_factory.mktemp("dist")
    _checked([sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)])
    [wheel] = dist.glob("ssm_rollback_spec-*.whl")
    root = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=True, clear=True).create(root)
    pip = [str(root / "bin" / "python"), "-m", "pip", "install", "-q"]
    _checked([*pip, f"{wheel}[check]"])
    return Installed(root, wheel, tmp_path_factory.mktemp("elsewhere"))


def _json(path: Path, /) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def test_the_wheel_carries_the_suite_and_the_corpus(installed: Installed) -> None:
    finished = installed.run("vectors", "where")
    assert finished.returncode == 0, finished.stderr
    first, replay = finished.stdout.splitlines()
    shipped = Path(first)
    assert shipped.is_relative_to(installed.root)
    assert Path(replay) == shipped / "replay"
    for corpus, copy in ((CORPUS, shipped), (CORPUS / "replay", Path(replay))):
        assert sorted(p.name for p in copy.glob("*.json")) == sorted(
            p.name for p in corpus.glob("*.json")
        )
        for path in corpus.glob("*.json"):
            assert (copy / path.name).read_bytes() == path.read_bytes(), path.name
    suite = shipped.parent / "suite"
    assert sorted(p.name for p in suite.glob("*.py")) == sorted(p.name for p in SUITE.glob("*.py"))


def test_the_wheel_installs_its_own_name_and_not_spec(installed: Installed) -> None:
    probe = (
        "import importlib.util, ssm_rollback_spec, ssm_rollback_spec.corpus\n"
        "print(importlib.util.find_spec('spec'))\n"
        "print(ssm_rollback_spec.__file__)\n"
    )
    finished = subprocess.run(
        [str(installed.python), "-c", probe],
        cwd=installed.elsewhere,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    found_spec, package = finished.stdout.splitlines()
    assert found_spec == "None"
    assert Path(package).is_relative_to(installed.root)
    # Nothing installed imports the folder's name: every module of the
    # package reaches its siblings relatively or by the installed name.
    site = Path(package).parent
    offenders = [
        str(path.relative_to(site))
        for path in sorted(site.rglob("*.py"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.lstrip().startswith(("from spec.", "from spec import", "import spec"))
    ]
    assert offenders == []


def _outcomes(report: dict[str, Any], /) -> dict[str, str]:
    return {result["property"]: result["outcome"] for result in report["properties"]}


def test_check_passes_installed_with_the_same_results_as_from_the_clone(
    installed: Installed, tmp_path: Path
) -> None:
    finished = installed.run("check", "--json", str(tmp_path / "installed.json"))
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr
    installed_report = _json(tmp_path / "installed.json")
    # The opt-in replay properties skip: the reference has no replay kernel.
    outcomes = {c: o for c, o in installed_report["clauses"].items() if "REPLAY" not in c}
    assert set(outcomes.values()) == {"passed"}
    cloned = run_module(
        "ssm_rollback_spec.tools.cli", "check", "--json", str(tmp_path / "clone.json")
    )
    assert cloned.returncode == 0, cloned.stdout[-3000:]
    assert _outcomes(installed_report) == _outcomes(_json(tmp_path / "clone.json"))


def test_check_over_the_protocol_passes_installed(installed: Installed, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    finished = installed.run("check", "--impl-cmd", installed.adapter(), "--json", str(report))
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr
    outcomes = set(_outcomes(_json(report)).values())
    # The Python-API properties skip over the protocol; the rest pass.
    assert outcomes == {"passed", "skipped"}


def test_vectors_run_passes_installed(installed: Installed, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    finished = installed.run(
        "vectors", "run", "--impl-cmd", installed.adapter(), "--json", str(report)
    )
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr
    counts = _json(report)["counts"]
    assert counts["passed"] == sum(
        len(_json(path)["cases"]) for path in CORPUS.glob("*.json") if "cases" in _json(path)
    )
    assert counts["failed"] == counts["not-run"] == 0
    # The Python adapter does not offer replay: its replay cases are not offered.
    skipped = [case for case in _json(report)["cases"] if case["outcome"] == "skipped"]
    assert counts["skipped"] == len(skipped) == 49
    assert {case["detail"] for case in skipped} == {
        "not offered: the adapter answered unknown-op to replay"
    }


def test_vectors_run_installed_runs_the_replay_cases_on_the_rust_adapter(
    installed: Installed, tmp_path: Path, rust_adapter: str
) -> None:
    report = tmp_path / "report.json"
    finished = installed.run("vectors", "run", "--impl-cmd", rust_adapter, "--json", str(report))
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr
    cases = _json(report)["cases"]
    replay = [case for case in cases if case["id"].startswith("replay-")]
    assert len(replay) == 49
    # Its describe lists float64 and transformers-bf16: the 15 engine cases are not offered.
    skipped = [case for case in replay if case["outcome"] == "skipped"]
    assert len(skipped) == 15
    assert all(case["detail"].startswith("not offered: ") for case in skipped)
    assert {case["outcome"] for case in cases if case not in skipped} == {"passed"}


def test_vectors_run_installed_fails_a_wrong_rust_replay(
    installed: Installed, tmp_path: Path, wrong_replay_rust_adapter: tuple[str, str]
) -> None:
    _, adapter = wrong_replay_rust_adapter
    report = tmp_path / "report.json"
    finished = installed.run("vectors", "run", "--impl-cmd", adapter, "--json", str(report))
    assert finished.returncode == 1, finished.stdout[-3000:] + finished.stderr
    failed = {case["id"] for case in _json(report)["cases"] if case["outcome"] == "failed"}
    assert failed
    assert all(case_id.startswith("replay-") for case_id in failed)


def test_check_installed_runs_the_replay_properties_on_the_rust_adapter(
    installed: Installed, tmp_path: Path, rust_adapter: str
) -> None:
    report = tmp_path / "report.json"
    finished = installed.run(
        "check", "--impl-cmd", rust_adapter, "--clause", "RB-REPLAY", "--json", str(report)
    )
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr
    outcomes = _outcomes(_json(report))
    assert outcomes
    assert set(outcomes) == {p for p in outcomes if p.startswith("test_replay.py::")}
    assert set(outcomes.values()) == {"passed"}
