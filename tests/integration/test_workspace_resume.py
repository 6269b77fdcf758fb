"""Workspaces that survive, in real Docker sandboxes: a job whose sandbox is removed (or whose
controller is killed with -9) mid-turn resumes in a new sandbox whose /workspace is the last
checkpoint's, and forks of a finished job start from its files and conversation at three points."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from airlock.controller import JobNotFound, JobService
from airlock.jobs import JobState, SandboxActivity, WorkspaceChanged
from airlock.policy import WorkspaceManifest
from airlock.sandbox.docker._labels import LABEL_SANDBOX
from airlock.sandbox.kubernetes._names import LABEL_JOB as KUBE_LABEL_JOB
from airlock.testing import DockerPods, KubeApiStandIn, text_step, tool_step
from airlock.turn import ToolStarted
from layer0 import TurnInput
from tests.support.containers import assert_none_left, my_containers
from tests.support.controller import (
    agent_config,
    controller_process,
    running_controller,
    running_service,
    write_config,
)

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]

KUBE_NS = "airlock-sandboxes"

#: Lists every file of /workspace as ``<sha256>  ./<path>`` lines, sorted (the tree's hash).
TREE = "find . -type f -print0 | sort -z | xargs -0 -r sha256sum"

WRITES = [
    tool_step(
        "bash",
        {"command": "mkdir -p src && printf one > src/a.txt && printf 'echo hi' > run.sh && chmod +x run.sh"},
        id="c1",
    ),
    tool_step("bash", {"command": "printf two > src/b.txt && rm run.sh && printf 1 > src/a.txt"}, id="c2"),
]
LOST = [
    *WRITES,
    tool_step("bash", {"command": "sleep 30"}, id="c3"),
    tool_step("bash", {"command": TREE}, id="c4"),
]
LOST.append(text_step("finished"))


@pytest.fixture
def no_leaks(docker_client: Any) -> Any:
    yield
    assert_none_left(docker_client)


def _started(events: list[Any]) -> list[str]:
    return [
        e.data.event.tool_use_id
        for e in events
        if isinstance(e.data, SandboxActivity) and isinstance(e.data.event, ToolStarted)
    ]


def _workspace(events: list[Any], phase: str) -> list[WorkspaceChanged]:
    return [e.data for e in events if isinstance(e.data, WorkspaceChanged) and e.data.phase == phase]


def _tree(manifest: WorkspaceManifest) -> str:
    """What :data:`TREE` prints for a workspace holding ``manifest``'s files."""
    return "".join(f"{e.sha256}  ./{e.path}\n" for e in manifest.entries)


async def _until_started(service: JobService, job_id: str, call: str) -> None:
    deadline = time.monotonic() + 120
    while call not in _started(await service.store.events(job_id, kind="sandbox")):
        assert time.monotonic() < deadline, f"{call} never started"
        await asyncio.sleep(0.1)


async def _check_restored(service: JobService, job_id: str) -> None:
    """The job resumed with /workspace equal to the manifest of the checkpoint it resumed from."""
    job = await service.get(job_id)
    assert job.state is JobState.SUCCEEDED, job.error
    assert job.resumes == 1
    events = await service.store.events(job_id)
    saved, restored = _workspace(events, "saved"), _workspace(events, "restored")
    assert [r.manifest for r in restored] == [saved[1].manifest], "restored the snapshot after c2"
    manifest = await service.store.manifest(job.tenant, restored[0].manifest)
    assert manifest is not None
    assert sorted(e.path for e in manifest.entries) == ["src/a.txt", "src/b.txt"], "run.sh was deleted"
    _, records = await service.weave(job_id)
    c4 = next(r for r in records if r.kind == "tool_call" and r.content["tool_use_id"] == "c4")  # type: ignore[index, call-overload]
    printed = json.loads(c4.content["output"])["stdout"]  # type: ignore[index, call-overload]
    assert printed == _tree(manifest), "the new sandbox's /workspace is the checkpoint's, file for file"
    _, report = await service.verify(job_id)
    assert report.ok, report


@pytest.mark.attack("faults")
async def test_a_sandbox_removed_mid_turn_resumes_with_the_last_checkpoints_files(
    tmp_path: Path, state_dir: Path, runner_image: str, docker_client: Any, no_leaks: None
) -> None:
    config = write_config(
        tmp_path, {"writer": agent_config(LOST, ["bash"], durability={"in_flight": "fail"})}
    )
    async with running_service(
        config, tmp_path / "data", state_dir, runner_image, workspaces=True
    ) as service:
        job = await service.submit("writer", TurnInput.new("go"))
        await _until_started(service, job.id, "c3")
        [sandbox] = [c for c in my_containers(docker_client) if LABEL_SANDBOX in c.labels]
        await asyncio.to_thread(sandbox.remove, force=True)
        await service.wait(job.id)
        await _check_restored(service, job.id)


