# SPDX-License-Identifier: MIT OR Apache-2.0
"""How ``size`` lays out its figures: aligned sections, Markdown tables, the sweep's tables."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ssm_rollback_spec.sizing.presentation import (
    RATIO_DEFINITION,
    markdown_sections,
    sweep_table,
    text_sections,
)
from ssm_rollback_spec.sizing.views import SweepRow

if TYPE_CHECKING:
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
            f"SCOPE. (x): {RATIO_DEFINITION}. Designs: docs/replay.md; views: docs/sizing.md;"
            " exact bytes: --format json."
        ),
        "",
        (
            "num_drafts  seed-row ring  minimal-pre-conv ring  replayssm ring"
            "  vllm speculative  toy speculative"
        ),
        (
            "         1        4.0 KiB                2.0 KiB         8.0 KiB"
            "   12.0 KiB (3.0x)   4.0 KiB (1.0x)"
        ),
        (
            "         0            0 B                    0 B             0 B"
            "      20.0 GiB (-)          0 B (-)"
        ),
    ]


def test_the_per_request_sweep_in_markdown_keeps_the_per_request_ratio() -> None:
    assert sweep_table(ROWS, scope="SCOPE", markdown=True, per_request=True).splitlines() == [
        "Per request; (x) as above.",
        "",
        (
            "| num_drafts | seed-row ring | minimal-pre-conv ring | replayssm ring"
            " | vllm speculative | toy speculative |"
        ),
        "| --- | --- | --- | --- | --- | --- |",
        "| 1 | 1.0 KiB | 512 B | 2.0 KiB | 3.0 KiB (3.0x) | 1.0 KiB (1.0x) |",
        "| 0 | 0 B | 0 B | 0 B | 10.0 MiB (-) | 0 B (-) |",
    ]
