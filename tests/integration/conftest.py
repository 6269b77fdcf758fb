"""Fixtures for tests against the real Docker engine.

The runner image is built once per session with the offline builder (a no-op when an
image built from these very sources exists). Each test gets its own state directory, and
after each test no container owned by this process may remain: tests touch only the
sandboxes they start themselves.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airlock.sandbox.docker import DockerEnvironment, DockerSettings
from tests.support.containers import assert_none_left


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
