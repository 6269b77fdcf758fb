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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airlock.images import CONTROLLER, RUNNER, build_image
from airlock.sandbox.docker import DockerEnvironment, DockerSettings
from tests.support.containers import assert_none_left


@pytest.fixture(scope="session")
def runner_image() -> str:
    report = asyncio.run(build_image(RUNNER))
    return report.tag


@pytest.fixture(scope="session")
def controller_image() -> str:
    """The controller image, built (or found current) once per session."""
    return asyncio.run(build_image(CONTROLLER)).tag


@pytest.fixture(scope="session")
def docker_client() -> Any:
    import docker

    return docker.from_env()


@pytest.fixture
def state_dir() -> Iterator[Path]:
    # Short: a unix socket path must fit in 108 bytes.
    path = Path(f"/tmp/al-{os.getpid()}-{os.urandom(3).hex()}")
    path.mkdir(mode=0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def docker_settings(isolation: str) -> DockerSettings:
    """The Docker backend's settings for this run: every sandbox behind ``isolation``."""
    return DockerSettings(isolation_floor="gvisor" if isolation == "gvisor" else "container")


@pytest.fixture
def env(
    runner_image: str, state_dir: Path, docker_client: Any, docker_settings: DockerSettings
) -> Iterator[DockerEnvironment]:
    yield DockerEnvironment(image=runner_image, state_dir=state_dir, sweep=False, settings=docker_settings)
    assert_none_left(docker_client)  # the environment's teardown must have removed them
