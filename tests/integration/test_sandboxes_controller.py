"""Long-lived sandboxes through the controller, in real Docker boxes: three jobs share one box
and its workspace; a pause snapshots the workspace and removes the box, a resume restores it
into a fresh box; an idle one past its TTL is removed; nothing is left behind."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from airlock.controller import JobService
from airlock.controller._sandboxes import SandboxNotFound, SandboxRefused
from airlock.jobs import JobState, WorkspaceChanged
from airlock.sandbox.docker._labels import LABEL_SESSION
from airlock.sandbox.kubernetes._names import LABEL_SESSION as KUBE_SESSION
from airlock.testing import DockerPods, KubeApiStandIn, text_step, tool_step
from layer0 import TurnInput
from tests.support.containers import assert_none_left, my_containers
from tests.support.controller import agent_config, running_service, tool_outputs, write_config

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]

KUBE_NS = "airlock-sandboxes"

#: Each job appends a line and prints how many there are, and the runner's pid (same box:
#: the same runner process).
COUNT = "echo job >> log.txt && wc -l < log.txt && cat /proc/1/stat | cut -d' ' -f1"
STEPS = [tool_step("bash", {"command": COUNT}, id="count"), text_step("counted")]


def _config(tmp_path: Path) -> Path:
    return write_config(tmp_path, {"shell": agent_config(STEPS, ["bash"])})


async def _job(service: JobService, sandbox: str) -> tuple[str, str]:
    """A job in ``sandbox``: the line count and pid its tool printed."""
    job = await service.submit("shell", TurnInput.new("count"), sandbox=sandbox)
    done = await service.wait(job.id)
    assert done.state is JobState.SUCCEEDED, done.error
    assert done.sandbox == sandbox
    [printed] = tool_outputs(await service.store.events(job.id))
    count, pid = printed.split()
    return count, pid


def _boxes(docker_client: Any, sandbox: str) -> list[Any]:
    return [c for c in my_containers(docker_client) if c.labels.get(LABEL_SESSION) == sandbox]


async def test_three_jobs_share_the_box_pause_and_resume_keep_the_files(
    tmp_path: Path, state_dir: Path, runner_image: str, docker_client: Any
) -> None:
    async with running_service(
        _config(tmp_path), tmp_path / "data", state_dir, runner_image, workspaces=True
    ) as service:
        kept = service.sandboxes
        info = await kept.create("shell", ttl_s=None, tenant="default", owner="me")
        [box] = _boxes(docker_client, info.id)
        # Three jobs submitted at once run one after another in the one box.
        results = await asyncio.gather(*(_job(service, info.id) for _ in range(3)))
        assert sorted(count for count, _ in results) == ["1", "2", "3"]
        assert len({pid for _, pid in results}) == 1, "the same runner process"
        [same] = _boxes(docker_client, info.id)
        assert same.id == box.id

        paused = await kept.pause(info.id, "default")
        assert paused.state == "paused" and paused.manifest is not None
        assert _boxes(docker_client, info.id) == [], "a paused sandbox has no box"
        manifest = await service.store.manifest("default", paused.manifest)
        assert manifest is not None and [e.path for e in manifest.entries] == ["log.txt"]

        resumed = await kept.resume(info.id, "default")
        assert resumed.state == "running"
        [fresh] = _boxes(docker_client, info.id)
        assert fresh.id != box.id
        job = await service.submit("shell", TurnInput.new("count"), sandbox=info.id)
        await service.wait(job.id)
        events = await service.store.events(job.id)
        restored = [
            e.data for e in events if isinstance(e.data, WorkspaceChanged) and e.data.phase == "restored"
        ]
        assert [r.manifest for r in restored] == [paused.manifest]
        assert tool_outputs(events)[0].split()[0] == "4", "the fourth line: the files came back"

        removed = await kept.remove(info.id, "default")
        assert removed.id == info.id
        with pytest.raises(SandboxNotFound):
            await kept.get(info.id, None)
    assert_none_left(docker_client)


async def test_an_idle_sandbox_past_its_ttl_is_removed_and_one_without_a_ttl_kept(
    tmp_path: Path, state_dir: Path, runner_image: str, docker_client: Any
) -> None:
    async with running_service(
        _config(tmp_path), tmp_path / "data", state_dir, runner_image, workspaces=True
    ) as service:
        kept = service.sandboxes
        idle = await kept.create("shell", ttl_s=60, tenant="default", owner="me")
        forever = await kept.create("shell", ttl_s=None, tenant="default", owner="me")
        await _job(service, idle.id)
        info = await kept.get(idle.id, None)
        assert await kept.expire(now=info.last_used_at.timestamp() + 30) == [], "not idle long enough"
        assert await kept.expire(now=info.last_used_at.timestamp() + 61) == [idle.id]
        assert _boxes(docker_client, idle.id) == []
        assert [s.id for s in await kept.listed("default")] == [forever.id]
        with pytest.raises(SandboxNotFound):
            await service.submit("shell", TurnInput.new("late"), sandbox=idle.id)
        await kept.remove(forever.id, None)
    assert_none_left(docker_client)


async def test_a_lost_box_is_reopened_from_the_last_snapshot(
    tmp_path: Path, state_dir: Path, runner_image: str, docker_client: Any
) -> None:
    async with running_service(
        _config(tmp_path), tmp_path / "data", state_dir, runner_image, workspaces=True
    ) as service:
        kept = service.sandboxes
        info = await kept.create("shell", ttl_s=None, tenant="default", owner="me")
        assert (await _job(service, info.id))[0] == "1"
        [box] = _boxes(docker_client, info.id)
        box.remove(force=True)  # lost between jobs
        assert (await _job(service, info.id))[0] == "2", "the job's snapshot came back in a fresh box"
        await kept.remove(info.id, None)
    assert_none_left(docker_client)


async def test_a_sandbox_is_fixed_to_its_agent(
    tmp_path: Path, state_dir: Path, runner_image: str, docker_client: Any
) -> None:
    config = write_config(
        tmp_path, {"shell": agent_config(STEPS, ["bash"]), "other": agent_config(STEPS, ["bash"])}
    )
    async with running_service(
        config, tmp_path / "data", state_dir, runner_image, workspaces=True
    ) as service:
        info = await service.sandboxes.create("shell", ttl_s=None, tenant="default", owner="me")
        with pytest.raises(SandboxRefused, match="runs agent shell's jobs, not other's"):
            await service.submit("other", TurnInput.new("x"), sandbox=info.id)
        with pytest.raises(SandboxNotFound):
            await service.submit("shell", TurnInput.new("x"), sandbox=info.id, tenant="another")
        await service.sandboxes.remove(info.id, None)
    async with running_service(config, tmp_path / "data2", state_dir, runner_image) as service:
        with pytest.raises(SandboxRefused, match="blob store"):
            await service.sandboxes.create("shell", ttl_s=None, tenant="default", owner="me")
    assert_none_left(docker_client)


async def test_on_the_kubernetes_stand_in_jobs_share_a_pod_and_pause_resume_keep_the_files(
    tmp_path: Path, runner_image: str
) -> None:
    """The same through the kubernetes backend: the stand-in API server, its pods on Docker.
    The stand-in enforces no NetworkPolicy, so this test opts out of the proof as an operator
    could (the agent has no network; the fence tries the pod's own loopback)."""
    pods = DockerPods()
    try:
        with KubeApiStandIn(pods=pods, namespaces=(KUBE_NS,)) as api:
            kube = {
                "kubeconfig": str(api.write_kubeconfig(tmp_path / "kubeconfig")),
                "namespace": KUBE_NS,
                "connect": "pod_ip",
                "image_pull_policy": "Never",
                "network_policy": "assume_enforced",
                "enforcement": {"metadata_address": "127.0.0.1:9"},
            }
            agent = {**agent_config(STEPS, ["bash"]), "backend": "kubernetes"}
            config = write_config(tmp_path, {"shell": agent}, backends={"kubernetes": kube})
            async with running_service(
                config, tmp_path / "data", tmp_path / "state", runner_image, workspaces=True
            ) as service:
                kept = service.sandboxes
                info = await kept.create("shell", ttl_s=None, tenant="default", owner="me")
                first = await _pods_of(api, info.id)
                assert [count for count, _ in [await _job(service, info.id) for _ in range(2)]] == ["1", "2"]
                assert await _pods_of(api, info.id) == first, "one pod for both jobs"
                paused = await kept.pause(info.id, None)
                assert paused.manifest is not None and await _pods_of(api, info.id) == []
                await kept.resume(info.id, None)
                again = await _pods_of(api, info.id)
                assert len(again) == 1 and again != first
                assert (await _job(service, info.id))[0] == "3"
                await kept.remove(info.id, None)
                assert await _pods_of(api, info.id) == []
    finally:
        pods.close()


async def _pods_of(api: KubeApiStandIn, sandbox: str) -> list[str]:
    """The names of the sandbox's pods on the stand-in."""
    found = await asyncio.to_thread(api.objects, "pods", KUBE_NS)
    return sorted(
        o["metadata"]["name"]
        for o in found
        if (o["metadata"].get("labels") or {}).get(KUBE_SESSION) == sandbox
    )
