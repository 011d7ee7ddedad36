# SPDX-License-Identifier: MIT OR Apache-2.0
"""The commands the documents show, extracted as a reader would paste them, and run.

A fenced ``sh`` block is commands to paste; a fenced ``yaml`` block holding a
GitHub Actions workflow (``jobs:`` with ``steps:``) or a GitLab CI job
(``script:``) is a CI job, whose ``run:`` and ``script:`` steps are run as
that CI system runs them. Every other block (output, JSON, protocol
exchanges) is not a command. A block, or a command inside one, that is not
meant to be run as shown says so to its readers, on the line before it::

    # untested: REASON

Each document's ``sh`` blocks run in order in one folder of their own, as a
reader's shell session would; each CI job runs in a folder of its own, its
checkout. Every folder is outside the clone and holds what a reader has at
that point: ``./my-adapter`` (also ``$ADAPTER``), the adapter, a vendored copy
of the contract at ``host_runtime/_vendor/rollback_spec/`` and the Rust
adapter's crate at ``adapters/rust/``. The installed wheel's venv comes first
on ``PATH``; ``pip`` installs from the built wheel, not from an index.
"""

from __future__ import annotations

import enum
import itertools
import json
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypedDict

import yaml

from tests.installed import clean_environment

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from tests.installed import Installed

__all__ = [
    "BLOCK_UNTESTED",
    "UNTESTED",
    "Command",
    "Job",
    "Kind",
    "Runner",
    "jobs",
]

#: The marker, on the line before a block or a command, of what is not run.
UNTESTED: Final = "# untested: "
#: The same mark for a whole block, on the line before its fence, where a
#: line inside would break a block that must hold its commands alone.
BLOCK_UNTESTED: Final = re.compile(r"^<!-- untested: (?P<reason>.+) -->$")

#: The command whose every run is recorded, judged and whose reports are looked for.
_COMMAND: Final = "ssm-rollback-spec"

#: The options that name a file or folder the command writes.
_OUTPUTS: Final = ("--json", "--junit-xml", "--plot", "--html", "--markdown")
_OUTPUT_DIRECTORIES: Final = ("--export-failures",)

_HEREDOC: Final = re.compile(r"<<-?\s*'?(?P<word>\w+)'?")
_FENCE: Final = re.compile(r"^(?P<indent> *)```(?P<info>\S*)\s*$")

# Fewer examples and no fresh-process races: the documents test judges that
# each documented command works as written (its options, its paths, its exit
# status), not the implementation; the property suite's own tests judge that.
_SPEED_PLUGIN: Final = """\
from hypothesis import HealthCheck, settings

settings.register_profile(
    "documents",
    max_examples=2,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


def pytest_configure(config):
    settings.load_profile("documents")
    config.option.race_budget = "0"
"""

# Runs the installed command, and records how each run ended.
_RECORDER: Final = """\
#!{python}
import json, os, subprocess, sys

finished = subprocess.run([{command!r}, *sys.argv[1:]], stderr=subprocess.PIPE, text=True)
sys.stderr.write(finished.stderr)
record = {{
    "where": os.environ.get("DOCUMENTS_WHERE", "?"),
    "argv": sys.argv[1:],
    "cwd": os.getcwd(),
    "status": finished.returncode,
    "stderr": finished.stderr,
}}
with open({log!r}, "a", encoding="utf-8") as log:
    log.write(json.dumps(record) + "\\n")
sys.exit(finished.returncode)
"""


class Kind(enum.Enum):
    """How a job's commands run."""

    #: A reader's shell: one line after another, whatever each exits with.
    SHELL = "shell"
    #: GitHub Actions: each ``run:`` step a ``bash -e`` script of its own.
    GITHUB = "github"
    #: GitLab CI: ``before_script`` and ``script`` as one ``bash -eo pipefail`` script.
    GITLAB = "gitlab"


