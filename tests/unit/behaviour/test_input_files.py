"""What a job's message says of its input files: names and sizes, or the text of those that
fit, in the order given; binary files and what no longer fits are named, never cut."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from airlock.behaviour import InputFilesPolicy
from airlock.behaviour.input_files import HEADING


def listed(*lines: str) -> str:
    """The announcement expected: the heading, then one line or file element per file."""
    return "\n".join([HEADING, *lines])


FILES = [("a.csv", b"x,1\ny,2\n"), ("img.png", b"\x89PNG\x00"), ("big.log", b"z" * 3000)]


def test_nothing_is_announced_unless_asked_or_without_files() -> None:
    assert InputFilesPolicy().announcement(FILES) is None
    assert InputFilesPolicy(show="content").announcement([]) is None


def test_names_lists_each_file_with_its_size() -> None:
    assert InputFilesPolicy(show="names").announcement(FILES) == listed(
        "- a.csv (8 bytes)", "- img.png (5 bytes)", "- big.log (2.9 KiB)"
    )


def test_content_shows_the_text_that_fits_and_names_the_rest() -> None:
    text = InputFilesPolicy(show="content", max_bytes=100).announcement(FILES)
    assert text == listed(
        '<file path="a.csv">\nx,1\ny,2\n</file>',
        "- img.png (5 bytes, binary, not shown)",
        "- big.log (2.9 KiB, not shown)",
    )


def test_lines_shows_a_marked_part_and_the_budget_counts_what_is_shown() -> None:
    files = [("sales.csv", b"date,amount\n1,2\n3,4\n"), ("one.txt", b"only line"), ("e", b"")]
    text = InputFilesPolicy(show="content", lines=1, max_bytes=21).announcement(files)
    assert text == listed(
        '<file path="sales.csv" lines="1 of 3">\ndate,amount\n</file>',
        '<file path="one.txt">\nonly line\n</file>',
        '<file path="e">\n</file>',
    )
    assert InputFilesPolicy(show="names", lines=1).announcement(files) == listed(
        "- sales.csv (20 bytes)", "- one.txt (9 bytes)", "- e (0 bytes)"
    )


def test_the_budget_is_spent_in_order_and_a_later_small_file_still_fits() -> None:
    files = [("one", b"a" * 6), ("two", b"b" * 6), ("three", b"c")]
    text = InputFilesPolicy(show="content", max_bytes=7).announcement(files)
    assert text == listed(
        '<file path="one">\naaaaaa\n</file>',
        "- two (6 bytes, not shown)",
        '<file path="three">\nc\n</file>',
    )


def test_odd_names_are_quoted_and_empty_or_undecodable_files_are_handled() -> None:
    files = [('say "hi".txt', b""), ("latin1.txt", "café".encode("latin-1")), ("m", b"x" * (3 << 20))]
    text = InputFilesPolicy(show="content").announcement(files)
    assert text == listed(
        '<file path="say \\"hi\\".txt">\n</file>',
        "- latin1.txt (4 bytes, binary, not shown)",
        "- m (3.0 MiB, not shown)",
    )


@pytest.mark.parametrize(
    "bad",
    [{"show": "all"}, {"max_bytes": 0}, {"max_bytes": 2 << 20}, {"lines": 0}, {"show": "names", "limit": 3}],
)
def test_invalid_policies_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        InputFilesPolicy.model_validate(bad)
