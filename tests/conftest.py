"""Project-wide test configuration.

Tests marked ``docker`` need a running Docker engine. Where none is reachable they
are skipped with the reason — unless ``AIRLOCK_REQUIRE_DOCKER=1`` (set by CI), in
which case they fail: CI must never pass by skipping the real sandbox tests. The same
holds for gVisor: the ``isolation`` fixture runs Docker tests under runc and under gVisor;
without gVisor registered the gVisor runs skip, unless ``AIRLOCK_REQUIRE_GVISOR=1`` (CI).

A test marked ``attack("<category>")`` (the adversarial suite, tests/adversarial) is filed
under its category; a run that includes any prints the suite's table at the end, and saves
the outcomes where ``AIRLOCK_ADVERSARIAL_REPORT`` says.

PostgreSQL: ``postgres_server`` (one per session) and ``postgres_dsn`` (a fresh database per test),
from tests/support/postgres.py; they skip (or fail, with ``AIRLOCK_REQUIRE_DOCKER=1``) without
Docker or the ``airlock-test-postgres:15`` image.

Docker fixtures: the images are built once per session with the offline builder (a no-op
when images built from these very sources exist); each test gets its own state directory,
and after each test no container owned by this process may remain.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from airlock.images import CONTROLLER, RUNNER, build_image
from airlock.sandbox.docker import DockerEnvironment, DockerSettings
from tests.support import postgres
from tests.support.adversarial import OUTCOMES, REPORT_ENV, Outcome, render, save
from tests.support.containers import assert_none_left, docker_available, require_isolation


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
def postgres_server() -> Iterator[postgres.PostgresServer]:
    """A PostgreSQL 15 server for the session (tests.support.postgres; durability off)."""
    yield from postgres.session_server()


@pytest.fixture
def postgres_dsn(postgres_server: postgres.PostgresServer) -> Iterator[str]:
    """A fresh empty database on the session's server, dropped after the test: its DSN."""
    yield from postgres.fresh_database(postgres_server)


@pytest.fixture(scope="session")
def docker_client() -> Any:
    import docker

    return docker.from_env()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[OUTCOMES] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator[None, Any, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    marker = item.get_closest_marker("attack")
    if marker is None or not (report.when == "call" or (report.when == "setup" and not report.passed)):
        return
    case = item.name.removeprefix("test_")
    if hasattr(report, "wasxfail"):  # a known hole, named in the table with its reason
        found = Outcome(marker.args[0], case, "failed", f"known: {report.wasxfail}")
    elif report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        found = Outcome(marker.args[0], case, "skipped", str(reason).removeprefix("Skipped: "))
    else:
        found = Outcome(marker.args[0], case, "held" if report.passed else "failed")
    item.config.stash.setdefault(OUTCOMES, []).append(found)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    outcomes = config.stash.get(OUTCOMES, [])
    if not outcomes:
        return
    terminalreporter.write_line("")
    terminalreporter.write(render(outcomes))
    if path := os.environ.get(REPORT_ENV):
        save(outcomes, Path(path))


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