@dataclass(frozen=True)
class Command:
    """One command as a reader pastes it: where it is, its text, and why not, if not run."""

    document: str
    line: int
    text: str
    untested: str | None = None

    @property
    def where(self) -> str:
        """``DOCUMENT:LINE``."""
        return f"{self.document}:{self.line}"


@dataclass(frozen=True)
class Job:
    """Commands that run together, in one folder; ``outputs`` must exist after them."""

    name: str
    kind: Kind
    commands: tuple[Command, ...]
    outputs: tuple[str, ...] = ()


class _Record(TypedDict):
    where: str
    argv: list[str]
    cwd: str
    status: int
    stderr: str


@dataclass(frozen=True)
class _Block:
    line: int
    info: str
    lines: tuple[str, ...]
    untested: str | None = None


def _blocks(text: str, /) -> Iterator[_Block]:
    opened: tuple[int, str, str] | None = None
    body: list[str] = []
    before = ""
    marked: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        fence = _FENCE.match(line)
        if opened is None:
            if fence is not None:
                above = BLOCK_UNTESTED.match(before.strip())
                marked = above["reason"] if above else None
                opened, body = (number, fence["info"], fence["indent"]), []
            elif line.strip():
                before = line
        elif fence is not None and fence["indent"] == opened[2] and not fence["info"]:
            yield _Block(opened[0], opened[1], tuple(body), marked)
            opened, before = None, ""
        else:
            body.append(line.removeprefix(opened[2]))


def _untested_reason(line: str, /) -> str | None:
    stripped = line.strip()
    if not stripped.startswith(UNTESTED):
        return None
    reason = stripped.removeprefix(UNTESTED).strip()
    assert reason, f"an untested marker without its reason: {line!r}"
    return reason


def _shell_commands(document: str, block: _Block, /) -> list[Command]:
    commands: list[Command] = []
    whole = block.untested or (_untested_reason(block.lines[0]) if block.lines else None)
    reason = whole
    pending: list[str] = []
    start = 0
    heredoc: str | None = None
    for offset, line in enumerate(block.lines, start=block.line + 1):
        if heredoc is not None:
            # A here-document's lines are the command's, as they are.
            pending.append(line)
            if line.strip() == heredoc:
                commands.append(Command(document, start, "\n".join(pending), reason))
                pending, reason, heredoc = [], whole, None
            continue
        if not pending:
            marker = _untested_reason(line)
            if marker is not None:
                reason = marker
                continue
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            start = offset
        pending.append(line.removesuffix("\\"))
        if line.endswith("\\"):
            continue
        opened = _HEREDOC.search(line)
        if opened is not None:
            heredoc = opened["word"]
            continue
        commands.append(Command(document, start, " ".join(pending).strip(), reason))
        pending, reason = [], whole
    return commands


def _yaml_markers(block: _Block, /) -> dict[str, str]:
    """Each command a yaml block marks as untested, by its text, with the reason."""
    marked: dict[str, str] = {}
    reason: str | None = None
    for line in block.lines:
        found = _untested_reason(line)
        if found is not None:
            reason = found
        elif reason is not None and line.strip():
            text = line.strip().removeprefix("- ").removeprefix("run: ")
            marked[text] = reason
            reason = None
    return marked


def _line_of(block: _Block, text: str, /) -> int:
    for offset, line in enumerate(block.lines, start=block.line + 1):
        shown = line.strip().removeprefix("- ").removeprefix("run: ")
        if shown not in {"", ">", "|"} and text.startswith(shown):
            return offset
    return block.line


