# SPDX-License-Identifier: MIT OR Apache-2.0
"""The ``ssm-rollback-spec`` command: ``check``, ``vectors`` and ``size``.

Every failure the user can cause ends in one line on stderr and a non-zero
exit status, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Final

from spec import SPEC_VERSION, __version__
from spec.subprocess_driver import (
    DEFAULT_TIMEOUT,
    AdapterFailure,
    SubprocessDriver,
    split_command,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["CliError", "main"]

_ROOT: Final = Path(__file__).resolve().parent.parent
_PROPERTIES: Final = _ROOT / "tests" / "properties"
_PROFILES: Final = ("dev", "ci", "thorough")


class CliError(Exception):
    """A user-facing failure: its message is printed, without a traceback."""

    def __init__(self, message: str, /, status: int = 2) -> None:
        super().__init__(message)
        self.status: Final = status


def _check_arguments(parser: argparse.ArgumentParser, /) -> None:
    parser.add_argument(
        "--impl-cmd",
        metavar="CMD",
        help="adapter command of the implementation under test (split with shell rules, "
        "never run by a shell); default: spec/rollback.py in-process",
    )
    parser.add_argument(
        "--impl-timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"seconds an adapter may take over one reply (default {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--profile",
        choices=_PROFILES,
        default="ci",
        help="Hypothesis profile (default ci: derandomized, reproducible)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write a machine-readable report")
    parser.add_argument("-v", "--verbose", action="store_true", help="show pytest's own output")


def _preflight(command: str, timeout: float, /) -> None:
    # One describe first, so an adapter that cannot start fails once, clearly,
    # rather than once per property.
    try:
        with SubprocessDriver(split_command(command), timeout=timeout) as driver:
            driver.request({"op": "describe"})
    except ValueError as error:
        raise CliError(f"--impl-cmd: {error}") from None
    except AdapterFailure as failure:
        raise CliError(f"the adapter failed its first request:\n{failure}", status=1) from None


def _run_suite(arguments: argparse.Namespace, /) -> dict[str, object]:
    if not _PROPERTIES.is_dir():
        raise CliError(
            f"the property suite is not here ({_PROPERTIES}); "
            "run check from a clone of the repository, installed with pip install -e '.[check]'"
        )
    try:
        import hypothesis  # noqa: F401, PLC0415 - only check needs it
        import pytest  # noqa: F401, PLC0415
    except ImportError as error:
        raise CliError(
            f"check needs pytest and hypothesis ({error}); "
            "install them with: pip install 'ssm-rollback-spec[check]'"
        ) from None
    if arguments.impl_timeout <= 0:
        raise CliError(f"--impl-timeout must be positive, got {arguments.impl_timeout:g}")
    command = [
        sys.executable,
        "-m",
        "pytest",
        str(_PROPERTIES),
        f"--rootdir={_ROOT}",
        "-p",
        "spec.check_report",
        "-p",
        "no:cacheprovider",
        f"--impl-timeout={arguments.impl_timeout}",
        "-q",
    ]
    if arguments.impl_cmd is not None:
        _preflight(arguments.impl_cmd, arguments.impl_timeout)
        command.append(f"--impl-cmd={arguments.impl_cmd}")
    with tempfile.TemporaryDirectory() as scratch:
        report_path = Path(scratch) / "report.json"
        command.append(f"--check-report={report_path}")
        env = {**os.environ, "HYPOTHESIS_PROFILE": arguments.profile}
        env.pop("SSM_ROLLBACK_IMPL_CMD", None)
        finished = subprocess.run(  # noqa: S603 - this interpreter, running pytest
            command,
            cwd=_ROOT,
            env=env,
            stdout=None if arguments.verbose else subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
        )
        if not report_path.exists():
            tail = (finished.stdout or "")[-3000:]
            raise CliError(
                f"the property suite did not run (pytest exit {finished.returncode})\n{tail}"
            )
        report: dict[str, object] = json.loads(report_path.read_text(encoding="utf-8"))
    return report


def _clause_summary(results: list[dict[str, object]], /) -> dict[str, str]:
    by_clause: dict[str, list[str]] = {}
    for result in results:
        for clause in result["clauses"]:  # type: ignore[attr-defined]
            by_clause.setdefault(str(clause), []).append(str(result["outcome"]))
    summary = {}
    for clause, outcomes in sorted(by_clause.items()):
        if "failed" in outcomes:
            summary[clause] = "failed"
        elif "passed" in outcomes:
            summary[clause] = "passed"
        else:
            summary[clause] = "skipped"
    return summary


_LABELS: Final = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP"}


def _check(arguments: argparse.Namespace, /) -> int:
    target = arguments.impl_cmd or "spec/rollback.py (in-process)"
    print(f"ssm-rollback-spec check: {target}, profile {arguments.profile}, spec {SPEC_VERSION}")
    report = _run_suite(arguments)
    results: list[dict[str, object]] = report["results"]  # type: ignore[assignment]
    shown_skips = set()
    for result in results:
        name = str(result["property"]).removeprefix("tests/properties/")
        clauses = ", ".join(result["clauses"])  # type: ignore[arg-type]
        print(f"{_LABELS[str(result['outcome'])]}  {name}  [{clauses}]")
        detail = str(result["detail"])
        # A skip's reason is shown once, not once per property it skips.
        if result["outcome"] == "skipped":
            if detail in shown_skips:
                continue
            shown_skips.add(detail)
        for line in detail.splitlines():
            print(f"      {line}")
    by_clause = _clause_summary(results)
    print("clauses:")
    for clause, outcome in by_clause.items():
        print(f"{_LABELS[outcome]}  {clause}")
    counts = {outcome: sum(r["outcome"] == outcome for r in results) for outcome in _LABELS}
    print(", ".join(f"{count} {outcome}" for outcome, count in counts.items()))
    if arguments.json:
        document = {
            "implementation": target,
            "profile": arguments.profile,
            "spec_version": SPEC_VERSION,
            "properties": results,
            "clauses": by_clause,
            "counts": counts,
        }
        try:
            Path(arguments.json).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        except OSError as error:
            raise CliError(f"cannot write --json report: {error}") from None
    ok = counts["failed"] == 0 and counts["passed"] > 0 and report["exit_status"] == 0
    return 0 if ok else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ssm-rollback-spec",
        description="Executable specification of the SSM verify-rollback mode.",
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__} (spec {SPEC_VERSION})"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    check = commands.add_parser("check", help="run the property suite against an implementation")
    _check_arguments(check)
    check.set_defaults(run=_check)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = _parser()
    arguments = parser.parse_args(argv)
    try:
        status: int = arguments.run(arguments)
    except CliError as error:
        print(f"ssm-rollback-spec: error: {error}", file=sys.stderr)
        return error.status
    except KeyboardInterrupt:
        print("ssm-rollback-spec: interrupted", file=sys.stderr)
        return 130
    return status


if __name__ == "__main__":
    sys.exit(main())
