# SPDX-License-Identifier: MIT OR Apache-2.0
"""``ssm-rollback-spec check``: run the property suite against an implementation."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Final

from spec import SPEC_VERSION
from spec.harness.clauses import UnknownClauseError, select_clauses
from spec.harness.failures import AdapterFailure
from spec.harness.python_impl import (
    REFERENCE,
    ImplementationModuleError,
    load_python_implementation,
)
from spec.harness.subprocess_driver import SubprocessDriver

from .arguments import adapter_argv, add_impl_arguments
from .errors import CliError, ExitStatus
from .report import LABELS, clause_summary, counts, write_json
from .shipped import suite_directory

if TYPE_CHECKING:
    import argparse

__all__ = ["add_check_command"]

_PROFILES: Final = ("dev", "ci", "thorough", "crosshair")

# The suite's own configuration, so that no pytest configuration or plugin
# of the folder or environment it runs in changes its results.
_SUITE_CONFIG: Final = """\
[pytest]
addopts = --strict-markers --strict-config
xfail_strict = true
filterwarnings =
    error
    ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning
"""


def add_check_command(commands: argparse._SubParsersAction[argparse.ArgumentParser], /) -> None:
    """Add ``check`` and its options."""
    check = commands.add_parser(
        "check",
        help="run the property suite against an implementation",
        description="Run the property suite against an implementation: the Python reference "
        "by default, a Python module with --impl-module, or an adapter with --impl-cmd. "
        "Exits 0 when no property failed (skips are reported, not failures), 1 when one "
        "did, 2 on a usage error.",
    )
    add_impl_arguments(check, python=True)
    check.add_argument(
        "--profile",
        choices=_PROFILES,
        default="ci",
        help="Hypothesis profile (default ci: derandomized, reproducible; "
        "crosshair: symbolic, advisory)",
    )
    check.add_argument(
        "--clause",
        action="append",
        default=[],
        metavar="ID",
        help="run only the properties citing this clause; a family such as RB-SIZE selects "
        "all of it (repeatable)",
    )
    check.add_argument(
        "--json", metavar="PATH", help="also write a machine-readable report (- for stdout)"
    )
    check.add_argument("-v", "--verbose", action="store_true", help="show pytest's own output")
    check.set_defaults(run=_check)


def _preflight(arguments: argparse.Namespace, /) -> None:
    # One describe first, so an adapter that cannot start fails once, clearly,
    # rather than once per property; a module that cannot load, the same.
    if arguments.impl_module is not None:
        try:
            load_python_implementation(arguments.impl_module)
        except ImplementationModuleError as error:
            raise CliError(f"--impl-module: {error}") from None
    if arguments.impl_cmd is not None:
        argv = adapter_argv(arguments.impl_cmd)
        try:
            with SubprocessDriver(argv, timeout=arguments.impl_timeout) as driver:
                driver.request({"op": "describe"})
        except AdapterFailure as failure:
            raise CliError(
                f"the adapter failed its first request:\n{failure}", ExitStatus.FAILED
            ) from None


def _require_test_stack(profile: str, /) -> None:
    missing = [name for name in ("pytest", "hypothesis") if importlib.util.find_spec(name) is None]
    if missing:
        raise CliError(
            f"check needs {' and '.join(missing)}; "
            "install them with: pip install 'ssm-rollback-spec[check]'"
        )
    if profile == "crosshair" and importlib.util.find_spec("hypothesis_crosshair_provider") is None:
        raise CliError(
            "the crosshair profile needs hypothesis-crosshair: "
            "pip install 'ssm-rollback-spec[crosshair]'"
        )


def _pytest_command(arguments: argparse.Namespace, scratch: Path, /) -> list[str]:
    suite = suite_directory()
    if not suite.is_dir():
        raise CliError(f"the property suite is missing from the installed package ({suite})")
    config = scratch / "suite.ini"
    config.write_text(_SUITE_CONFIG, encoding="utf-8")
    command = [
        sys.executable,
        "-m",
        "pytest",
        str(suite),
        f"-c={config}",
        f"--rootdir={suite}",
        f"--confcutdir={suite}",
        "-p",
        "hypothesis.extra.pytestplugin",
        "-p",
        "spec.harness.pytest_plugin",
        "-p",
        "spec.tools.check_report",
        "-p",
        "no:cacheprovider",
        f"--impl-timeout={arguments.impl_timeout}",
        f"--check-report={scratch / 'report.json'}",
        "-q",
    ]
    command += [f"--clause={clause}" for clause in arguments.clause]
    if arguments.impl_cmd is not None:
        command.append(f"--impl-cmd={arguments.impl_cmd}")
    if arguments.impl_module is not None:
        command.append(f"--impl-module={arguments.impl_module}")
    return command


def _run_suite(arguments: argparse.Namespace, /) -> dict[str, object]:
    _require_test_stack(arguments.profile)
    try:
        select_clauses(arguments.clause)
    except UnknownClauseError as error:
        raise CliError(f"--clause: {error}") from None
    _preflight(arguments)
    with tempfile.TemporaryDirectory() as scratch:
        command = _pytest_command(arguments, Path(scratch))
        env = {**os.environ, "HYPOTHESIS_PROFILE": arguments.profile}
        # Only the plugins the suite names: an environment's own pytest
        # plugins must not change its results.
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        for name in ("SSM_ROLLBACK_IMPL_CMD", "SSM_ROLLBACK_IMPL_MODULE"):
            env.pop(name, None)
        finished = subprocess.run(  # noqa: S603 - this interpreter, running pytest
            command,
            cwd=scratch,
            env=env,
            stdout=None if arguments.verbose else subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
        )
        report_path = Path(scratch) / "report.json"
        if not report_path.exists():
            tail = (finished.stdout or "")[-3000:]
            raise CliError(
                f"the property suite did not run (pytest exit {finished.returncode})\n{tail}"
            )
        report: dict[str, object] = json.loads(report_path.read_text(encoding="utf-8"))
    return report


def _check(arguments: argparse.Namespace, /) -> int:
    if arguments.impl_cmd is not None:
        target = arguments.impl_cmd
    else:
        target = f"{arguments.impl_module or REFERENCE} (in-process)"
    print(f"ssm-rollback-spec check: {target}, profile {arguments.profile}, spec {SPEC_VERSION}")
    report = _run_suite(arguments)
    results: list[dict[str, object]] = report["results"]  # type: ignore[assignment]
    shown_skips = set()
    for result in results:
        name = str(result["property"])
        clauses = ", ".join(result["clauses"])  # type: ignore[arg-type]
        print(f"{LABELS[str(result['outcome'])]}  {name}  [{clauses}]")
        detail = str(result["detail"])
        # A skip's reason is shown once, not once per property it skips.
        if result["outcome"] == "skipped":
            if detail in shown_skips:
                continue
            shown_skips.add(detail)
        for line in detail.splitlines():
            print(f"      {line}")
    by_clause = clause_summary(
        (result["clauses"], str(result["outcome"]))  # type: ignore[misc]
        for result in results
    )
    print("clauses:")
    for clause, outcome in by_clause.items():
        print(f"{LABELS[outcome]}  {clause}")
    tally = counts(str(result["outcome"]) for result in results)
    print(", ".join(f"{count} {outcome}" for outcome, count in tally.items()))
    if arguments.json:
        document = {
            "implementation": target,
            "profile": arguments.profile,
            "spec_version": SPEC_VERSION,
            "properties": results,
            "clauses": by_clause,
            "counts": tally,
        }
        write_json(arguments.json, document)
    ok = tally["failed"] == 0 and tally["passed"] > 0 and report["exit_status"] == 0
    return ExitStatus.OK if ok else ExitStatus.FAILED
