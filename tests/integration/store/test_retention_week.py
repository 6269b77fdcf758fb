"""A simulated week (a fake clock, not timed) of jobs with artifacts, events and turn records,
pruned hourly with a retention of one day: the store stays bounded, on SQLite and PostgreSQL
(on SQLite, the file's pages too), where it grows all week without pruning."""

from __future__ import annotations

import contextlib
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from airlock.controller import JobStore, Pruner
from airlock.controller._weaving import Weaves
from airlock.identity import AuthSettings, RetentionSettings
from airlock.jobs import JobState, LogLine
from airlock.state import InMemoryStore
from airlock.weave import WeaveStore
from layer0 import LogLevel, TurnInput
from tests.support.job_stores import StoreSite, count_rows

JOBS_PER_HOUR = 2
DAYS = 7
ARTIFACT = b"a" * 4096
#: With a retention of one day, pruned hourly: at most a day and an hour of jobs are kept.
BOUND = (24 + 1) * JOBS_PER_HOUR


class Clock:
    """The simulated time."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def _pages(path: str) -> int:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("PRAGMA page_count").fetchone()[0])


class Week:
    """The simulation: each hour, jobs that run and finish, then (maybe) a prune."""

    def __init__(
        self, store: JobStore, clock: Clock, pruner: Pruner | None = None, state: InMemoryStore | None = None
    ) -> None:
        self.store, self.clock, self.pruner = store, clock, pruner
        self.state = state or InMemoryStore()
        self.roots: list[str] = []
        #: Jobs kept at the end of each hour.
        self.kept: list[int] = []

    async def weaves_kept(self) -> int:
        return len([root for root in self.roots if await self.state.list(WeaveStore.scope(root), "")])

    async def run(self, days: int) -> None:
        for _ in range(days * 24):
            hour = self.clock.now
            await self._hour()
            self.clock.now = hour + timedelta(hours=1)
            if self.pruner is not None:
                await self.pruner.once()
            self.kept.append(await count_rows(self.store, "jobs"))

    async def _hour(self) -> None:
        store, clock = self.store, self.clock
        for i in range(JOBS_PER_HOUR):
            clock.now += timedelta(minutes=1)
            job, _ = await store.create(agent="a", input=TurnInput.new(f"job {i}"))
            await store.transition(job.id, JobState.RUNNING)
            await store.save_artifacts(job.id, [("out.bin", ARTIFACT)])
            for n in range(3):
                await store.append(job.id, LogLine(level=LogLevel.INFO, message=f"step {n}", source="turn"))
            await store.transition(job.id, JobState.SUCCEEDED)
            await self.state.write(WeaveStore.scope(job.id), "00000000", {"record": "turn"})
            self.roots.append(job.id)


async def test_a_week_pruned_hourly_stays_bounded(
    site: StoreSite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    monkeypatch.setattr("airlock.controller._store.utcnow", clock)
    async with site.open() as store:
        state = InMemoryStore()
        retention = RetentionSettings(finished_jobs=timedelta(days=1))
        pruner = Pruner(store, Weaves(state), retention, AuthSettings(), now=clock, batch=10)
        week = Week(store, clock, pruner, state)
        await week.run(2)
        pages_after_two_days = _pages(site.where) if site.engine == "sqlite" else 0
        await week.run(DAYS - 2)
        assert max(week.kept) <= BOUND and week.kept[-1] >= 24 * JOBS_PER_HOUR
        assert await count_rows(store, "events") <= BOUND * 6
        assert await count_rows(store, "job_files") <= BOUND
        assert await week.weaves_kept() == week.kept[-1]  # the pruned trees' weaves are gone too
    if site.engine != "sqlite":
        return
    # The file's pages are given back: what a day holds, not what a week did.
    pruned_pages = _pages(site.where)
    unpruned = str(tmp_path / "unpruned.db")
    clock.now = datetime(2026, 1, 1, tzinfo=UTC)
    async with StoreSite("sqlite", unpruned).open() as store:
        grown = Week(store, clock)
        await grown.run(DAYS)
    assert grown.kept[-1] == DAYS * 24 * JOBS_PER_HOUR > BOUND
    assert pruned_pages <= pages_after_two_days and _pages(unpruned) > 4 * pruned_pages
