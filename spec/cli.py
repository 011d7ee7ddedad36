# SPDX-License-Identifier: MIT OR Apache-2.0
"""The ``ssm-rollback-spec`` command: ``check``, ``vectors`` and ``size``.

Every failure the user can cause ends in one line on stderr and a non-zero
exit status, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Final

from spec import SPEC_VERSION, __version__, sizing, vectors
from spec.subprocess_driver import (
    DEFAULT_TIMEOUT,
    AdapterFailure,
    SubprocessDriver,
    split_command,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["CliError", "main"]

_ROOT: Final = Path(__file__).resolve().parent.parent
_PROPERTIES: Final = _ROOT / "tests" / "properties"
_PROFILES: Final = ("dev", "ci", "thorough", "crosshair")


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
        help="Hypothesis profile (default ci: derandomized, reproducible; "
        "crosshair: symbolic, advisory)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write a machine-readable report")
    parser.add_argument("-v", "--verbose", action="store_true", help="show pytest's own output")


def _preflight(command: str, timeout: float, /) -> None:
    # One describe first, so an adapter that cannot start fails once, clearly,
    # rather than once per property.
    try:
        with SubprocessDriver(_adapter_argv(command, timeout), timeout=timeout) as driver:
            driver.request({"op": "describe"})
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
    if arguments.profile == "crosshair" and not importlib.util.find_spec(
        "hypothesis_crosshair_provider"
    ):
        raise CliError(
            "the crosshair profile needs hypothesis-crosshair: "
            "pip install 'ssm-rollback-spec[crosshair]'"
        )
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
    if arguments.impl_timeout <= 0:
        raise CliError(f"--impl-timeout must be positive, got {arguments.impl_timeout:g}")
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


def _write_report(path: str, document: Mapping[str, object], /) -> None:
    try:
        Path(path).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    except OSError as error:
        raise CliError(f"cannot write --json report: {error}") from None


def _clause_summary(results: Sequence[Mapping[str, object]], /) -> dict[str, str]:
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
        _write_report(arguments.json, document)
    ok = counts["failed"] == 0 and counts["passed"] > 0 and report["exit_status"] == 0
    return 0 if ok else 1


def _skips(arguments: argparse.Namespace, /) -> dict[str, str]:
    skips: dict[str, str] = {}
    if arguments.skip_file:
        try:
            loaded = json.loads(Path(arguments.skip_file).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise CliError(f"--skip-file {arguments.skip_file}: {error}") from None
        if not isinstance(loaded, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in loaded.items()
        ):
            raise CliError(
                f"--skip-file {arguments.skip_file}: must be a JSON object of case ID to reason"
            )
        skips.update(loaded)
    for item in arguments.skip:
        case_id, _, reason = item.partition("=")
        if not case_id or not reason.strip():
            raise CliError(f"--skip {item!r}: write it as CASE_ID=REASON, with a reason")
        skips[case_id] = reason
    return skips


def _adapter_argv(command: str, timeout: float, /) -> list[str]:
    if timeout <= 0:
        raise CliError(f"--impl-timeout must be positive, got {timeout:g}")
    try:
        return split_command(command)
    except ValueError as error:
        raise CliError(f"--impl-cmd: {error}") from None


def _vectors_generate(arguments: argparse.Namespace, /) -> int:
    try:
        written = vectors.write_corpus(Path(arguments.out))
    except OSError as error:
        raise CliError(f"cannot write the vectors: {error}") from None
    for path in written:
        print(path)
    return 0


def _vectors_run(arguments: argparse.Namespace, /) -> int:
    command = arguments.impl_cmd or f"{shlex.quote(sys.executable)} -m spec.adapter"
    argv = _adapter_argv(command, arguments.impl_timeout)
    skips = _skips(arguments)
    try:
        cases = vectors.load_cases(Path(arguments.vectors))
        with SubprocessDriver(argv, timeout=arguments.impl_timeout) as driver:
            results = vectors.run_cases(driver, cases, skips)
    except vectors.VectorError as error:
        raise CliError(str(error)) from None
    except AdapterFailure as failure:
        raise CliError(f"the adapter failed:\n{failure}", status=1) from None
    print(f"ssm-rollback-spec vectors run: {command}, {len(cases)} cases, spec {SPEC_VERSION}")
    for result in results:
        if result.outcome != "passed":
            print(f"{_LABELS[result.outcome]}  {result.case_id}  [{', '.join(result.clauses)}]")
            for line in result.detail.splitlines():
                print(f"      {line}")
    by_clause = _clause_summary([{"clauses": r.clauses, "outcome": r.outcome} for r in results])
    print("clauses:")
    for clause, outcome in by_clause.items():
        count = sum(clause in r.clauses for r in results)
        print(f"{_LABELS[outcome]}  {clause}  ({count} cases)")
    counts = {outcome: sum(r.outcome == outcome for r in results) for outcome in _LABELS}
    print(", ".join(f"{count} {outcome}" for outcome, count in counts.items()))
    if arguments.json:
        document = {
            "implementation": command,
            "spec_version": SPEC_VERSION,
            "cases": [
                {"id": r.case_id, "clauses": r.clauses, "outcome": r.outcome, "detail": r.detail}
                for r in results
            ],
            "clauses": by_clause,
            "counts": counts,
        }
        _write_report(arguments.json, document)
    return 0 if counts["failed"] == 0 else 1


def _vectors_arguments(commands: argparse._SubParsersAction[argparse.ArgumentParser], /) -> None:
    group = commands.add_parser("vectors", help="generate or run the language-neutral vectors")
    actions = group.add_subparsers(dest="action", required=True, metavar="ACTION")
    generate = actions.add_parser("generate", help="write the corpus generated from the model")
    generate.add_argument("--out", default=str(_ROOT / "vectors"), help="directory to write")
    generate.set_defaults(run=_vectors_generate)
    run = actions.add_parser(
        "run", help="run the corpus against an adapter (standard library only)"
    )
    run.add_argument(
        "--impl-cmd", metavar="CMD", help="adapter command (default: the Python reference adapter)"
    )
    run.add_argument("--impl-timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS")
    run.add_argument("--vectors", default=str(_ROOT / "vectors"), help="the corpus directory")
    run.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="CASE_ID=REASON",
        help="skip one case, saying why (repeatable)",
    )
    run.add_argument("--skip-file", metavar="PATH", help="a JSON object of case ID to reason")
    run.add_argument("--json", metavar="PATH", help="also write a machine-readable report")
    run.set_defaults(run=_vectors_run)


def _human(size: int, /) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{size:,} B" if unit == "B" else f"{size:,} B ({value:.1f} {unit})"
        value /= 1024
    raise AssertionError  # pragma: no cover - the loop always returns


_DIMENSION_FLAGS: Final = {
    "gdn_layers": "num_gdn_layers",
    "key_heads": "num_key_heads",
    "key_head_dim": "key_head_dim",
    "value_heads": "num_value_heads",
    "value_head_dim": "value_head_dim",
    "conv_kernel": "conv_kernel",
}


def _dimensions(arguments: argparse.Namespace, /) -> sizing.GdnDimensions:
    given = {flag: getattr(arguments, flag) for flag in _DIMENSION_FLAGS}
    if arguments.config is not None:
        if any(value is not None for value in given.values()):
            raise CliError("give either --config or the explicit dimensions, not both")
        try:
            config = json.loads(Path(arguments.config).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise CliError(f"--config {arguments.config}: {error}") from None
        if not isinstance(config, dict):
            raise CliError(f"--config {arguments.config}: not a JSON object")
        try:
            return sizing.dimensions_from_config(config)
        except sizing.ConfigError as error:
            raise CliError(f"--config {arguments.config}: {error}") from None
    missing = [f"--{flag.replace('_', '-')}" for flag, value in given.items() if value is None]
    if missing:
        raise CliError(f"give --config, or every dimension (missing {', '.join(missing)})")
    return sizing.GdnDimensions(**{_DIMENSION_FLAGS[f]: v for f, v in given.items()})


def _size(arguments: argparse.Namespace, /) -> int:
    dimensions = _dimensions(arguments)
    mtp_state_slots = arguments.mtp_state_slots
    if mtp_state_slots is None:
        mtp_state_slots = arguments.mtp_slots + 1
    num_intermediates = arguments.num_intermediates
    if num_intermediates is None:
        num_intermediates = arguments.num_drafts + 1
    try:
        figures = sizing.size_replay(
            dimensions,
            num_drafts=arguments.num_drafts,
            mtp_slots=arguments.mtp_slots,
            mtp_state_slots=mtp_state_slots,
            num_intermediates=num_intermediates,
            state_dtype=arguments.state_dtype,
            conv_dtype=arguments.conv_dtype,
        )
    except (OverflowError, ValueError) as error:
        raise CliError(str(error)) from None
    if arguments.json:
        document = {"spec_version": SPEC_VERSION, **figures.as_dict()}
        print(json.dumps(document, indent=2))
        return 0
    d, f = dimensions, figures
    covers = "yes" if f.preflight_covers_pool else f"no: short by {_human(f.shortfall_bytes)}"
    qkvz = (
        f"2 x {d.num_key_heads} x {d.key_head_dim} + 2 x {d.num_value_heads} x {d.value_head_dim}"
    )
    recurrent = f"{d.recurrent_state_values:,} x {arguments.state_dtype}"
    conv = f"{d.conv_state_values:,} x {arguments.conv_dtype}"
    rows = [
        f"GDN layers               {f.num_gdn_layers}",
        f"qkvz row elements        {f.qkvz_elems:,}  ({qkvz})",
        (
            f"replay row               {_human(f.row_bytes)} per token per layer"
            f"  ({f.qkvz_elems:,} BF16 + {d.num_value_heads} x 2 FP32)"
        ),
        (
            f"preflight reservation    {_human(f.preflight_ring_bytes)}"
            f"  (k = num_drafts + 1 = {f.preflight_k}, mtp_state_slots = {f.preflight_slots})"
        ),
        (
            f"pool allocation          {_human(f.pool_ring_bytes)}"
            f"  (k = num_intermediates = {f.pool_k}, mtp_slots + 1 = {f.pool_slots})"
        ),
        f"preflight covers pool    {covers}",
        "",
        "Estimate, not part of the module's contract: snapshot mode for the pool's window",
        (
            f"  recurrent state          {_human(f.snapshot_recurrent_bytes_per_token_layer)}"
            f" per token per layer ({recurrent})"
        ),
        (
            f"  conv state               {_human(f.snapshot_conv_bytes_per_token_layer)}"
            f" per token per layer ({conv})"
        ),
        (
            f"  slots x k x layers       {f.pool_slots} x {f.pool_k} x {f.num_gdn_layers}"
            f" = {_human(f.snapshot_estimate_bytes)}"
        ),
    ]
    print("\n".join(rows))
    return 0


def _count(text: str, /) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {value}")
    return value


def _size_arguments(commands: argparse._SubParsersAction[argparse.ArgumentParser], /) -> None:
    size = commands.add_parser(
        "size", help="size the replay ring (and estimate snapshot state) for a design review"
    )
    size.add_argument("--config", metavar="PATH", help="a Hugging Face style config.json")
    for flag in _DIMENSION_FLAGS:
        size.add_argument(f"--{flag.replace('_', '-')}", type=_count, metavar="N")
    size.add_argument("--num-drafts", type=_count, required=True, metavar="N")
    size.add_argument("--mtp-slots", type=_count, required=True, metavar="N")
    size.add_argument(
        "--mtp-state-slots",
        type=_count,
        metavar="N",
        help="slots preflight reserves for (default: --mtp-slots plus the dummy slot)",
    )
    size.add_argument(
        "--num-intermediates",
        type=_count,
        metavar="N",
        help="the pool's verify window (default: --num-drafts + 1)",
    )
    size.add_argument("--state-dtype", choices=sizing.DTYPE_BYTES, default="fp32")
    size.add_argument("--conv-dtype", choices=sizing.DTYPE_BYTES, default="bf16")
    size.add_argument("--json", action="store_true", help="print the figures as JSON")
    size.set_defaults(run=_size)


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
    _vectors_arguments(commands)
    _size_arguments(commands)
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
    except Exception as error:  # noqa: BLE001 - the last guard against a traceback
        print(
            f"ssm-rollback-spec: internal error: {type(error).__name__}: {error} "
            "(please report it with the command line)",
            file=sys.stderr,
        )
        return 70
    return status


if __name__ == "__main__":
    sys.exit(main())
