"""Retention: finished job trees removed from the job store once their time is up.

One batch is one transaction (:func:`prune_batch`), written once for SQLite and PostgreSQL:
up to ``limit`` root jobs finished before their tenant's cutoff are removed with their whole
tree (children and forks at any depth), its events, checkpoints (and their log) and files,
and the signals of each workflow no job is left in. A fork is part of its original's tree:
never removed alone, and the tree waits until every fork in it is due too. A tree any job of
which is not terminal is kept whole; a child is only ever removed with its root. The batch
takes ``lock("retention")`` (one replica prunes at a time) and the lock of every job of a
tree found terminal, then reads their states again under those locks (a job that was still
running is never locked: no run waits for a prune). The turn records of a removed tree live
in the state store (its weave): the caller removes them (``Weaves.drop``) with the roots the
report names; its workspace blobs are swept per tenant (``_blob_gc``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from airlock.jobs import TERMINAL_STATES
from airlock.state import Op, execute, fetch_all, fetch_one, lock

_TERMINAL = tuple(sorted(s.value for s in TERMINAL_STATES))


@dataclass(frozen=True)
class Cutoffs:
    """Which finished jobs are due: those finished before their tenant's cutoff.

    Args:
        default: the cutoff of tenants not named in ``tenants`` (None: kept forever).
        tenants: a tenant's own cutoff (None: that tenant's jobs are kept forever).
        only: prune this tenant's jobs alone (None: every tenant's).
        audit: audit records written before it are removed too (None: none is).
    """

    default: datetime | None
    tenants: Mapping[str, datetime | None] = field(default_factory=dict)
    only: str | None = None
    audit: datetime | None = None

    def queries(self) -> list[tuple[str, list[object]]]:
        """The conditions (SQL on ``jobs``, and arguments) that select the due root jobs."""
        named = {t: c for t, c in self.tenants.items() if self.only in (None, t)}
        conds = [("tenant = ? AND finished_at < ?", [t, c.timestamp()]) for t, c in named.items() if c]
        if self.default is not None and (self.only is None or self.only not in self.tenants):
            others = list(self.tenants)
            where = "finished_at < ?" + (f" AND tenant NOT IN ({_marks(others)})" if others else "")
            args: list[object] = [self.default.timestamp(), *others]
            if self.only is not None:
                where, args = where + " AND tenant = ?", [*args, self.only]
            conds.append((where, args))
        return conds


@dataclass
class PruneReport:
    """What a prune removed (or, dry, would remove)."""

    roots: list[str] = field(default_factory=list)
    jobs: int = 0
    events: int = 0
    files: int = 0
    bytes: int = 0
    checkpoints: int = 0
    signals: int = 0
    audit: int = 0
    #: Whether due trees may remain (the batch was full).
    more: bool = False
    #: The tenants whose trees were removed (their workspace blobs may be unreferenced now).
    tenants: set[str] = field(default_factory=set)

    def add(self, other: PruneReport) -> None:
        """Count ``other`` (a later batch) in."""
        self.roots.extend(other.roots)
        for name in ("jobs", "events", "files", "bytes", "checkpoints", "signals", "audit"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.more = other.more
        self.tenants |= other.tenants


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" * len(values))


def _due_roots(cutoffs: Cutoffs, limit: int) -> Op[list[str]]:
    roots: list[tuple[float, str]] = []
    for where, args in cutoffs.queries():
        rows = yield from fetch_all(
            f"SELECT finished_at, id FROM jobs WHERE parent_id IS NULL AND forked_from IS NULL "
            f"AND state IN ({_marks(_TERMINAL)}) "
            f"AND {where} ORDER BY finished_at, n LIMIT ?",
            *_TERMINAL,
            *args,
            limit,
        )
        roots.extend((float(r[0]), str(r[1])) for r in rows)
    return [job_id for _, job_id in sorted(roots)[:limit]]


def _tree(root: str) -> Op[list[tuple[str, str, str]]]:
    """The ids, states and workflows of ``root`` and its descendants (root first): its
    children and its forks (``forked_from``), at any depth."""
    rows = yield from fetch_all(
        "WITH RECURSIVE tree(id, depth) AS (SELECT id, 0 FROM jobs WHERE id = ? "
        "UNION ALL SELECT j.id, tree.depth + 1 FROM jobs j JOIN tree "
        "ON j.parent_id = tree.id OR j.forked_from = tree.id) "
        "SELECT jobs.id, jobs.state, jobs.workflow FROM tree JOIN jobs ON jobs.id = tree.id "
        "ORDER BY tree.depth, jobs.n",
        root,
    )
    return [(str(r[0]), str(r[1]), str(r[2])) for r in rows]


def _tenants(root: str) -> Op[list[str]]:
    rows = yield from fetch_all("SELECT tenant FROM jobs WHERE id = ?", root)
    return [str(r[0]) for r in rows]


def _forks_due(cutoffs: Cutoffs, ids: Sequence[str]) -> Op[bool]:
    """Whether every fork in ``ids`` is due itself (a fork made and finished long after its
    original keeps the whole tree until it is due too)."""
    conds = cutoffs.queries()
    if not conds:
        return False
    due = " OR ".join(f"({where})" for where, _ in conds)
    args = [a for _, cond_args in conds for a in cond_args]
    row = yield from fetch_one(
        f"SELECT COUNT(*) FROM jobs WHERE id IN ({_marks(ids)}) AND forked_from IS NOT NULL AND NOT ({due})",
        *ids,
        *args,
    )
    return row is not None and int(row[0]) == 0


def _count(sql: str, ids: Sequence[str]) -> Op[int]:
    row = yield from fetch_one(sql.format(marks=_marks(ids)), *ids)
    return int(row[0] or 0) if row is not None else 0


def _measure(ids: Sequence[str], report: PruneReport) -> Op[None]:
    report.jobs += len(ids)
    report.events += yield from _count("SELECT COUNT(*) FROM events WHERE job_id IN ({marks})", ids)
    report.checkpoints += yield from _count("SELECT COUNT(*) FROM checkpoints WHERE job_id IN ({marks})", ids)
    report.checkpoints += yield from _count(
        "SELECT COUNT(*) FROM checkpoint_log WHERE job_id IN ({marks})", ids
    )
    report.files += yield from _count("SELECT COUNT(*) FROM job_files WHERE job_id IN ({marks})", ids)
    report.bytes += yield from _count("SELECT SUM(size) FROM job_files WHERE job_id IN ({marks})", ids)


def _remove(ids: Sequence[str]) -> Op[None]:
    for table, column in (
        ("events", "job_id"),
        ("checkpoints", "job_id"),
        ("checkpoint_log", "job_id"),
        ("job_files", "job_id"),
        ("jobs", "id"),
    ):
        yield from execute(f"DELETE FROM {table} WHERE {column} IN ({_marks(ids)})", *ids)


def _drop_signals(workflows: set[str], report: PruneReport, dry_run: bool) -> Op[None]:
    """Remove the signals of each workflow no job is left in (dry: that will be left in none)."""
    for workflow in sorted(workflows):
        if not dry_run:
            left = yield from fetch_one("SELECT 1 FROM jobs WHERE workflow = ? LIMIT 1", workflow)
            if left is not None:
                continue
        row = yield from fetch_one("SELECT COUNT(*) FROM signals WHERE workflow = ?", workflow)
        report.signals += int(row[0]) if row is not None else 0
        if not dry_run:
            yield from execute("DELETE FROM signals WHERE workflow = ?", workflow)


def prune_batch(cutoffs: Cutoffs, limit: int, *, dry_run: bool = False) -> Op[PruneReport]:
    """Remove up to ``limit`` due job trees (dry: count them, remove nothing)."""
    if limit < 1:
        raise ValueError(f"a prune batch must hold at least one job tree, not {limit}")
    yield from lock("retention")
    report = PruneReport()
    roots = yield from _due_roots(cutoffs, limit)
    report.more = len(roots) == limit
    workflows: set[str] = set()
    for root in roots:
        tree = yield from _tree(root)
        if any(state not in _TERMINAL for _, state, _ in tree):
            continue  # a job of it still runs: not a lock of it is taken
        for job_id, _, _ in tree:
            yield from lock(f"job:{job_id}")
        tree = yield from _tree(root)  # again, under the locks
        if not tree or any(state not in _TERMINAL for _, state, _ in tree):
            continue
        ids = [job_id for job_id, _, _ in tree]
        if len(ids) > 1 and not (yield from _forks_due(cutoffs, ids)):
            continue
        yield from _measure(ids, report)
        report.tenants.update((yield from _tenants(root)))
        if not dry_run:
            yield from _remove(ids)
        workflows.update(workflow for _, _, workflow in tree)
        report.roots.append(root)
    if dry_run and report.roots:  # a workflow is left empty if every job of it is due
        workflows = yield from _emptied(workflows, report.roots)
    yield from _drop_signals(workflows, report, dry_run)
    if cutoffs.audit is not None:
        yield from _drop_audit(cutoffs.audit, limit, report, dry_run)
    return report


def _drop_audit(before: datetime, limit: int, report: PruneReport, dry_run: bool) -> Op[None]:
    """Remove up to 10 * ``limit`` audit records written before ``before``, oldest first."""
    due = "SELECT seq FROM audit WHERE time < ? ORDER BY seq LIMIT ?"
    row = yield from fetch_one(f"SELECT COUNT(*) FROM ({due}) AS due", before.timestamp(), limit * 10)
    report.audit = int(row[0]) if row is not None else 0
    report.more = report.more or report.audit == limit * 10
    if not dry_run and report.audit:
        yield from execute(f"DELETE FROM audit WHERE seq IN ({due})", before.timestamp(), limit * 10)


def _emptied(workflows: set[str], roots: Sequence[str]) -> Op[set[str]]:
    """The workflows whose every job is in the trees of ``roots`` (a dry run's guess)."""
    empty: set[str] = set()
    for workflow in workflows:
        row = yield from fetch_one(
            "WITH RECURSIVE tree(id) AS (SELECT id FROM jobs WHERE id IN "
            f"({_marks(roots)}) UNION ALL SELECT j.id FROM jobs j JOIN tree "
            "ON j.parent_id = tree.id OR j.forked_from = tree.id) "
            "SELECT COUNT(*) FROM jobs WHERE workflow = ? AND id NOT IN (SELECT id FROM tree)",
            *roots,
            workflow,
        )
        if row is not None and int(row[0]) == 0:
            empty.add(workflow)
    return empty
