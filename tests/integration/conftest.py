"""Fixtures for tests against the real Docker engine.

The runner image is built once per session with the offline builder (a no-op when an
image built from these very sources exists). Each test gets its own state directory, and
after each test no container owned by this process may remain: tests touch only the
sandboxes they start themselves.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airlock.images import build_runner_image
from airlock.sandbox.docker import DockerEnvironment
from airlock.sandbox.docker._labels import LABEL_OWNER

OWNER = f"{socket.gethostname()}:{os.getpid()}"


@pytest.fixture(scope="session")
def runner_image() -> str:
    report = asyncio.run(build_runner_image())
    return report.tag


@pytest.fixture(scope="session")
def docker_client() -> Any:
    import docker

    return docker.from_env()


def my_containers(client: Any) -> list[Any]:
    """Containers labelled as owned by this test process."""
    return list(client.containers.list(all=True, filters={"label": f"{LABEL_OWNER}={OWNER}"}))


@pytest.fixture
def state_dir() -> Iterator[Path]:
    # Short: a unix socket path must fit in 108 bytes.
    path = Path(f"/tmp/al-{os.getpid()}-{os.urandom(3).hex()}")
    path.mkdir(mode=0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def env(runner_image: str, state_dir: Path, docker_client: Any) -> Iterator[DockerEnvironment]:
    yield DockerEnvironment(image=runner_image, state_dir=state_dir, sweep=False)
    leftovers = my_containers(docker_client)
    for c in leftovers:  # clean up, then fail: teardown must have removed them
        c.remove(force=True)
    assert not leftovers, f"containers left behind: {[c.name for c in leftovers]}"


def assert_clean(client: Any, state_dir: Path) -> None:
    """No container of this process and nothing in the state directory."""
    assert my_containers(client) == []
    assert list(state_dir.iterdir()) == []
