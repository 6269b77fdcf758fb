"""A long-lived sandbox on real Docker: one container for several jobs, one after another.

The runner image as built (``airlock images build``). Three jobs share the container's
workspace and its runner process; a second job while one runs is refused; the container is
labelled with the session (and its owner, which the reaper looks for), never a job; closing
leaves nothing; a container that is gone is reported as an EnvError after which the session
is torn down.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from airlock.images import runner_image_tag
from airlock.sandbox import LongLivedSandbox
from airlock.sandbox.docker import DockerBackend, reap_orphans
from airlock.sandbox.docker._labels import LABEL_OWNER, LABEL_SESSION
from airlock.sandbox.docker._resume import LABEL_JOB
from layer0 import EnvError, TurnInput
from tests.support.containers import OWNER, assert_clean, assert_none_left, my_containers
from tests.support.sessions import session_request, three_jobs_share_the_box

pytestmark = [pytest.mark.docker, pytest.mark.timeout(180)]


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


async def test_three_jobs_share_one_container_and_close_leaves_nothing(
    image: str, state_dir: Path, docker_client: Any
) -> None:
    backend = DockerBackend(image=image, state_dir=state_dir, sweep=False)
    assert isinstance(backend, LongLivedSandbox)
    session = await backend.open(session_request(), label="sbx-docker-1")
    try:
        [box] = my_containers(docker_client)
        assert box.labels[LABEL_SESSION] == "sbx-docker-1"
        assert box.labels[LABEL_OWNER] == OWNER  # what the reaper finds an orphan by
        assert LABEL_JOB not in box.labels
        await three_jobs_share_the_box(session)
        [still] = my_containers(docker_client)
        assert still.id == box.id
    finally:
        await session.close()
    assert_clean(docker_client, state_dir)
    assert not await session.alive()


async def test_a_lost_container_is_an_env_error_and_nothing_is_left(
    image: str, state_dir: Path, docker_client: Any
) -> None:
    session = await DockerBackend(image=image, state_dir=state_dir, sweep=False).open(
        session_request(), label="sbx-docker-lost"
    )
    try:
        [box] = my_containers(docker_client)
        box.remove(force=True)
        with pytest.raises(EnvError) as lost:
            await session.run(TurnInput.new("job"))
        assert lost.value.kind == "other"
        assert "re-open" in str(lost.value)
        assert not await session.alive()
    finally:
        await session.close()
        assert_none_left(docker_client)


CRASHING_CONTROLLER = textwrap.dedent(
    """
    import asyncio, pathlib, sys
    from airlock.sandbox import SandboxRequest
    from airlock.sandbox.docker import DockerBackend
    from airlock.testing import bash_agent
    from layer0 import EnvironmentSpec, TurnInput

    async def main():
        backend = DockerBackend(image=sys.argv[1], state_dir=pathlib.Path(sys.argv[2]), sweep=False)
        request = SandboxRequest.compile(bash_agent("true"), TurnInput.new("open"), EnvironmentSpec())
        await backend.open(request, label="sbx-orphan")
        print("ready", flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main())
    """
)


async def test_a_crashed_controllers_session_box_is_reaped(
    image: str, state_dir: Path, docker_client: Any
) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CRASHING_CONTROLLER, image, str(state_dir), stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 90)
        assert line.strip() == b"ready"
        owner = f"{LABEL_OWNER}={os.uname().nodename}:{proc.pid}"
        [orphan] = docker_client.containers.list(all=True, filters={"label": owner})
        assert orphan.labels[LABEL_SESSION] == "sbx-orphan"
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    report = await asyncio.to_thread(reap_orphans, docker_client, state_dir)
    assert len(report.containers) == 1
    assert docker_client.containers.list(all=True, filters={"label": owner}) == []
    assert await asyncio.to_thread(lambda: list(state_dir.iterdir())) == []