def _ci_jobs(document: str, block: _Block, /) -> list[Job]:
    loaded = yaml.safe_load("\n".join(block.lines))
    assert isinstance(loaded, dict), f"{document}:{block.line}: not a YAML mapping"
    marked = _yaml_markers(block)

    def command(text: str, /) -> Command:
        text = text.strip()
        return Command(document, _line_of(block, text), text, marked.get(text))

    found: list[Job] = []
    if "jobs" in loaded:
        for name, job in loaded["jobs"].items():
            steps: list[Command] = []
            outputs: list[str] = []
            for step in job["steps"]:
                if "run" in step:
                    steps.append(command(step["run"]))
                elif step["uses"].startswith("actions/upload-artifact@"):
                    outputs.append(step["with"]["path"])
                else:
                    # What a checkout and a Python set-up leave is the job's folder and PATH.
                    assert step["uses"].split("@")[0] in {
                        "actions/checkout",
                        "actions/setup-python",
                    }, f"{document}:{block.line}: a step the documents test cannot stand in for"
            found.append(
                Job(f"{document}:{block.line} {name}", Kind.GITHUB, tuple(steps), tuple(outputs))
            )
        return found
    for name, job in loaded.items():
        if not isinstance(job, dict) or "script" not in job:
            continue
        lines = [*job.get("before_script", []), *job["script"]]
        artifacts = job.get("artifacts", {})
        outputs = [*artifacts.get("paths", []), *artifacts.get("reports", {}).get("junit", [])]
        found.append(
            Job(
                f"{document}:{block.line} {name}",
                Kind.GITLAB,
                tuple(command(line) for line in lines),
                tuple(outputs),
            )
        )
    return found


def jobs(document: str, text: str, /) -> list[Job]:
    """Every job of a document: its ``sh`` blocks as one shell session, then its CI jobs."""
    session: list[Command] = []
    ci: list[Job] = []
    for block in _blocks(text):
        if block.info == "sh":
            session += _shell_commands(document, block)
        elif block.info == "yaml":
            ci += _ci_jobs(document, block)
    shell = [Job(f"{document} (its sh blocks)", Kind.SHELL, tuple(session))] if session else []
    return shell + ci


_VENDORED: Final = (
    "__init__.py",
    "py.typed",
    "first_write_wins.py",
    "rollback.py",
    "model.py",
    "argparse_mode.py",
)


