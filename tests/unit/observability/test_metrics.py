"""Metrics of a real run: a job on the process backend (a real runner process, the scripted
provider, SQLite), scraped over HTTP from ``/metrics`` while it runs and after it ends; the
exposition parses with prometheus_client's own parser."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from airlock.controller import JobService, JobStore, JobStoreError, controller_observer
from airlock.errors import ConfigError
from airlock.jobs import JobState, SandboxActivity
from airlock.observability import Metrics, serving_metrics
from airlock.proxy import EgressEvent
from airlock.sandbox import PoolStats, ShapeStats, sandbox_observer
from airlock.state import Database, DatabaseError
from airlock.testing import text_step, tool_step
from layer0 import TurnInput
from tests.support.controller import running_service, write_config
from tests.support.ipv6 import needs_ipv6_loopback
from tests.support.nodelay import nodelay, recording

pytestmark = pytest.mark.timeout(120)

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def agent(go: Path) -> dict[str, Any]:
    """An agent whose bash call waits for the test's ``go`` file (the job runs until then)."""
    wait = f"while [ ! -e {go} ]; do sleep 0.05; done; echo go"
    steps = [
        tool_step("bash", {"command": wait}, id="b1", usage=(100, 20), cost="0.25"),
        text_step("done", usage=(150, 5), cost="0.5"),
    ]
    return {
        "provider": {"kind": "scripted", "script": steps},
        "tools": ["bash"],
        "backend": "process",
        "defaults": {"max_turns": 4, "max_duration": "60s"},
    }


async def scrape(address: str) -> Samples:
    async with httpx.AsyncClient() as client:
        response = await client.get(f"http://{address}/metrics")
    assert response.status_code == 200
    return parsed(response.text)


def parsed(text: str) -> Samples:
    """The exposition's samples, read with prometheus_client's own parser."""
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels`` (0 when none)."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


async def wait_state(service: JobService, job_id: str, states: Iterable[JobState]) -> None:
    deadline = time.monotonic() + 60
    wanted = set(states)
    while (await service.get(job_id)).state not in wanted:
        assert time.monotonic() < deadline, "the job did not get there"
        await asyncio.sleep(0.02)


async def test_each_family_moves_during_a_real_run(tmp_path: Path) -> None:
    go = tmp_path / "go"
    config = write_config(tmp_path, {"waiter": agent(go)})
    metrics = Metrics()
    with metrics.observing():
        async with (
            running_service(config, tmp_path / "data", tmp_path / "sandboxes", "unused") as service,
            serving_metrics(metrics, "127.0.0.1:0") as address,
        ):
            metrics.attach(service)
            before = await scrape(address)
            job = await service.submit("waiter", TurnInput.new("go"))
            await wait_state(service, job.id, [JobState.RUNNING])
            await wait_for_tool_start(service, job.id)
            egress = EgressEvent(
                client="127.0.0.1:1",
                phase="decision",
                method="CONNECT",
                host="example.com",
                port=443,
                allowed=False,
                rule="",
                reason="x",
            )
            await service.events.emit(job.id, SandboxActivity(event=egress))
            during = await scrape(address)
            go.touch()
            done = await service.wait(job.id)
            assert done.state is JobState.SUCCEEDED, done.error
            after = await scrape(address)

    assert value(before, "airlock_jobs", state="running") == 0
    assert value(during, "airlock_jobs", state="running", agent="waiter", tenant="default") == 1
    assert value(after, "airlock_jobs", state="running") == 0
    assert value(during, "airlock_jobs_finished_total") == 0
    assert (
        value(after, "airlock_jobs_finished_total", state="succeeded", agent="waiter", tenant="default") == 1
    )
    assert value(during, "airlock_job_queue_wait_seconds_count", agent="waiter") == 1
    assert value(during, "airlock_job_run_duration_seconds_count") == 0
    assert value(after, "airlock_job_run_duration_seconds_count", agent="waiter") == 1
    provisioned = {"backend": "process", "isolation": "process", "start": "cold"}
    assert value(before, "airlock_sandbox_provision_seconds_count") == 0
    assert value(during, "airlock_sandbox_provision_seconds_count", **provisioned) == 1
    assert value(during, "airlock_egress_decisions_total", agent="waiter", decision="denied") == 1
    assert value(during, "airlock_model_tokens_total", agent="waiter", direction="input") == 100
    assert value(after, "airlock_model_tokens_total", agent="waiter", direction="input") == 250
    assert value(after, "airlock_model_tokens_total", agent="waiter", direction="output") == 25
    assert value(during, "airlock_model_cost_usd_total", agent="waiter") == 0.25
    assert value(after, "airlock_model_cost_usd_total", agent="waiter") == 0.75
    stored = value(during, "airlock_store_operation_seconds_count", store="jobs", engine="sqlite")
    assert 0 < stored < value(after, "airlock_store_operation_seconds_count", store="jobs", engine="sqlite")


