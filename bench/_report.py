"""The benchmark's rows: what each row is (:class:`RowSpec`), what was measured for it
(:class:`Report`), the ratios and targets, and the table (plain text or Markdown) and JSON.

Times are kept in milliseconds. No airlock import: the table is tested on made-up rows.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Literal

from bench._common import pct

#: The peers: key prefix -> name shown.
PEERS = {"llm-sandbox": "llm-sandbox", "swe-rex": "SWE-ReX"}
#: A row's unit. ``ms`` and ``s`` rows compare as "lower is better", ``jobs/min`` as higher.
Unit = Literal["ms", "s", "MiB", "jobs/min"]


@dataclass(frozen=True)
class Target:
    """A goal for a row: its p50 (or value) at most ``limit``, its ratio to the floor at most
    (or, ``floor_ratio_min``, at least) ``limit``, faster than every peer, or no failed run."""

    kind: Literal["at_most", "floor_ratio", "floor_ratio_min", "beats_peers", "no_failures"]
    limit: float = 0.0

    def text(self, unit: str = "") -> str:
        if self.kind == "at_most":
            return f"≤ {self.limit:g} {unit}".rstrip()
        if self.kind == "floor_ratio":
            return f"≤ {self.limit:g}x floor"
        if self.kind == "floor_ratio_min":
            return f"≥ {self.limit:g}x floor"
        if self.kind == "beats_peers":
            return "< peers"
        return "0 failed"


def at_most(limit: float) -> Target:
    return Target("at_most", limit)


def floor_ratio(limit: float) -> Target:
    return Target("floor_ratio", limit)


def floor_ratio_at_least(limit: float) -> Target:
    """The ratio to the floor at least ``limit`` (a jobs/min row within a share of its floor's)."""
    return Target("floor_ratio_min", limit)


BEATS_PEERS = Target("beats_peers")
NO_FAILURES = Target("no_failures")
#: Sections (a key's prefix) and the names they are shown under.
SECTIONS = {
    "floor": "floor",
    "airlock": "airlock",
    "warm": "warm pool",
    **PEERS,
    "replicas": "replicas",
    "obs": "observability",
    "delegation": "delegation",
}


@dataclass(frozen=True)
class RowSpec:
    """One row of the table.

    Args:
        key: ``section.metric``, the section one of :data:`SECTIONS` (JSON and the
            measurements use the key).
        label: what is measured, as printed.
        unit: see :data:`Unit`.
        floor: the key of the floor row this row's ratio is taken against.
        peer: the metric (key suffix) of the peers' rows this row is compared with.
        targets: the goals the issue sets for it.
    """

    key: str
    label: str
    unit: Unit = "ms"
    floor: str | None = None
    peer: str | None = None
    targets: tuple[Target, ...] = ()

    @property
    def section(self) -> str:
        return self.key.split(".", 1)[0]


@dataclass
class RowData:
    """What was measured for a row: samples (or one value), failures, or why none."""

    samples: list[float] = field(default_factory=list)
    value: float | None = None
    value_p95: float | None = None
    detail: str = ""
    errors: list[str] = field(default_factory=list)
    runs: int = 0
    na: str | None = None


class Report:
    """The rows of one run and what was recorded for each."""

    def __init__(self, specs: list[RowSpec]) -> None:
        self.specs = {s.key: s for s in specs}
        self.data: dict[str, RowData] = {s.key: RowData() for s in specs}

    # -- recording ----------------------------------------------------------------------

    def add(self, key: str, *values: float) -> None:
        """Samples of ``key`` (one run)."""
        row = self.data[key]
        row.samples.extend(values)
        row.runs += 1

    def set(
        self,
        key: str,
        value: float | None,
        detail: str = "",
        errors: list[str] | None = None,
        p95: float | None = None,
    ) -> None:
        """The single value of ``key`` (a batch's wall time, a throughput; None: nothing
        succeeded), its p95 when known elsewhere, with what failed."""
        row = self.data[key]
        row.value, row.value_p95, row.detail, row.runs = value, p95, detail, row.runs + 1
        row.errors += errors or []

    def fail(self, key: str, error: str) -> None:
        row = self.data[key]
        row.errors.append(error)
        row.runs += 1

    def na(self, key: str, why: str) -> None:
        """``key`` was not measured, and why (not a failure)."""
        self.data[key].na = why

    # -- reading ------------------------------------------------------------------------

    def p50(self, key: str) -> float | None:
        row = self.data.get(key)
        if row is None or row.na:
            return None
        if row.samples:
            return statistics.median(row.samples)
        return row.value

    def p95(self, key: str) -> float | None:
        row = self.data[key]
        if row.na:
            return None
        return pct(row.samples, 0.95) if row.samples else row.value_p95

    def ratio(self, key: str, other: str | None) -> float | None:
        """p50 of ``key`` ÷ p50 of ``other`` (None when either is missing)."""
        mine, theirs = self.p50(key), self.p50(other) if other else None
        if mine is None or not theirs:
            return None
        return mine / theirs

    def ratios(self, key: str) -> dict[str, float | None]:
        spec = self.specs[key]
        found = {"floor": self.ratio(key, spec.floor)}
        for peer in PEERS:
            found[peer] = self.ratio(key, f"{peer}.{spec.peer}") if spec.peer else None
        return found

    def met(self, key: str, target: Target) -> bool | None:
        """Whether ``key`` meets ``target`` (None: not measured)."""
        p50, row = self.p50(key), self.data[key]
        if target.kind == "no_failures":
            return None if row.na or not row.runs else not row.errors
        if target.kind == "at_most":
            return None if p50 is None else p50 <= target.limit
        ratios = self.ratios(key)
        if target.kind in ("floor_ratio", "floor_ratio_min"):
            r = ratios["floor"]
            if r is None:
                return None
            return r <= target.limit if target.kind == "floor_ratio" else r >= target.limit
        peers = [ratios[p] for p in PEERS]
        if any(r is None for r in peers):
            return None
        return all(r is not None and r < 1 for r in peers)

    def failed(self) -> list[str]:
        """Keys of the rows where a run failed."""
        return [k for k, d in self.data.items() if d.errors and not d.na]

    # -- output -------------------------------------------------------------------------

    def as_json(self) -> list[dict[str, Any]]:
        rows = []
        for key, spec in self.specs.items():
            d = self.data[key]
            rows.append(
                {
                    "key": key,
                    "section": spec.section,
                    "label": spec.label,
                    "unit": spec.unit,
                    "p50": self.p50(key),
                    "p95": self.p95(key),
                    "n": len(d.samples),
                    "value": d.value,
                    "detail": d.detail,
                    "na": d.na,
                    "errors": d.errors,
                    "ratios": self.ratios(key),
                    "targets": [{"target": t.text(spec.unit), "met": self.met(key, t)} for t in spec.targets],
                    "samples": [round(s, 3) for s in d.samples],
                }
            )
        return rows

    def cells(self, key: str) -> list[str]:
        """One row's cells: label, p50, p95, ratios, target, notes."""
        spec, d = self.specs[key], self.data[key]
        p50, p95 = self.p50(key), self.p95(key)
        ratios = self.ratios(key)
        targets = " ".join(f"{t.text(spec.unit)} {_mark(self.met(key, t))}" for t in spec.targets)
        return [
            spec.label,
            _fmt(p50, spec.unit),
            _fmt(p95, spec.unit),
            *(_fmt_ratio(ratios[k]) for k in ("floor", *PEERS)),
            targets,
            _notes(d),
        ]

    def table(self, markdown: bool = False) -> str:
        """The whole table, one block per section."""
        head = ["", "p50", "p95", "÷ floor", *(f"÷ {name}" for name in PEERS.values()), "target", "notes"]
        sections: dict[str, list[list[str]]] = {}
        for key, spec in self.specs.items():
            sections.setdefault(spec.section, []).append(self.cells(key))
        if markdown:
            return _markdown(head, sections)
        return _plain(head, sections)


def _mark(met: bool | None) -> str:
    return {True: "✓", False: "✗", None: "?"}[met]


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return ""
    if unit == "ms":
        digits = 2 if value < 10 else 1 if value < 100 else 0
        return f"{value:.{digits}f} ms"
    if unit == "s":
        return f"{value:.2f} s"
    return f"{value:.1f} {unit}"


def _fmt_ratio(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}x"


def _notes(d: RowData) -> str:
    if d.na:
        return d.na
    parts = [d.detail] if d.detail else []
    if d.samples:
        parts.insert(0, f"n={len(d.samples)}")
    if d.errors:
        parts.append(f"FAILED {len(d.errors)}/{max(d.runs, len(d.errors))}: {d.errors[0][:160]}")
    return "; ".join(parts)


def _section_title(section: str) -> str:
    return SECTIONS.get(section, section)


def _plain(head: list[str], sections: dict[str, list[list[str]]]) -> str:
    rows = [r for block in sections.values() for r in block]
    widths = [max(len(c) for c in col) for col in zip(head, *rows, strict=True)]
    left = {0, len(head) - 2, len(head) - 1}  # label, target, notes

    def line(cells: list[str]) -> str:
        out = [
            c.ljust(w) if i in left else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(out).rstrip()

    lines = [line(head)]
    for section, block in sections.items():
        lines.append(f"-- {_section_title(section)}")
        lines += [line(r) for r in block]
    return "\n".join(lines)


def _markdown(head: list[str], sections: dict[str, list[list[str]]]) -> str:
    lines = ["| " + " | ".join(["", *head[1:]]) + " |", "|" + "---|" * len(head)]
    for section, block in sections.items():
        for cells in block:
            label = f"{_section_title(section)}: {cells[0]}"
            lines.append("| " + " | ".join([label, *cells[1:]]).replace("\n", " ") + " |")
    return "\n".join(lines)