class Runner:
    """Runs jobs from fresh folders outside the clone, against the installed wheel."""

    def __init__(self, installed: Installed, scratch: Path, adapter: str, crate: Path) -> None:
        self.installed = installed
        self.scratch = scratch
        self.adapter = adapter
        self.crate = crate
        self.log = scratch / "runs.jsonl"
        tools = scratch / "tools"
        tools.mkdir()
        recorder = tools / _COMMAND
        recorder.write_text(
            _RECORDER.format(
                python=installed.python, command=str(installed.command), log=str(self.log)
            ),
            encoding="utf-8",
        )
        recorder.chmod(0o755)
        plugins = scratch / "plugins"
        plugins.mkdir()
        (plugins / "documents_speed.py").write_text(_SPEED_PLUGIN, encoding="utf-8")
        self.environment = clean_environment() | {
            "PATH": os.pathsep.join([str(tools), str(installed.bin), os.environ["PATH"]]),
            "ADAPTER": "./my-adapter",
            "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": str(installed.wheel.parent),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PYTHONPATH": str(plugins),
            "PYTEST_ADDOPTS": "-p documents_speed",
            **installed.hypothesis_storage,
        }
        self._folders = 0
        probe = "import ssm_rollback_spec; print(ssm_rollback_spec.__file__)"
        where = subprocess.run(
            [str(installed.python), "-c", probe],
            cwd=scratch,
            env=clean_environment(),
            capture_output=True,
            text=True,
            check=True,
        )
        #: The installed package's folder, whence a reader copies the contract.
        self.site = Path(where.stdout.strip()).parent

    def _folder(self) -> Path:
        """A reader's folder: the adapter, a vendored contract, the Rust crate."""
        self._folders += 1
        folder = self.scratch / f"folder-{self._folders}"
        folder.mkdir()
        adapter = folder / "my-adapter"
        adapter.write_text(f'#!/bin/sh\nexec {shlex.quote(self.adapter)} "$@"\n', encoding="utf-8")
        adapter.chmod(0o755)
        vendored = folder / "host_runtime" / "_vendor" / "rollback_spec"
        vendored.mkdir(parents=True)
        for package in (folder / "host_runtime", folder / "host_runtime" / "_vendor"):
            (package / "__init__.py").write_text("", encoding="utf-8")
        for name in _VENDORED:
            shutil.copyfile(self.site / name, vendored / name)
        (folder / "adapters").mkdir()
        (folder / "adapters" / "rust").symlink_to(self.crate)
        return folder

    def run(self, job: Job, /) -> list[str]:
        """Run ``job`` in a fresh folder; what went wrong, one line each (none when it worked)."""
        folder = self._folder()
        before = self._records()
        runnable = [command for command in job.commands if command.untested is None]
        if job.kind is Kind.GITHUB:
            problems = []
            for command in runnable:
                status = self._bash(folder, ["-e"], [command])
                if status != 0:
                    problems.append(f"{command.where}: exited {status}: {_shown(command)}")
        elif job.kind is Kind.GITLAB:
            status = self._bash(folder, ["-e", "-o", "pipefail"], runnable)
            problems = [] if status == 0 else [f"{job.name}: the job exited {status}"]
        else:
            problems = self._session(folder, runnable)
        problems += self._judged(self._records()[len(before) :])
        problems += [
            f"{job.name}: {path} was not written"
            for path in job.outputs
            if not (folder / path).exists()
        ]
        return problems

    def _session(self, folder: Path, commands: Sequence[Command], /) -> list[str]:
        statuses = folder / ".statuses"
        script = []
        for index, command in enumerate(commands):
            script += [
                f"export DOCUMENTS_WHERE={shlex.quote(command.where)}",
                command.text,
                f'echo "{index} $?" >> {shlex.quote(str(statuses))}',
            ]
        self._script(folder, ["bash"], script)
        problems = []
        ended = dict(line.split() for line in statuses.read_text(encoding="utf-8").splitlines())
        for index, command in enumerate(commands):
            status = int(ended.get(str(index), "-1"))
            # A verdict on the adapter (1) is the command working; anything else is not.
            verdict = status == 1 and re.search(
                rf"\b{_COMMAND} (check|vectors run)\b", command.text
            )
            if status != 0 and not verdict:
                problems.append(f"{command.where}: exited {status}: {_shown(command)}")
        return problems

    def _bash(self, folder: Path, options: list[str], commands: Sequence[Command], /) -> int:
        script = []
        for command in commands:
            script += [f"export DOCUMENTS_WHERE={shlex.quote(command.where)}", command.text]
        return self._script(folder, ["bash", *options], script)

    def _script(self, folder: Path, bash: list[str], lines: list[str], /) -> int:
        path = folder / ".documents.sh"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        finished = subprocess.run(
            [*bash, str(path)],
            cwd=folder,
            env=self.environment,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        return finished.returncode

    def _records(self) -> list[_Record]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]

    def _judged(self, records: list[_Record], /) -> list[str]:
        problems = []
        for record in records:
            argv = record["argv"]
            said = [
                line
                for line in record["stderr"].splitlines()
                if line.startswith((f"{_COMMAND}: ", "Traceback"))
            ]
            problems += [f"{record['where']}: {line}" for line in said]
            verdict = argv[:1] == ["check"] or argv[:2] == ["vectors", "run"]
            if record["status"] not in ({0, 1} if verdict else {0}):
                if not said:
                    problems.append(f"{record['where']}: {_COMMAND} exited {record['status']}")
                continue
            cwd = Path(record["cwd"])
            for flag, value in itertools.pairwise(argv):
                if flag in _OUTPUTS and value != "-" and not (cwd / value).is_file():
                    problems.append(f"{record['where']}: {flag} {value} was not written")
                if flag in _OUTPUT_DIRECTORIES and not (cwd / value / "manifest.json").is_file():
                    problems.append(f"{record['where']}: {flag} {value} holds no corpus")
                if flag == "--badges" and not any((cwd / value).glob("*.json")):
                    problems.append(f"{record['where']}: {flag} {value} holds no badge")
        return problems


def _shown(command: Command, /) -> str:
    # A here-document shows its first line, the command.
    return command.text.splitlines()[0]
