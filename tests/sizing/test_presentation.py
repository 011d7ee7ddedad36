# SPDX-License-Identifier: MIT OR Apache-2.0
"""How ``size`` lays out its figures: aligned sections, Markdown tables, the sweep's tables."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ssm_rollback_spec.sizing.presentation import (
    COLUMNS,
    RATIO_DEFINITION,
    TERMS,
    markdown_sections,
    rejoined,
    sweep_table,
    text_sections,
)
from ssm_rollback_spec.sizing.views import SweepRow
from ssm_rollback_spec.tools.cli import main

if TYPE_CHECKING:
    import pytest

    from ssm_rollback_spec.sizing.wording import Section

KIB: Final = 1024

SECTIONS: Final[list[Section]] = [
    ("Top", [("a", "1"), ("label", "v|w")]),
    ("Second", [("bb", "2")]),
]

#: One draft and none: figures (per request, per GPU), and a view named "toy".
ROWS: Final = [
    SweepRow(
        1,
        (KIB, 4 * KIB),
        (KIB // 2, 2 * KIB),
        (2 * KIB, 8 * KIB),
        {"vllm": (3 * KIB, 12 * KIB), "toy": (KIB, 4 * KIB)},
    ),
    SweepRow(0, (0, 0), (0, 0), (0, 0), {"vllm": (10 << 20, 20 << 30), "toy": (0, 0)}),
]


def test_text_sections_put_the_first_flush_left_and_indent_the_others_under_headings() -> None:
    assert text_sections(SECTIONS).splitlines() == [
        "a" + " " * 24 + "1",
        "label" + " " * 20 + "v|w",
        "",
        "Second",
        "  bb" + " " * 21 + "2",
    ]


def test_a_long_label_below_the_first_section_widens_every_column() -> None:
    long = "x" * 30
    lines = text_sections([*SECTIONS, ("Third", [(long, "3")])]).splitlines()
    assert lines[0] == "a" + " " * 32 + "1"
    assert lines[-1] == f"  {long} 3"
    assert {line.index(line.split()[-1]) for line in lines if line and " " in line} == {33}


def test_a_single_section_is_its_rows_at_the_narrowest_width() -> None:
    assert text_sections([("Only", [("a", "1")])]) == "a" + " " * 24 + "1"


def test_markdown_sections_are_tables_under_bold_headings_with_bars_escaped() -> None:
    assert markdown_sections(SECTIONS).splitlines() == (
        [
            "**Top**",
            "",
            "| figure | value |",
            "| --- | --- |",
            "| a | 1 |",
            "| label | v\\|w |",
            "",
            "**Second**",
            "",
            "| figure | value |",
            "| --- | --- |",
            "| bb | 2 |",
        ]
    )


def test_the_per_gpu_sweep_is_right_aligned_under_its_scope_and_the_ratio_defined() -> None:
    assert sweep_table(ROWS, scope="SCOPE", markdown=False, per_request=False).splitlines() == [
        (
            "SCOPE. The rings, then each view's speculative state and its ratio (x): one"
            " request's speculative"
        ),
        (
            "state over one slot's seed ring. Designs: docs/replay.md; views: docs/sizing.md;"
            " exact bytes:"
        ),
        "--format json.",
        "",
        "num_drafts  seed-row ring  minimal-pre-conv ring  replayssm ring",
        "         1        4.0 KiB                2.0 KiB         8.0 KiB",
        "         0            0 B                    0 B             0 B",
        "",
        "num_drafts           vllm           toy",
        "         1  12.0 KiB 3.0x  4.0 KiB 1.0x",
        "         0     20.0 GiB -         0 B -",
    ]
    assert RATIO_DEFINITION == "one request's speculative state over one slot's seed ring"


def test_a_views_table_wider_than_100_columns_goes_on_in_blocks_under_the_drafts() -> None:
    # Seven views whose cells are 24 characters each: 1,014.0 MiB at 1,038,336.0x.
    wide = {f"view-{n}": (1014 << 20, 1014 << 20) for n in range(7)}
    rows = [SweepRow(1, (KIB, KIB), (KIB, KIB), (KIB, KIB), wide)]
    lines = sweep_table(rows, scope="SCOPE", markdown=False, per_request=False).splitlines()
    assert max(len(line) for line in lines) <= COLUMNS
    tables = "\n".join(lines).split("\n\n")[2:]
    headers = [table.splitlines()[0].split() for table in tables]
    assert [header[0] for header in headers] == ["num_drafts"] * 3
    # Every view once, in order, as many to a block as fit.
    assert [header[1:] for header in headers] == [
        ["view-0", "view-1", "view-2"],
        ["view-3", "view-4", "view-5"],
        ["view-6"],
    ]
    assert tables[2].splitlines()[1].split() == ["1", "1,014.0", "MiB", "1,038,336.0x"]


def test_the_per_request_sweep_in_markdown_keeps_the_per_request_ratio() -> None:
    assert sweep_table(ROWS, scope="SCOPE", markdown=True, per_request=True).splitlines() == [
        "Per request; the ratios (x) as above.",
        "",
        "| num_drafts | seed-row ring | minimal-pre-conv ring | replayssm ring |",
        "| --- | --- | --- | --- |",
        "| 1 | 1.0 KiB | 512 B | 2.0 KiB |",
        "| 0 | 0 B | 0 B | 0 B |",
        "",
        "| num_drafts | vllm | toy |",
        "| --- | --- | --- |",
        "| 1 | 3.0 KiB 3.0x | 1.0 KiB 1.0x |",
        "| 0 | 10.0 MiB - | 0 B - |",
    ]


def test_a_long_value_goes_on_under_its_column_and_rejoins() -> None:
    value = " ".join(["word"] * 40)
    text = text_sections([("Top", [("a", "1")]), ("Next", [("label", value)])])
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= COLUMNS
    assert lines[3].startswith("  label" + " " * 18 + "word")
    assert all(line.startswith(" " * 25 + "word") for line in lines[4:])
    assert rejoined(text).splitlines()[3] == "  label" + " " * 18 + value


def test_a_long_heading_goes_on_indented_by_four() -> None:
    heading = " ".join(["heading"] * 20)
    lines = text_sections([("Top", [("a", "1")]), (heading, [("b", "2")])]).splitlines()
    assert lines[2].startswith("heading heading")
    assert lines[3].startswith("    heading")
    assert rejoined("\n".join(lines)).splitlines()[2] == heading


def test_why_defines_each_term_once_and_the_plain_output_none(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for drafts in ("3", "1-3"):
        flags = ["size", "--config", "qwen3.5-27b", "--num-drafts", drafts]
        assert main(flags) == 0
        plain = capsys.readouterr().out
        assert main([*flags, "--why"]) == 0
        printed = capsys.readouterr().out
        why = rejoined(printed).splitlines()
        assert "Terms" not in plain.splitlines()
        assert why.count("Terms") == 1
        for term, meaning in TERMS:
            # Each term once, with its meaning after it.
            [line] = [line for line in why if line.startswith(f"  {term} ")]
            assert line.endswith(f" {meaning}")
        assert max(len(line) for line in printed.splitlines()) <= COLUMNS
