"""Project-wide test configuration.

Tests marked ``docker`` need a running Docker engine. Where none is reachable they
are skipped with the reason — unless ``AIRLOCK_REQUIRE_DOCKER=1`` (set by CI), in
which case they fail: CI must never pass by skipping the real sandbox tests. The same
holds for gVisor: the ``isolation`` fixture runs Docker tests under runc and under gVisor;
without gVisor registered the gVisor runs skip, unless ``AIRLOCK_REQUIRE_GVISOR=1`` (CI).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from airlock.images import CONTROLLER, RUNNER, build_image
from tests.support.containers import docker_available, require_isolation


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    needs_docker = [item for item in items if item.get_closest_marker("docker")]
    if not needs_docker or docker_available():
        return
    if os.environ.get("AIRLOCK_REQUIRE_DOCKER") == "1":
        raise pytest.UsageError(
            "AIRLOCK_REQUIRE_DOCKER=1 but no Docker engine is reachable (docker info failed)"
        )
    skip = pytest.mark.skip(reason="no Docker engine reachable (docker info failed); start dockerd to run")
    for item in needs_docker:
        item.add_marker(skip)


@pytest.fixture(params=["container", "gvisor"])
def isolation(request: pytest.FixtureRequest) -> str:
    """The boundary a Docker test's sandboxes run behind: runc, then gVisor (runsc)."""
    kind = str(request.param)
    require_isolation(kind)
    return kind


@pytest.fixture(scope="session")
def runner_image() -> str:
    """The runner image, built (or found current) once per session."""
    return asyncio.run(build_image(RUNNER)).tag


@pytest.fixture(scope="session")
def controller_image() -> str:
    """The controller image, built (or found current) once per session."""
    return asyncio.run(build_image(CONTROLLER)).tag


@pytest.fixture(scope="session")
def docker_client() -> Any:
    import docker

    return docker.from_env()
