# SPDX-License-Identifier: MIT OR Apache-2.0
"""``ssm-rollback-spec serve-check``: speculative decoding against plain decoding, served."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ..serving.client import Server, base_url
from ..serving.dialects import DIALECTS, dialect_named
from ..serving.errors import (
    ServerFailedError,
    ServerStartError,
    ServerUnreachableError,
)
from ..serving.launch import started
from ..serving.run import Options, run
from ..serving.selftest import self_test
from ..serving.shrink import shrink, shrink_crash
from ..serving.verdict import (
    CLAUSES,
    VerdictKind,
    decide,
    lines,
    report_document,
    reproducer_lines,
)
from ..serving.workload import draw_workload, read_prompts
from .errors import CliError, ExitStatus
from .outcomes import Row, write_json, write_junit

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from ..serving.dialects import Dialect
    from ..serving.workload import Workload

__all__ = ["add_arguments"]

#: What each verdict exits with: NOT OBSERVED is no pass.
_STATUS: Final = {
    VerdictKind.PASS: ExitStatus.OK,
    VerdictKind.FAIL: ExitStatus.FAILED,
    VerdictKind.NOT_OBSERVED: ExitStatus.NOT_OBSERVED,
}


def _positive(text: str, /) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


_positive.__name__ = "positive integer"


def _seconds(text: str, /) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError(text)
    return value


_seconds.__name__ = "positive number"


def add_arguments(command: argparse.ArgumentParser, /) -> None:
    """Give ``serve-check`` its options."""
    command.description = (
        "Judge an OpenAI-compatible server with speculative decoding (the target) against "
        "the same engine and model without it (the reference): every greedy request must "
        "generate the same, within the noise measured on the engine. Exits 0 on PASS, 1 on "
        "FAIL, 2 on a usage or server error, 3 when NOT OBSERVED (no draft accepted)."
    )
    servers = command.add_argument_group("servers")
    servers.add_argument(
        "--reference",
        metavar="URL",
        help="the engine without speculation (base URL)",
    )
    servers.add_argument(
        "--target", metavar="URL", help="the same engine and model with speculation"
    )
    servers.add_argument(
        "--calibrate",
        metavar="URL",
        help="optional: the target's engine speculating with a drafter that never drafts, "
        "whose verify path measures the noise with no rollback",
    )
    for role in ("reference", "target", "calibrate"):
        servers.add_argument(
            f"--{role}-cmd",
            metavar="CMD",
            help=f"start the {role} server with this command line and end its process group after",
        )
    servers.add_argument(
        "--start-timeout",
        type=_seconds,
        default=600.0,
        metavar="S",
        help="seconds a started server has to answer (default: %(default)s)",
    )
    servers.add_argument("--server-logs", metavar="DIR", help="keep started servers' output in DIR")
    servers.add_argument(
        "--model", metavar="NAME", help="the served model to ask for (default: the one both serve)"
    )
    servers.add_argument(
        "--dialect",
        choices=sorted(DIALECTS),
        help="the engine's dialect (default: from /v1/models' owned_by, else openai)",
    )
    servers.add_argument(
        "--timeout",
        type=_seconds,
        default=300.0,
        metavar="S",
        help="seconds each request may take (default: %(default)s)",
    )
    work = command.add_argument_group("workload")
    work.add_argument(
        "--prompts",
        metavar="FILE",
        help="JSON lines of requests instead of a drawn workload (docs/serving.md)",
    )
    work.add_argument(
        "--seed", type=int, default=0, help="the drawn workload's seed (default: %(default)s)"
    )
    work.add_argument(
        "--requests",
        type=_positive,
        default=24,
        metavar="N",
        help="requests drawn (default: %(default)s)",
    )
    work.add_argument(
        "--concurrency",
        type=_positive,
        default=4,
        metavar="N",
        help="requests sent at once (default: %(default)s)",
    )
    work.add_argument(
        "--num-drafts",
        type=_positive,
        default=3,
        metavar="N",
        help="the target's drafts a verify, for lengths K and K+1 (default: %(default)s)",
    )
    work.add_argument(
        "--block-size",
        type=_positive,
        default=16,
        metavar="N",
        help="the engine's block size, crossed by shared prefixes (default: %(default)s)",
    )
    work.add_argument(
        "--max-tokens",
        type=_positive,
        default=32,
        metavar="N",
        help="the longest output drawn (default: %(default)s)",
    )
    work.add_argument(
        "--min-prompt-tokens",
        type=_positive,
        default=1,
        metavar="N",
        help="drawn prompts are at least N tokens (default: %(default)s)",
    )
    work.add_argument(
        "--vocab-size",
        type=_positive,
        default=256,
        metavar="N",
        help="drawn prompt token ids are below this (default: %(default)s)",
    )
    judged = command.add_argument_group("judgement")
    judged.add_argument(
        "--logprobs",
        type=_positive,
        default=5,
        metavar="N",
        help="top logprobs a position (default: %(default)s)",
    )
    judged.add_argument(
        "--noise-factor",
        type=_seconds,
        default=3.0,
        metavar="F",
        help="the bound is F times the measured noise (default: %(default)s)",
    )
    judged.add_argument(
        "--shrink-tries",
        type=int,
        default=24,
        metavar="N",
        help="tries to shrink a failure (default: %(default)s)",
    )
    out = command.add_argument_group("reports")
    out.add_argument(
        "--json", metavar="PATH", help="write the JSON report (- for stdout); report reads it"
    )
    out.add_argument(
        "--name",
        help="what the JSON report calls the target, as the results page heads its column "
        "(default: the dialect and the model served)",
    )
    out.add_argument(
        "--junit-xml", metavar="PATH", help="write a JUnit XML report, one testcase a request"
    )
    command.add_argument(
        "--self-test",
        action="store_true",
        help="judge toy engines right and wrong on purpose, served on loopback, instead of "
        "servers of yours: what the judge must pass and fail (--seed draws their workloads)",
    )
    command.set_defaults(run=_run)


def _workload(arguments: argparse.Namespace, /) -> Workload:
    if arguments.prompts is not None:
        return read_prompts(
            Path(arguments.prompts),
            max_tokens=arguments.max_tokens,
            concurrency=arguments.concurrency,
        )
    return draw_workload(
        arguments.seed,
        count=arguments.requests,
        vocab=arguments.vocab_size,
        num_drafts=arguments.num_drafts,
        block_size=arguments.block_size,
        max_tokens=arguments.max_tokens,
        concurrency=arguments.concurrency,
        min_prompt=arguments.min_prompt_tokens,
    )


def _servers(arguments: argparse.Namespace, /) -> list[Server]:
    found = []
    for role, flag in (
        ("reference", "--reference"),
        ("target", "--target"),
        ("calibrate", "--calibrate"),
    ):
        given = getattr(arguments, role)
        if given is None:
            if getattr(arguments, f"{role}_cmd") is not None:
                raise CliError(f"{flag}-cmd needs {flag} URL: the address the command serves at")
            continue
        found.append(Server(role, flag, base_url(given, flag=flag), timeout=arguments.timeout))
    return found


def _run(arguments: argparse.Namespace, /) -> int:
    if arguments.self_test:
        return ExitStatus.OK if self_test(arguments.seed, say=print) else ExitStatus.FAILED
    if arguments.reference is None or arguments.target is None:
        raise CliError(
            "serve-check needs --reference URL and --target URL (or --self-test) "
            "(see ssm-rollback-spec serve-check --help)"
        )
    try:
        workload = _workload(arguments)
        servers = _servers(arguments)
        dialect = None if arguments.dialect is None else dialect_named(arguments.dialect)
        commands = [
            (server.role, f"--{server.role}", command, server.url)
            for server in servers
            if (command := getattr(arguments, f"{server.role}_cmd")) is not None
        ]
        logs = None if arguments.server_logs is None else Path(arguments.server_logs)
        with started(commands, deadline=arguments.start_timeout, logs=logs) as launched:
            # A target the command started can be started again, to shrink a crash.
            again = {server.role: server for server in launched}.get("target")
            restart = None if again is None else partial(again.restart, arguments.start_timeout)
            return _judge(arguments, servers, workload, dialect, restart)
    except (
        ValueError,
        ServerUnreachableError,
        ServerStartError,
    ) as error:
        raise CliError(str(error)) from None
    except ServerFailedError as error:
        raise CliError(f"{error}: the reference must serve every request") from None


def _judge(
    arguments: argparse.Namespace,
    servers: list[Server],
    workload: Workload,
    dialect: Dialect | None,
    restart: Callable[[], None] | None,
    /,
) -> int:
    reference, target, *rest = servers
    options = Options(top=arguments.logprobs, factor=arguments.noise_factor)
    judged = run(
        reference,
        target,
        workload,
        options,
        calibration=rest[0] if rest else None,
        model=arguments.model,
        dialect=dialect,
    )
    verdict = decide(judged)
    shrunk = None
    if verdict.kind is VerdictKind.FAIL and judged.target.failure is None:
        shrunk = shrink(
            reference, target, judged, tries=arguments.shrink_tries, top=arguments.logprobs
        )
    elif judged.target.failure is not None and restart is not None and arguments.shrink_tries:
        shrunk = shrink_crash(
            target, judged, restart, tries=arguments.shrink_tries, top=arguments.logprobs
        )
    if shrunk is not None:
        failing = shrunk.requests
    elif judged.target.failure is not None:
        failing = tuple(workload.requests[i] for i in judged.target.failed_batch)
    else:
        failing = ()
    reproducer = reproducer_lines(reference, target, failing, arguments.logprobs) if failing else []
    print("\n".join(lines(judged, verdict, shrunk, reproducer)))
    if arguments.json is not None or arguments.junit_xml is not None:
        document = report_document(
            judged, verdict, target, target.release(), reproducer, name=arguments.name
        )
        if arguments.json is not None:
            write_json(arguments.json, document)
        if arguments.junit_xml is not None:
            rows = [
                Row(case["id"], CLAUSES, case["outcome"], case["detail"])
                for case in document["cases"]
            ]
            write_junit(arguments.junit_xml, "serve-check", rows, judged.seconds)
    return _STATUS[verdict.kind]
