"""Before a job resumes on Docker, its previous sandbox is removed and confirmed gone.

Real Docker, the runner image as built (``airlock images build``): a job's sandbox is still
running (as a crashed or restarted controller's would be) when the job is about to resume;
``ensure_gone`` finds it by the job's label, removes it, and reads it back as gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

import pytest

from airlock.images import runner_image_tag
from airlock.sandbox import SandboxRequest
from airlock.sandbox.docker import DockerBackend
from airlock.sandbox.docker._resume import LABEL_JOB
from airlock.testing import bash_agent
from layer0 import EnvError, EnvironmentSpec, TurnConfig, TurnInput
from tests.support.containers import assert_none_left

pytestmark = [pytest.mark.docker, pytest.mark.timeout(120)]


@pytest.fixture
def image(docker_client: Any) -> str:
    """The runner image already on this machine (this test builds none)."""
    import docker

    tag = runner_image_tag()
    try:
        docker_client.images.get(tag)
    except docker.errors.ImageNotFound:
        pytest.skip(f"{tag} is not built (airlock images build --image runner)")
    return tag


def of_job(client: Any, job: str) -> list[Any]:
    return list(client.containers.list(all=True, filters={"label": f"{LABEL_JOB}={job}"}))


async def test_a_resume_removes_the_jobs_running_sandbox_and_confirms_it_gone(
    image: str, state_dir: Path, docker_client: Any
) -> None:
    import docker

    sandbox = DockerBackend(image=image, state_dir=state_dir, sweep=False)
    agent = bash_agent("sleep 60", defaults=TurnConfig(max_duration=90_000))
    request = SandboxRequest.compile(agent, TurnInput.new("go"), EnvironmentSpec(), job="j-docker-resume")
    turn = asyncio.create_task(sandbox.run(request))
    try:
        deadline = time.monotonic() + 60
        while not [c for c in of_job(docker_client, "j-docker-resume") if c.status == "running"]:
            assert time.monotonic() < deadline, "the job's sandbox never ran"
            assert not turn.done(), turn
            await asyncio.sleep(0.1)
        [previous] = of_job(docker_client, "j-docker-resume")
        await sandbox.ensure_gone("j-docker-resume")
        with pytest.raises(docker.errors.NotFound):
            docker_client.containers.get(previous.id)
        assert of_job(docker_client, "j-docker-resume") == []
    finally:
        turn.cancel()
        with contextlib.suppress(asyncio.CancelledError, EnvError):
            await turn
        assert_none_left(docker_client)


async def test_a_resume_with_no_previous_sandbox_passes(image: str, state_dir: Path) -> None:
    sandbox = DockerBackend(image=image, state_dir=state_dir, sweep=False)
    await sandbox.ensure_gone("j-never-ran")