@pytest.mark.attack("faults")
async def test_a_controller_killed_mid_turn_resumes_the_job_with_its_files(
    tmp_path: Path, state_dir: Path, runner_image: str, no_leaks: None
) -> None:
    data_dir = tmp_path / "data"
    config = write_config(
        tmp_path, {"writer": agent_config(LOST, ["bash"], durability={"in_flight": "fail"})}
    )
    async with controller_process(config, data_dir, state_dir, runner_image) as (proc, client):
        job = await client.submit("writer", "go")
        async for event in client.watch(job.id):
            data = event.data
            started = isinstance(data, SandboxActivity) and isinstance(data.event, ToolStarted)
            if started and data.event.tool_use_id == "c3":  # type: ignore[union-attr]
                break
        proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(proc.wait)
    async with running_controller(config, data_dir, state_dir, runner_image) as (controller, client):
        await client.wait(job.id)
        await _check_restored(controller.service, job.id)


async def test_forks_at_three_points_start_from_the_originals_files_and_conversation(
    tmp_path: Path, state_dir: Path, runner_image: str, no_leaks: None
) -> None:
    steps = [*WRITES, tool_step("bash", {"command": TREE}, id="c3"), text_step("finished")]
    config = write_config(tmp_path, {"writer": agent_config(steps, ["bash"])})
    async with running_service(
        config, tmp_path / "data", state_dir, runner_image, workspaces=True
    ) as service:
        job = await service.submit("writer", TurnInput.new("go"))
        done = await service.wait(job.id)
        assert done.state is JobState.SUCCEEDED, done.error
        _, before = await service.weave(job.id)
        log = await service.store.checkpoint_log(job.id)
        calls = {r.content["tool_use_id"]: r for r in before if r.kind == "tool_call"}  # type: ignore[index, call-overload]
        points = [calls["c1"].id, calls["c2"].id, None]
        forks = [await service.fork(job.id, at=at) for at in points]
        with pytest.raises(JobNotFound):
            await service.fork(job.id, tenant="someone-else")
        for at, fork in zip(points, forks, strict=True):
            finished = await service.wait(fork.id)
            assert finished.state is JobState.SUCCEEDED, finished.error
            assert finished.forked_from == job.id
            entry = next(e for e in log if at is None or (e.record is not None and e.record == at))
            if at is None:
                entry = log[-1]
            restored = _workspace(await service.store.events(fork.id), "restored")
            assert [r.manifest for r in restored] == [entry.manifest]
            root, records = await service.weave(fork.id)
            assert root == job.id, "the fork is a branch of the original's weave"
            first = next(r for r in records if r.job == fork.id)
            assert first.kind == "fork" and first.depends_on == (entry.record,)
            origin = next(r for r in before if r.id == entry.record)
            assert first.state_hash_post == origin.state_hash_post, "the same conversation and files"
        _, after = await service.weave(job.id)
        assert [r.hash for r in after if r.job == job.id] == [r.hash for r in before], "original untouched"
        _, report = await service.verify(job.id)
        assert report.ok, report


@pytest.mark.attack("faults")
async def test_on_the_kubernetes_stand_in_a_pod_deleted_mid_turn_resumes_with_its_files(
    tmp_path: Path, runner_image: str
) -> None:
    """The same through the kubernetes backend (the stand-in API server, its pods on Docker):
    the job's pod is deleted through the API mid-turn; a new pod gets the checkpoint's files.
    The stand-in enforces no NetworkPolicy, so this test opts out of the proof as an operator
    could (the agent has no network)."""
    pods = DockerPods()
    try:
        with KubeApiStandIn(pods=pods, namespaces=(KUBE_NS,)) as api:
            kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
            kube = {
                "kubeconfig": str(kubeconfig),
                "namespace": KUBE_NS,
                "connect": "pod_ip",
                "image_pull_policy": "Never",
                "network_policy": "assume_enforced",
                "enforcement": {"metadata_address": "127.0.0.1:9"},
            }
            agent = {
                **agent_config(LOST, ["bash"], durability={"in_flight": "fail"}),
                "backend": "kubernetes",
            }
            config = write_config(tmp_path, {"writer": agent}, backends={"kubernetes": kube})
            data, state = tmp_path / "data", tmp_path / "state"
            async with running_service(config, data, state, runner_image, workspaces=True) as service:
                job = await service.submit("writer", TurnInput.new("go"))
                await _until_started(service, job.id, "c3")
                [pod] = [p for p in api.objects("pods", KUBE_NS) if _job_of(p) == job.id]
                await asyncio.to_thread(_delete_pod, kubeconfig, pod["metadata"]["name"])
                await service.wait(job.id)
                await _check_restored(service, job.id)
            assert [p for p in api.objects("pods", KUBE_NS) if _job_of(p)] == [], "every pod removed"
    finally:
        pods.close()


def _job_of(pod: dict[str, Any]) -> str | None:
    return (pod["metadata"].get("labels") or {}).get(KUBE_LABEL_JOB)


def _delete_pod(kubeconfig: Path, name: str) -> None:
    """Delete the pod through the API server, as an operator or an eviction would."""
    client = kubernetes.config.new_client_from_config(str(kubeconfig))
    try:
        kubernetes.client.CoreV1Api(client).delete_namespaced_pod(name, KUBE_NS, grace_period_seconds=0)
    finally:
        client.close()
