# SPDX-License-Identifier: MIT OR Apache-2.0
"""Every command the documents show works as pasted, from a folder outside the clone."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

import pytest

from tests.child import ROOT, RUST_CRATE
from tests.project.documents import BLOCK_UNTESTED, UNTESTED, Command, Job, Kind, Runner, jobs

if TYPE_CHECKING:
    from tests.installed import Installed

DOCUMENTS: Final = (
    "README.md",
    "docs/ci.md",
    "docs/protocol.md",
    "docs/replay.md",
    "docs/serving.md",
    "docs/sizing.md",
    "docs/sizing-cli.md",
    "docs/sizing-engines.md",
)

#: The replay pages: the overview and the topic pages it links.
REPLAY_PAGES: Final = (
    "docs/replay.md",
    "docs/replay-model.md",
    "docs/replay-designs.md",
    "docs/replay-corpus.md",
)

# README.md's and docs/ci.md's commands run `check` whole several times between
# them (CONTRIBUTING.md says how often; a test below counts them), the dearest
# test of the everyday suite, which must end within three minutes: these two
# pages are run with the CI gate's long runs (the `slow` marker), the other
# pages in the everyday suite.
_LONG: Final = frozenset({"README.md", "docs/ci.md"})


def _text(document: str, /) -> str:
    return (ROOT / document).read_text(encoding="utf-8")


def _flowed(text: str, /) -> str:
    """``text`` with every run of whitespace one space, as a reader sees it reflowed."""
    return " ".join(text.split())


@pytest.fixture(scope="module")
def runner(
    installed: Installed, rust_adapter: str, tmp_path_factory: pytest.TempPathFactory
) -> Runner:
    return Runner(installed, tmp_path_factory.mktemp("documents"), rust_adapter, RUST_CRATE)


@pytest.mark.parametrize(
    "document",
    [
        pytest.param(document, marks=(pytest.mark.slow,) if document in _LONG else ())
        for document in DOCUMENTS
    ],
)
def test_every_command_a_document_shows_works_as_pasted(runner: Runner, document: str) -> None:
    found = jobs(document, _text(document))
    assert found, f"{document} shows no command"
    problems = [problem for job in found for problem in runner.run(job)]
    assert problems == []


def test_both_ci_jobs_keep_both_reports() -> None:
    github, gitlab = [
        job for job in jobs("docs/ci.md", _text("docs/ci.md")) if job.kind is not Kind.SHELL
    ]
    assert github.kind is Kind.GITHUB
    assert gitlab.kind is Kind.GITLAB
    for job in (github, gitlab):
        assert set(job.outputs) >= {"reports/"}
        assert (
            sum(
                "--junit-xml reports/" in c.text and "--json reports/" in c.text
                for c in job.commands
            )
            == 2
        )


def test_what_is_not_run_is_marked_for_readers_with_its_reason() -> None:
    untested = {
        (command.where, command.untested)
        for document in DOCUMENTS
        for job in jobs(document, _text(document))
        for command in job.commands
        if command.untested is not None
    }
    shown = {
        (document, line.strip().removeprefix(UNTESTED))
        for document in DOCUMENTS
        for line in _text(document).splitlines()
        if line.strip().startswith(UNTESTED)
    } | {
        (document, found["reason"])
        for document in DOCUMENTS
        for line in _text(document).splitlines()
        if (found := BLOCK_UNTESTED.match(line.strip())) is not None
    }
    assert {reason for _, reason in untested} == {reason for _, reason in shown}
    # Only what cannot run here: a clone's own commands, a root install, a big extra,
    # servers of the reader's own (which the serving tier stands in for).
    assert {reason for _, reason in untested} == {
        "in a clone of this repository (.ci/run runs these lines)",
        "needs root and the network (the job's image)",
        "needs the plot extra, matplotlib (tests/sizing/test_plot.py draws the plot)",
        "needs two servers of yours (tests/e2e/test_served.py runs it against vLLM's)",
        "needs vLLM and a model (tests/e2e/test_served.py runs it on a tiny one)",
    }


_MARKDOWN: Final = """\
Text.

```sh
one --flag "$ADAPTER"   # a comment
# a comment line
two \\
  --continued
```

1. In a list:

   ```sh
   # untested: a reason
   three
   ```

```text
not a command
```

```yaml
jobs:
  j:
    steps:
      - uses: actions/checkout@v4
      - run: >
          four
          --folded
      - uses: actions/upload-artifact@v4
        with:
          path: out/
```

