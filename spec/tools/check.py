# SPDX-License-Identifier: MIT OR Apache-2.0
"""``ssm-rollback-spec check``: run the property suite against an implementation."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Final

from .. import SPEC_VERSION
from ..corpus import Case, exported_case, render_corpus, write_corpus
from ..harness.adapter import REFERENCE_DESCRIBE
from ..harness.clauses import CLAUSES, REPLAY_PROFILE_CLAUSES, UnknownClauseError, select_clauses
from ..harness.model_wire import MODEL_OP
from ..harness.oracle import allowed_replies
from ..harness.protocol import encode
from ..harness.python_impl import (
    REFERENCE,
    ImplementationModuleError,
    load_python_implementation,
)
from ..harness.race_evidence import REQUIRE_RACE_HELP
from ..harness.signals import SUITE_GRACE, group_started
from ..harness.subprocess_driver import DEFAULT_RACE_BUDGET
from .arguments import add_impl_arguments, add_selection_arguments, before_the_run, race_budget
from .deviations import Deviation, DeviationList, Target
from .errors import CliError, ExitStatus
from .outcomes import (
    Row,
    clause_summary,
    counts,
    measured,
    print_report,
    write_json,
    write_junit,
)
from .preflight import FLUSH_HINT, adapter_argv
from .shipped import corpus_directory, suite_directory

if TYPE_CHECKING:
    import argparse

    from ..harness.outcome_recorder import PropertyResult, SuiteReport

__all__ = ["REPLAY_PROPERTY_CLAUSES", "add_arguments"]

#: The draft clauses the suite's replay properties cite (over the opt-in
#: replay operation); every other draft clause is the replay model's alone.
REPLAY_PROPERTY_CLAUSES: Final = frozenset(
    f"RB-REPLAY-{n}" for n in (1, 2, 4, 6, 7, 10, 12, 13, 14)
)

_PROFILES: Final = ("dev", "ci", "thorough", "crosshair", "interpreter")

_FLUSH_HINT: Final = f"check: {FLUSH_HINT}"

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


def add_arguments(check: argparse.ArgumentParser, /) -> None:
    """Give ``check`` its description and options."""
    check.description = (
        "Run the property suite against an implementation: the Python reference "
        "by default, a Python module with --impl-module, or an adapter with --impl-cmd. "
        "Exits 0 when no property failed (skips, listed deviations and races not observed are "
        "reported), 1 when one did, when a listed deviation conforms, or when the adapter broke "
        "on its first request (the report is still written), 2 on a usage error."
    )
    add_impl_arguments(check, python=True)
    check.add_argument(
        "--profile",
        choices=_PROFILES,
        default="ci",
        help="Hypothesis profile (default ci: derandomized, reproducible; "
        "crosshair: symbolic, advisory; interpreter: 6 examples, unshrunk, slow adapters)",
    )
    check.add_argument(
        "--race-budget",
        type=race_budget,
        default=DEFAULT_RACE_BUDGET,
        metavar="SECONDS",
        help="seconds spent on races in fresh processes, one after another until they are "
        f"spent (default {DEFAULT_RACE_BUDGET:g}; 0 skips them)",
    )
    check.add_argument("--require-race", action="store_true", help=REQUIRE_RACE_HELP)
    add_selection_arguments(
        check, item="property", items="properties", entries="clauses or properties"
    )
    check.add_argument("-k", dest="keyword", metavar="EXPRESSION", help="run only the "
                       "properties EXPRESSION matches, as pytest's -k reads it")  # fmt: skip
    check.add_argument(
        "--export-failures",
        metavar="DIR",
        help="write each failing property's shrunk exchange to DIR as vector cases "
        "(run them with: vectors run --vectors DIR)",
    )
    check.add_argument("-v", "--verbose", action="store_true", help="show pytest's own output")
    check.set_defaults(run=_check)


def _preflight(arguments: argparse.Namespace, /) -> tuple[dict[str, object], list[str] | None]:
    """Check the outputs and the implementation before the suite runs.

    Every report path can be written (its folders made), the module loads,
    the adapter answers its first request alone: a broken one is said once.
    Returns the implementation's describe and the adapter's argument vector
    (``--impl-cmd`` split once; None without one), which the suite runs.

    Raises:
        CliError: an output cannot be written, the module cannot be loaded, or
            the adapter cannot be started or does not answer.
    """
    argv = None if arguments.impl_cmd is None else adapter_argv(arguments.impl_cmd)
    described = before_the_run(arguments, argv, export=arguments.export_failures)
    if arguments.impl_module is not None:
        # As `python -m` does: the current folder first, so a package beside
        # the user's shell is found without installing it.
        here = str(Path.cwd())
        if here not in sys.path[:1]:
            sys.path.insert(0, here)
        try:
            load_python_implementation(arguments.impl_module)
        except ImplementationModuleError as error:
            raise CliError(f"--impl-module: {error}") from None
        return {"name": f"{arguments.impl_module} (in-process)"}, None
    if argv is None:
        return dict(REFERENCE_DESCRIBE), None
    return described or {}, argv


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


def _pytest_command(
    arguments: argparse.Namespace, argv: list[str] | None, scratch: Path, known: list[str], /
) -> list[str]:
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
        "ssm_rollback_spec.harness.pytest_plugin",
        "-p",
        "ssm_rollback_spec.harness.outcome_recorder",
        "-p",
        "no:cacheprovider",
        f"--impl-timeout={arguments.impl_timeout}",
        f"--race-budget={arguments.race_budget}",
        f"--check-report={scratch / 'report.json'}",
        "-q",
    ]
    command += ["--require-race"] if arguments.require_race else []
    command += [f"--clause={clause}" for clause in arguments.clause]
    command += [f"--unshrunk={name}" for name in known]
    command += ["-k", arguments.keyword] if arguments.keyword is not None else []
    # The adapter's argv as the preflight split it, one argument an option.
    command += [f"--impl-argv={argument}" for argument in argv or ()]
    if arguments.impl_module is not None:
        command.append(f"--impl-module={arguments.impl_module}")
    return command


def _before_the_run(arguments: argparse.Namespace, /) -> tuple[dict[str, object], list[str] | None]:
    _require_test_stack(arguments.profile)
    if arguments.keyword is not None and not arguments.keyword.strip():
        raise CliError("-k: the expression is empty")
    try:
        selected = select_clauses(arguments.clause)
    except UnknownClauseError as error:
        raise CliError(f"--clause: {error}") from None
    if selected and selected <= REPLAY_PROFILE_CLAUSES - REPLAY_PROPERTY_CLAUSES:
        raise CliError(
            f"--clause: {', '.join(sorted(selected, key=CLAUSES.index))} has no property in"
            " check: vectors run and the replay model (tests/replay) judge it"
        )
    return _preflight(arguments)


def _run_suite(
    arguments: argparse.Namespace, argv: list[str] | None, known: list[str], /
) -> SuiteReport:
    with tempfile.TemporaryDirectory() as scratch:
        command = _pytest_command(arguments, argv, Path(scratch), known)
        env = {**os.environ, "HYPOTHESIS_PROFILE": arguments.profile}
        # Hypothesis keeps its examples and patches in .hypothesis/ of the
        # folder it runs in: nothing goes into the user's folder unless they
        # name a directory for it themselves.
        env.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(Path(scratch) / "hypothesis"))
        # Only the plugins the suite names: an environment's own pytest
        # plugins must not change its results.
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        for name in ("SSM_ROLLBACK_IMPL_CMD", "SSM_ROLLBACK_IMPL_MODULE"):
            env.pop(name, None)
        # From the user's own folder, so that a relative --impl-cmd or
        # --impl-module means what it means in their shell.
        # In a group of its own, ended with its adapters if check is stopped (harness.signals).
        output = {
            "stdout": None if arguments.verbose else subprocess.PIPE,
            "stderr": subprocess.STDOUT,
        }
        with group_started(command, grace=SUITE_GRACE, env=env, **output) as suite:
            stdout, status = suite.communicate()[0] or "", suite.returncode
        report_path = Path(scratch) / "report.json"
        _require_a_selection(arguments, status, stdout)
        if not report_path.exists():
            raise CliError(
                f"the property suite did not run (pytest exit {status})\n{stdout[-3000:]}"
            )
        report: SuiteReport = json.loads(report_path.read_text(encoding="utf-8"))
    if report["exit_status"] not in {0, 1}:
        tail = stdout[-3000:]
        raise CliError(
            f"the property suite did not run (pytest exit {report['exit_status']})\n{tail}"
        )
    return report


def _require_a_selection(arguments: argparse.Namespace, status: int, output: str, /) -> None:
    """Refuse a ``-k`` that pytest could not read (exit 4) or that left no property (exit 5).

    Raises:
        CliError: the expression is malformed, or it selects no property.
    """
    keyword, said = arguments.keyword, "ERROR: Wrong expression passed to '-k': "
    if keyword is None or status not in {4, 5}:
        return
    if status == 4:  # pytest's line, where --verbose did not show it to the user instead
        found = [line.removeprefix(said) for line in output.splitlines() if line.startswith(said)]
        detail = f": {found[0].removeprefix(f'{keyword.lstrip()}: ')}" if found else ""
        raise CliError(f"-k: cannot read {keyword!r}{detail}")
    among = f" among those citing {', '.join(arguments.clause)}" if arguments.clause else ""
    raise CliError(f"-k: {keyword!r} matches no property{among}")


def _reproduction(arguments: argparse.Namespace, line: str, /) -> str:
    if arguments.impl_cmd is not None:
        command = arguments.impl_cmd
    else:
        module = arguments.impl_module or REFERENCE
        command = f"python -m ssm_rollback_spec.harness.adapter --impl-module {shlex.quote(module)}"
    return f"printf '%s\\n' {shlex.quote(line)} | {command}"


def _allowed(request: dict[str, object], /) -> str:
    try:
        return " or ".join(encode(reply) for reply in allowed_replies(request))
    except ValueError as error:
        # describe and race_cells have no list of replies; say what is judged.
        return str(error)


def _rows(arguments: argparse.Namespace, results: list[PropertyResult], /) -> list[Row]:
    rows = []
    for result in results:
        detail = result["detail"]
        if result["outcome"] == "failed":
            if "allowed: " not in detail:
                # An adapter that broke: what the model would have allowed.
                allowed = [_allowed(r["request"]) for r in result["requests"]]
                detail = "\n".join([detail, *(f"  allowed: {text}" for text in allowed)])
            reproductions = [_reproduction(arguments, r["line"]) for r in result["requests"]]
            detail = "\n".join([detail, *(f"reproduce: {line}" for line in reproductions)])
            if result["hung"]:
                detail += f"\n{_FLUSH_HINT}"
        rows.append(
            Row(
                result["property"],
                result["clauses"],
                result["outcome"],
                detail,
                result["seconds"],
                distance=result.get("distance"),
                bound=result.get("bound"),
            )
        )
    return rows


def _export(arguments: argparse.Namespace, results: list[PropertyResult], /) -> list[str]:
    cases: dict[str, Case] = {}
    for result in results:
        if result["outcome"] == "failed":
            for exchange in result["requests"]:
                if exchange["request"].get("op") == MODEL_OP:
                    continue  # judged by the adapter's own plain decode, not by a list of replies
                try:
                    case = exported_case(exchange["request"], result["clauses"], exchange["line"])
                except ValueError:
                    # A race_cells exchange has no list of allowed replies.
                    continue
                cases.setdefault(case["id"], case)
    # Written even when nothing failed: an empty corpus, which `vectors run
    # --vectors DIR` passes, so a CI step that replays DIR works from day one.
    directory = Path(arguments.export_failures)
    texts = render_corpus({"exported.json": list(cases.values())})
    try:
        write_corpus(directory, texts)
        shutil.copyfile(corpus_directory() / "schema.json", directory / "schema.json")
    except OSError as error:
        raise CliError(f"--export-failures {directory}: {error.strerror or error}") from None
    return list(cases)


def _check(arguments: argparse.Namespace, /) -> int:
    if arguments.impl_cmd is not None:
        target = arguments.impl_cmd
    else:
        target = f"{arguments.impl_module or REFERENCE} (in-process)"
    deviations = DeviationList.from_option(arguments.deviations)
    described, argv = _before_the_run(arguments)
    print(f"ssm-rollback-spec check: {target}, profile {arguments.profile}, spec {SPEC_VERSION}")
    document: dict[str, object] = {
        "implementation": target,
        "profile": arguments.profile,
        "spec_version": SPEC_VERSION,
        "describe": described,
    }
    # A listed deviation's failure is known: shrinking it can take minutes a run.
    known = [entry.name for entry in deviations.entries if entry.target is not Target.CASE]
    report = _run_suite(arguments, argv, known)
    results = report["results"]
    rows, conforming = deviations.mark(
        _rows(arguments, results),
        reads={Target.CLAUSE, Target.PROPERTY},
        selected=[*arguments.clause, *([arguments.keyword] if arguments.keyword else [])],
    )
    print_report(rows, show_passes=True, conforming=conforming)
    exported = _export(arguments, results) if arguments.export_failures else []
    if arguments.export_failures:
        where = arguments.export_failures
        print(f"exported {len(exported)} failing exchanges to {where}" if exported else
              f"no failing exchange to export: {where} holds an empty corpus")  # fmt: skip
    if arguments.json:
        write_json(arguments.json, document | _summary(rows, conforming) | {"exported": exported})
    if arguments.junit_xml:
        write_junit(arguments.junit_xml, "ssm-rollback-spec check", rows)
    ok = not any(row.outcome == "failed" for row in rows) and not conforming
    return ExitStatus.OK if ok else ExitStatus.FAILED


def _summary(rows: list[Row], conforming: list[Deviation], /) -> dict[str, object]:
    return {
        "properties": [
            {
                "property": r.name,
                "clauses": list(r.clauses),
                "outcome": r.outcome,
                "detail": r.detail,
                "seconds": r.seconds,
            }
            # A replay property's distance, against its bound (RB-REPLAY-1).
            | measured(r)
            | ({"known": r.known.record()} if r.known else {})
            for r in rows
        ],
        "clauses": clause_summary(rows),
        "failed": [row.name for row in rows if row.outcome == "failed"],
        "conforming_deviations": [str(deviation) for deviation in conforming],
        "conforming": [deviation.record() for deviation in conforming],
        "counts": counts(rows),
    }
