# SPDX-License-Identifier: MIT OR Apache-2.0
"""The tests mirror the package: a unit test is found by its path, each kind in its folder."""

from __future__ import annotations

from typing import Final

from tests.child import ROOT

TESTS: Final = ROOT / "tests"
SPEC: Final = ROOT / "spec"

#: The packages of spec/ whose unit tests sit in tests/<package>/, one file per module.
MIRRORED: Final = ("corpus", "harness", "results", "serving", "sizing", "tools")

#: Test files of those folders that test several modules together, and what they test.
ACROSS_MODULES: Final = {
    "corpus/test_vectors.py": "the committed vectors, through vectors generate and vectors run",
    "harness/test_schemas.py": "the protocol's message schemas, against the corpus's requests "
    "and the reference adapter's replies",
    "results/test_results.py": "report: the reports read back, the matrix, the page, the badges",
    "results/test_results_browser.py": "the results page in headless Chromium",
    "sizing/test_rederive.py": "every view's figures against a re-derivation from the engines",
}

#: Every folder of tests/, by what it holds (CONTRIBUTING.md, "Where the tests are").
FOLDERS: Final = {
    "adapters": "the shipped adapters",
    "corpus": "unit tests of spec/corpus/",
    "e2e": "the e2e tier",
    "fakes": "what is wrong on purpose",
    "harness": "unit tests of spec/harness/",
    "kernels": "the kernels tier",
    "llamacpp": "the llama.cpp tier",
    "planners": "the planners tier",
    "project": "the project as a whole",
    "properties": "the shipped properties",
    "replay": "every replay test",
    "results": "unit tests of spec/results/",
    "scenarios": "the suite as its users meet it",
    "selftest": "the properties' self-test",
    "serving": "unit tests of spec/serving/",
    "sizing": "unit tests of spec/sizing/",
    "tools": "unit tests of spec/tools/",
}


def _engine_package(package: str, name: str, /) -> bool:
    """Whether ``tests/<package>/test_<engine>.py`` tests an engine's package of sizing.

    Each engine ``size`` follows is one package, ``spec/sizing/engines/<engine>/``
    (its facts and its unit); its tests are one file named after it.
    """
    engine = name.removeprefix("test_").removesuffix(".py")
    return (SPEC / package / "engines" / engine / "__init__.py").is_file()


def test_each_unit_test_file_is_named_after_the_module_it_tests() -> None:
    strays = [
        f"tests/{package}/{path.name}"
        for package in MIRRORED
        for path in sorted((TESTS / package).glob("test_*.py"))
        if not (SPEC / package / path.name.removeprefix("test_")).is_file()
        and not _engine_package(package, path.name)
        and f"{package}/{path.name}" not in ACROSS_MODULES
    ]
    assert strays == []


def test_the_files_said_to_test_several_modules_exist() -> None:
    assert [name for name in ACROSS_MODULES if not (TESTS / name).is_file()] == []


def test_a_test_file_at_the_top_tests_a_module_at_the_top_of_the_package() -> None:
    tops = sorted(TESTS.glob("test_*.py"))
    assert tops
    assert [
        path.name for path in tops if not (SPEC / path.name.removeprefix("test_")).is_file()
    ] == []


def test_every_folder_of_the_tests_is_one_the_layout_names() -> None:
    folders = {
        path.name
        for path in TESTS.iterdir()
        if path.is_dir() and not path.name.startswith(("_", "."))
    }
    assert folders == set(FOLDERS)


def test_every_fake_adapter_is_in_the_fakes_folder() -> None:
    adapters = sorted(
        str(path.relative_to(TESTS))
        for path in TESTS.rglob("*_adapter.py")
        if path.parent != TESTS / "fakes"
    )
    assert adapters == []
    assert (TESTS / "fakes" / "c-racy" / "adapter.c").is_file()
    assert not (ROOT / "adapters" / "c-racy" / "adapter.c").exists()
