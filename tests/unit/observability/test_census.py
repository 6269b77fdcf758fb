"""The jobs gauge is set from the job store's count as well as from this process's events: it
shows jobs it never saw move (queued before it started, moved by another replica) and drops the
label sets of jobs that finished elsewhere."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from airlock.config import load_config
from airlock.controller import AgentRunner, JobService, SqliteJobStore
from airlock.jobs import JobState
from airlock.observability import JobCensus, Metrics
from airlock.state import SqliteStore
from layer0 import TurnInput
from tests.support.controller import write_config

from .test_metrics import agent

pytestmark = pytest.mark.timeout(60)


def gauge(metrics: Metrics) -> dict[tuple[str, str, str], float]:
    text = metrics.exposition()
    return {
        (s.labels["state"], s.labels["agent"], s.labels["tenant"]): s.value
        for family in text_string_to_metric_families(text)
        if family.name == "airlock_jobs"
        for s in family.samples
    }


async def until(metrics: Metrics, wanted: dict[tuple[str, str, str], float]) -> None:
    deadline = time.monotonic() + 30
    while gauge(metrics) != wanted:
        assert time.monotonic() < deadline, gauge(metrics)
        await asyncio.sleep(0.02)


async def test_the_gauge_counts_the_store_not_only_this_process(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, {"a": agent(tmp_path / "go")}))
    async with (
        SqliteJobStore(tmp_path / "jobs.db") as store,
        SqliteStore(tmp_path / "state.db") as state,
    ):
        other = JobService(store, AgentRunner(config), state)  # another replica: no workers here
        first = await other.submit("a", TurnInput.new("one"), tenant="red")
        await other.submit("a", TurnInput.new("two"), tenant="red")
        await other.submit("a", TurnInput.new("three"), tenant="blue")
        metrics = Metrics()  # this replica saw none of it
        async with metrics.census(other, interval_s=0.05):
            assert gauge(metrics) == {("queued", "a", "red"): 2, ("queued", "a", "blue"): 1}
            await other.cancel(first.id)
            await until(metrics, {("queued", "a", "red"): 1, ("queued", "a", "blue"): 1})
            for job in await other.find():
                if not job.state.terminal:
                    await other.cancel(job.id)
            await until(metrics, {})


async def test_a_failed_count_keeps_the_gauge_and_the_census_going() -> None:
    metrics, calls = Metrics(), []

    async def count() -> dict[tuple[JobState, str, str], int]:
        calls.append(1)
        if len(calls) == 2:
            raise OSError("database is away")
        return {(JobState.RUNNING, "a", "t"): len(calls)}

    census = JobCensus(metrics.families, count)
    await census.once()
    await census.once()
    assert gauge(metrics) == {("running", "a", "t"): 1}
    await census.once()
    assert gauge(metrics) == {("running", "a", "t"): 3}