```yaml
job:
  before_script:
    # untested: another reason
    - five
  script:
    - six
  artifacts:
    paths:
      - out/
```
"""


def test_commands_are_extracted_as_a_reader_pastes_them() -> None:
    found = jobs("doc.md", _MARKDOWN)
    assert found == [
        Job(
            "doc.md (its sh blocks)",
            Kind.SHELL,
            (
                Command("doc.md", 4, 'one --flag "$ADAPTER"   # a comment'),
                Command("doc.md", 6, "two    --continued"),
                Command("doc.md", 14, "three", "a reason"),
            ),
        ),
        Job("doc.md:21 j", Kind.GITHUB, (Command("doc.md", 27, "four --folded"),), ("out/",)),
        Job(
            "doc.md:34 job",
            Kind.GITLAB,
            (Command("doc.md", 38, "five", "another reason"), Command("doc.md", 40, "six")),
            ("out/",),
        ),
    ]


def _broken(document: str, old: str, new: str, /) -> tuple[str, list[Command]]:
    """``document`` with ``old`` replaced, and the commands that changed."""
    text = _text(document)
    assert text.count(old) == 1, old
    broken = text.replace(old, new)
    before = {command.text for job in jobs(document, text) for command in job.commands}
    changed = [
        command
        for job in jobs(document, broken)
        for command in job.commands
        if command.text not in before
    ]
    assert changed
    return broken, changed


def test_a_broken_readme_command_fails_the_documents_test(runner: Runner) -> None:
    _, [command] = _broken("README.md", "--clause RB-PUB ", "--clause RB-PUBX ")
    problems = runner.run(Job("README.md", Kind.SHELL, (command,)))
    assert problems == [
        f"{command.where}: exited 2: {command.text}",
        (
            f"{command.where}: ssm-rollback-spec: error: --clause: unknown clause 'RB-PUBX': "
            "give an ID such as RB-SIZE-3 or a family (RB-MODE, RB-PARSE, RB-PUB, RB-CELL, "
            "RB-SIZE, RB-VERIFY, RB-PY, RB-PROTO, RB-REPLAY)"
        ),
    ]


def test_a_broken_ci_job_fails_the_documents_test(runner: Runner) -> None:
    broken, _ = _broken(
        "docs/ci.md",
        "--junit-xml reports/check.xml --json reports/check.json\n      - name",
        "--junit-xml reports/check.xml --jsn reports/check.json\n      - name",
    )
    [github] = [job for job in jobs("docs/ci.md", broken) if job.kind is Kind.GITHUB]
    [check] = [command for command in github.commands if "--jsn" in command.text]
    # The results page's step runs after a failure too, and misses check's report.
    [page] = [command for command in github.commands if " report " in command.text]
    problems = runner.run(github)
    assert problems == [
        f"{check.where}: exited 2: {check.text}",
        f"{page.where}: exited 2: {page.text.splitlines()[0]}",
        (
            f"{check.where}: ssm-rollback-spec: error: unrecognized arguments: "
            "--jsn reports/check.json (see ssm-rollback-spec check --help)"
        ),
        f"{page.where}: ssm-rollback-spec: error: reports/check.json: No such file or directory",
    ]


def test_a_broken_replay_page_command_fails_the_documents_test(runner: Runner) -> None:
    _, changed = _broken(
        "docs/replay.md",
        "vectors run --impl-cmd ./my-adapter --clause RB-REPLAY",
        "vectors run --impl-cmd my-adapter --clause RB-REPLAY",
    )
    [command] = changed
    problems = runner.run(Job("docs/replay.md", Kind.SHELL, (command,)))
    assert problems == [
        f"{command.where}: exited 2: {command.text}",
        (
            f"{command.where}: ssm-rollback-spec: error: --impl-cmd my-adapter: the adapter "
            "cannot be started: [Errno 2] No such file or directory: 'my-adapter' "
            "(to run the file my-adapter in this folder, write ./my-adapter)"
        ),
    ]


def test_a_folder_is_what_a_reader_has(runner: Runner) -> None:
    problems = runner.run(
        Job(
            "probe",
            Kind.SHELL,
            (
                Command(
                    "probe",
                    1,
                    "test -x ./my-adapter && test -f host_runtime/_vendor/rollback_spec/model.py",
                ),
                Command(
                    "probe",
                    2,
                    "test -f adapters/rust/Cargo.toml && ssm-rollback-spec vectors where",
                ),
                Command("probe", 3, "false"),
            ),
        )
    )
    assert problems == ["probe:3: exited 1: false"]


#: How the pages write a count in words.
_WORDS: Final = (
    "zero", "one", "two", "three", "four", "five", "six",
    "seven", "eight", "nine", "ten", "eleven", "twelve",
)  # fmt: skip


def _replay_counts() -> list[str]:
    """The phrases of the replay pages that state a count, each from the code that has it."""
    # Imported here: the corpus and the model are not what the other tests need.
    import json  # noqa: PLC0415
    import re  # noqa: PLC0415

    from ssm_rollback_spec.corpus.replay_run import replay_offer, split_offered  # noqa: PLC0415
    from ssm_rollback_spec.harness.replay_wire import ENGINE_PIPELINES  # noqa: PLC0415
    from ssm_rollback_spec.replay.layer import Pipeline  # noqa: PLC0415
    from ssm_rollback_spec.tools.shipped import replay_corpus_directory  # noqa: PLC0415
    from tests.replay.shipped import shipped_replay_cases  # noqa: PLC0415

    manifest = json.loads((replay_corpus_directory() / "manifest.json").read_text("utf-8"))
    files = {entry["path"]: entry["cases"] for entry in manifest["files"]}
    cases = shipped_replay_cases()
    # The refusals (refusals.json) are counted apart: their IDs name the rule, not the kind.
    singles = [case for case in cases if case.request["op"] == "replay" and case.refused is None]
    engine = [case for case in singles if case.pipeline in ENGINE_PIPELINES]
    rebuild = [case for case in singles if "-rebuild-" in case.case_id]
    rounds = [case for case in singles if "-rounds-" in case.case_id]
    rust = (ROOT / "adapters" / "rust" / "src" / "main.rs").read_text("utf-8")
    start = rust.index("const DESCRIBE: &str = concat!(")
    describe = json.loads("".join(re.findall(r'r#"(.*?)"#', rust[start : rust.index(");", start)])))
    sent, skipped = split_offered(cases, replay_offer({"ok": describe}))
    engine_rebuild = sum(case.pipeline in ENGINE_PIPELINES for case in rebuild)
    engine_rounds = sum(case.pipeline in ENGINE_PIPELINES for case in rounds)
    each = engine_rebuild // len(ENGINE_PIPELINES)
    return [
        f"The corpus ({len(cases)} replay cases",
        f"{len(engine)} of them in the engine",
        f"`{len(sent)} passed, {len(skipped)} skipped, 0 deviation, 0 not-run, 0 failed`",
        f"`Pipeline` ({_WORDS[len(Pipeline)]}, `L2Norm`)",
        f"{_WORDS[len(Pipeline)].capitalize()} dtype pipelines",
        f"`rebuild.json` ({files['rebuild.json']} cases: {len(rebuild) - engine_rebuild} in",
        f"{engine_rebuild} in the engine pipelines, {each} each",
        f"`post_conv.json` ({files['post_conv.json']} cases",
        f"`row_bytes.json` ({files['row_bytes.json']} cases",
        f"`rounds.json` ({files['rounds.json']} decodes: {len(rounds) - engine_rounds} in",
        f"{engine_rounds} in the engine pipelines, one each",
        f"(`batch.json`, {files['batch.json']} cases",
        f"`batch_alone.json`, {files.get('batch_alone.json', 0)};",
        f"`refusals.json` ({files['refusals.json']} cases",
    ]


def test_every_count_the_replay_pages_state_is_the_code_s() -> None:
    replay = _flowed(" ".join(_text(page) for page in REPLAY_PAGES))
    assert [phrase for phrase in _replay_counts() if _flowed(phrase) not in replay] == []
    # The pipelines the replay request takes: every one the model has, by name.
    from ssm_rollback_spec.replay.layer import Pipeline  # noqa: PLC0415

    protocol = _text("docs/protocol-replay.md")
    field = protocol[protocol.index("- `pipeline`: ") : protocol.index("- `layout`: ")]
    named = set(re.findall(r'`"([a-z0-9-]+)"`', field))
    assert named == {p.value for p in Pipeline} | {"bf16-rows-fp32-state"}


def test_the_long_pages_run_check_whole_as_often_as_contributing_says() -> None:
    # CONTRIBUTING.md gives this count as why the two pages run with the long
    # runs: counted here from the pages' commands, compared reflowed.
    whole = [
        command.text
        for document in sorted(_LONG)
        for job in jobs(document, _text(document))
        for command in job.commands
        if command.untested is None
        and re.search(r"\bssm-rollback-spec check\b", command.text)
        and "--clause" not in command.text
    ]
    assert whole
    stated = re.findall(r"`check` whole (\w+) times", _flowed(_text("CONTRIBUTING.md")))
    assert stated
    assert [_WORDS.index(word) for word in stated] == [len(whole)] * len(stated), whole