async def wait_for_tool_start(service: JobService, job_id: str) -> None:
    """Until the job's bash call started (its first model call was recorded)."""
    deadline = time.monotonic() + 60
    while not any(
        isinstance(e.data, SandboxActivity) and e.data.event.type == "tool_started"
        for e in await service.store.events(job_id)
    ):
        assert time.monotonic() < deadline, "the tool never started"
        await asyncio.sleep(0.02)


def test_the_hooks_without_a_job_event_and_the_pools_move_their_families() -> None:
    """Reaper removals and isolation verdicts (the controller's observer: the process backend
    has neither) and the warm pools' counters (read from the pools at each scrape)."""
    metrics = Metrics()
    stats = {
        "docker": PoolStats(
            hits=3,
            misses=1,
            started=5,
            failed=2,
            destroyed=0,
            claim_ms_p50=None,
            claim_ms_p95=None,
            shapes=[ShapeStats(shape="s", ready=2, starting=0, failures=0, idle=False)],
        )
    }
    service = SimpleNamespace(
        events=SimpleNamespace(subscribe=lambda listener: lambda: None),
        runner=SimpleNamespace(pool_stats=lambda: stats),
    )
    with metrics.observing():
        metrics.attach(cast("JobService", service))
        controller_observer().reaped("docker", 4)
        controller_observer().isolation_proved("docker", "failed")
        sandbox_observer().isolation_proved("kubernetes", "enforced")
        controller_observer().store_failed("jobs", "postgresql")
        samples = parsed(metrics.exposition())
    assert value(samples, "airlock_reaper_removals_total", backend="docker") == 4
    assert value(samples, "airlock_network_policy_enforcement", backend="docker", status="failed") == 1
    assert value(samples, "airlock_network_policy_enforcement", backend="docker", status="enforced") == 0
    assert value(samples, "airlock_network_policy_enforcement", backend="kubernetes", status="enforced") == 1
    assert value(samples, "airlock_store_errors_total", store="jobs", engine="postgresql") == 1
    assert value(samples, "airlock_pool_size", backend="docker") == 2
    assert value(samples, "airlock_pool_hits_total", backend="docker") == 3
    assert value(samples, "airlock_pool_misses_total", backend="docker") == 1
    assert value(samples, "airlock_pool_refill_failures_total", backend="docker") == 2
    # Outside the block the core's observers are the no-op ones again: nothing moves.
    controller_observer().reaped("docker", 1)
    assert value(parsed(metrics.exposition()), "airlock_reaper_removals_total", backend="docker") == 4


@pytest.mark.parametrize("address", ["127.0.0.1:0", pytest.param("[::1]:0", marks=needs_ipv6_loopback)])
async def test_metrics_are_served_on_ipv4_and_ipv6_loopback(address: str) -> None:
    metrics = Metrics()
    async with serving_metrics(metrics, address) as where:
        samples = await scrape(where)
    assert ("airlock_jobs_finished_total", frozenset()) not in samples  # parsed; no job yet


@pytest.mark.parametrize("address", ["127.0.0.1", ":9464", "host:port", "127.0.0.1:70000"])
async def test_a_bad_metrics_address_is_refused_clearly(address: str) -> None:
    with pytest.raises(ConfigError, match="--metrics-address must be HOST:PORT"):
        async with serving_metrics(Metrics(), address):
            pass


class _GoneDatabase:
    """A database that refuses every transaction (as one that went away)."""

    dialect, where = "postgresql", "postgresql://db/airlock"

    async def transact(self, op: Any) -> Any:
        op.close()
        raise DatabaseError("connection refused")


async def test_a_failed_store_transaction_counts_as_an_error_and_is_timed() -> None:
    metrics = Metrics()
    store = JobStore(cast("Database", _GoneDatabase()))
    with metrics.observing():
        with pytest.raises(JobStoreError, match="connection refused"):
            await store.get("j1")
        samples = parsed(metrics.exposition())
    assert value(samples, "airlock_store_errors_total", store="jobs", engine="postgresql") == 1
    assert value(samples, "airlock_store_operation_seconds_count", store="jobs", engine="postgresql") == 1


async def test_a_kept_alive_scrape_connection_has_tcp_nodelay(monkeypatch: pytest.MonkeyPatch) -> None:
    servers = recording(monkeypatch)
    async with (
        serving_metrics(Metrics(), "127.0.0.1:0") as where,
        httpx.AsyncClient(base_url=f"http://{where}") as prometheus,
    ):
        for _ in range(2):
            assert (await prometheus.get("/metrics")).status_code == 200
        (server,) = servers
        assert nodelay(server) == [True]
