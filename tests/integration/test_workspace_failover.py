"""A replica killed with -9 mid-turn loses no file: two ``airlock serve`` replicas share one
PostgreSQL database and one S3 bucket (moto's server, started here on 127.0.0.1); the survivor
adopts the job and resumes it in a new Docker sandbox whose /workspace is the last checkpoint's,
restored from the bucket, and no container of the job is left."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from airlock.controller._store_postgres import PostgresJobStore
from airlock.jobs import ControllerClient, JobEvent, JobState, SandboxActivity, WorkspaceChanged
from airlock.policy import WorkspaceManifest
from airlock.sandbox.docker._labels import LABEL_OWNER
from airlock.state import PostgresDatabase
from airlock.testing import text_step, tool_step
from airlock.turn import ToolFinished, ToolStarted
from tests.support.controller import agent_config, write_config
from tests.support.replicas import ReplicaProcess, replicas
from tests.support.s3 import CREDENTIALS, moto_server, new_bucket, s3_client

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]

#: Where the replicas keep blobs in the bucket.
PREFIX = "airlock/ws"
#: Lists every file of /workspace as ``<sha256>  ./<path>`` lines, sorted (the tree's hash).
TREE = "find . -type f -print0 | sort -z | xargs -0 -r sha256sum"

STEPS = [
    tool_step("bash", {"command": "printf one > file1 && printf scratch > tmp && sleep 1"}, id="w1"),
    tool_step("bash", {"command": "printf two > file2 && rm tmp && sleep 1"}, id="w2"),
    tool_step("bash", {"command": "sleep 30"}, id="long"),  # its replica is killed while it runs
    tool_step("bash", {"command": TREE}, id="tree"),
    tool_step("bash", {"command": "cat file1 file2"}, id="read"),
    text_step("finished"),
]


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    """moto's S3 server (skipped without .venv-moto unless AIRLOCK_REQUIRE_S3=1)."""
    yield from moto_server()


def _job_containers(docker_client: Any, job_id: str) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = docker_client.api.containers(
        all=True, filters={"label": f"airlock.job={job_id}"}
    )
    return listed


def _outputs(events: list[JobEvent]) -> dict[str, str]:
    """What each finished bash call printed (stdout), by tool call id."""
    return {
        e.data.event.tool_use_id: json.loads(e.data.event.output)["stdout"]
        for e in events
        if isinstance(e.data, SandboxActivity) and isinstance(e.data.event, ToolFinished)
    }


def _workspace(events: list[JobEvent], phase: str) -> list[WorkspaceChanged]:
    return [e.data for e in events if isinstance(e.data, WorkspaceChanged) and e.data.phase == phase]


async def _until_running(client: ControllerClient, job_id: str, call: str) -> list[JobEvent]:
    """Follow the job until ``call`` starts: the events so far."""
    seen: list[JobEvent] = []
    async with asyncio.timeout(120):
        async for event in client.watch(job_id):
            seen.append(event)
            data = event.data
            assert not event.terminal, f"the job ended before {call} started: {data}"
            started = isinstance(data, SandboxActivity) and isinstance(data.event, ToolStarted)
            if started and data.event.tool_use_id == call:  # type: ignore[union-attr]
                return seen
    raise AssertionError(f"the watch ended before {call} started")


def _running_on(docker_client: Any, job_id: str, started: list[ReplicaProcess]) -> ReplicaProcess:
    """The replica whose Docker sandbox runs the job (its containers' owner label)."""
    [container] = [c for c in _job_containers(docker_client, job_id) if c["State"] == "running"]
    owner = container["Labels"][LABEL_OWNER]
    [replica] = [r for r in started if owner.endswith(f":{r.proc.pid}")]
    return replica


@contextlib.asynccontextmanager
async def _job_store(dsn: str) -> AsyncIterator[PostgresJobStore]:
    async with PostgresDatabase(dsn) as db, PostgresJobStore(db) as store:
        yield store


def _check_in_bucket(client: Any, bucket: str, tenant: str, manifest: WorkspaceManifest) -> None:
    listed = client.list_objects_v2(Bucket=bucket, Prefix=f"{PREFIX}/{tenant}/sha256/")
    kept = {item["Key"].rsplit("/", 1)[1] for item in listed.get("Contents", [])}
    assert {e.sha256 for e in manifest.entries} <= kept, "the snapshot's blobs are in the shared bucket"


@pytest.mark.attack("faults")
async def test_a_replica_killed_mid_turn_resumes_the_job_with_its_files_from_s3(
    tmp_path: Path, postgres_dsn: str, runner_image: str, docker_client: Any, moto_endpoint: str
) -> None:
    s3 = s3_client(moto_endpoint)
    bucket = new_bucket(s3)
    env = {**CREDENTIALS, "AIRLOCK_S3_ENDPOINT": moto_endpoint}
    durability = {"in_flight": "fail", "max_resumes": 3}
    defaults = {"max_turns": 8, "max_duration": "120s"}
    agent = agent_config(STEPS, ["bash"], durability=durability, defaults=defaults)
    config, data = write_config(tmp_path, {"writer": agent}), tmp_path / "data"
    store = ("--blob-store", f"s3://{bucket}/{PREFIX}")
    with replicas() as started:
        for _ in range(2):
            started.append(ReplicaProcess(config, data, postgres_dsn, *store, lease_s=5.0, env=env))
        clients = [r.client() for r in started]
        job_id = (await clients[0].submit("writer", "write, then wait")).id
        before = await _until_running(clients[0], job_id, "long")
        saved = _workspace(before, "saved")
        assert len(saved) >= 2, "a snapshot after each write"
        last_saved = saved[-1]
        owner = _running_on(docker_client, job_id, started)
        owner.kill()
        survivor = clients[1] if owner is started[0] else clients[0]
        done = await survivor.wait(job_id)
        assert done.state is JobState.SUCCEEDED, (done.state, done.error)
        assert done.resumes == 1
        events = [event async for event in survivor.watch(job_id)]
        restored = _workspace(events, "restored")
        assert [r.manifest for r in restored] == [last_saved.manifest], "the last checkpoint's files"
        async with _job_store(postgres_dsn) as jobs:
            manifest = await jobs.manifest(done.tenant, last_saved.manifest)
        assert manifest is not None
        assert sorted(e.path for e in manifest.entries) == ["file1", "file2"], "tmp was deleted"
        _check_in_bucket(s3, bucket, done.tenant, manifest)
        outputs = _outputs(events)
        assert outputs["tree"] == "".join(f"{e.sha256}  ./{e.path}\n" for e in manifest.entries)
        assert outputs["read"] == "onetwo", "a tool after the resume reads the files written before"
        _, report, _ = await survivor.verify(job_id)
        assert report.ok, report
        assert _job_containers(docker_client, job_id) == [], "no container of the job is left"
        for client in clients:
            await client.close()
    assert not (data / "blobs").exists(), "no blob was kept on the replicas' own disk"
