"""The adversarial suite's bookkeeping: each case's outcome under its category, and the one
table the suite prints (category, attempts, held, failed naming the case).

A case is one test (with its parameters, e.g. ``[gvisor]``) of a module marked
``pytest.mark.attack("<category>")``: it *held* when the test passed, *failed* when it
failed or errored, and was *not run* when it skipped (named with the reason).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest
from rich.console import Console
from rich.markup import escape
from rich.table import Table

#: Where the report command finds the outcomes (the suite writes them there when set).
REPORT_ENV = "AIRLOCK_ADVERSARIAL_REPORT"


@dataclass(frozen=True)
class Outcome:
    category: str
    case: str
    result: str  # "held" | "failed" | "skipped"
    detail: str = ""


#: The outcomes of this session, on the pytest config.
OUTCOMES = pytest.StashKey[list[Outcome]]()


@dataclass(frozen=True)
class Row:
    category: str
    attempts: int
    held: int
    failed: list[str]
    skipped: list[str]


def rows(outcomes: list[Outcome]) -> list[Row]:
    """One row per category, in first-seen order (failed and skipped cases named, with why)."""
    by: dict[str, list[Outcome]] = {}
    for o in outcomes:
        by.setdefault(o.category, []).append(o)
    return [
        Row(
            category,
            sum(o.result != "skipped" for o in found),
            sum(o.result == "held" for o in found),
            [f"{o.case} ({o.detail})" if o.detail else o.case for o in found if o.result == "failed"],
            [f"{o.case} ({o.detail})" if o.detail else o.case for o in found if o.result == "skipped"],
        )
        for category, found in by.items()
    ]


def render(outcomes: list[Outcome], width: int = 140) -> str:
    """The table as text."""
    table = Table(title="airlock adversarial suite", show_lines=False)
    for name, justify in (("category", "left"), ("attempts", "right"), ("held", "right"), ("failed", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    total = [0, 0]
    skipped: list[str] = []
    for row in rows(outcomes):
        total[0] += row.attempts
        total[1] += row.held
        table.add_row(row.category, str(row.attempts), str(row.held), escape(", ".join(row.failed)) or "-")
        skipped += row.skipped
    failed = total[0] - total[1]
    table.add_row("total", str(total[0]), str(total[1]), str(failed) if failed else "-", end_section=True)
    console = Console(width=width, record=True, force_terminal=False, color_system=None)
    with console.capture() as capture:
        console.print(table)
        if skipped:
            console.print(escape(f"not run ({len(skipped)}): " + "; ".join(skipped)))
    return capture.get()


def save(outcomes: list[Outcome], path: Path) -> None:
    path.write_text(json.dumps([asdict(o) for o in outcomes], indent=1), encoding="utf-8")


def load(path: Path) -> list[Outcome]:
    return [Outcome(**o) for o in json.loads(path.read_text(encoding="utf-8"))]
