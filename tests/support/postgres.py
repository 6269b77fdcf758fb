"""A real PostgreSQL 15 for the tests: one server per session (testcontainers' ``PostgresContainer``
on the offline-built ``airlock-test-postgres:15``, see :mod:`tests.support.postgres_image`) and a
fresh, empty database per test.

testcontainers' reaper cannot run here (its image cannot be pulled), so it is disabled before
testcontainers is imported, and the server's container is removed at session end; it is labelled
``airlock.test-postgres=<host>:<pid>`` so a later run removes what a killed run left behind.

The server runs with ``fsync=off``, ``synchronous_commit=off`` and ``full_page_writes=off``: the
tests' data is thrown away, and these make every commit and ``CREATE DATABASE`` much cheaper. A
test about durability across a crash must start its own server without them
(``start_server(durable=True)``).

Without a Docker engine or the image the fixtures skip, saying which is missing; with
``AIRLOCK_REQUIRE_DOCKER=1`` (CI) they fail instead.
"""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NoReturn
from urllib.parse import quote

import pytest

from tests.support.containers import docker_available
from tests.support.postgres_image import TAG

# Before testcontainers is imported anywhere: its reaper's image cannot be pulled here.
os.environ["TESTCONTAINERS_RYUK_DISABLED"] = "true"

LABEL = "airlock.test-postgres"
#: This test process, as the label's value.
OWNER = f"{socket.gethostname()}:{os.getpid()}"
USER = PASSWORD = "test"
#: Durability off: the data of a test server is thrown away (see the module docstring).
FAST = ("-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")


@dataclass(frozen=True)
class PostgresServer:
    """A running server: where it listens and the superuser's credentials."""

    container: Any
    host: str
    port: int
    user: str = USER
    password: str = PASSWORD

    def dsn(self, database: str = "test") -> str:
        """``postgresql://user:password@host:port/database``."""
        auth = f"{quote(self.user, safe='')}:{quote(self.password, safe='')}"
        return f"postgresql://{auth}@{self.host}:{self.port}/{quote(database, safe='')}"


def unavailable(reason: str) -> NoReturn:
    """Skip, or fail under ``AIRLOCK_REQUIRE_DOCKER=1`` (CI must not pass by skipping)."""
    if os.environ.get("AIRLOCK_REQUIRE_DOCKER") == "1":
        pytest.fail(f"AIRLOCK_REQUIRE_DOCKER=1 but {reason}")
    pytest.skip(reason)


def require_image(client: Any) -> None:
    """Skip (or fail) unless the image exists."""
    from docker.errors import ImageNotFound

    with contextlib.suppress(ImageNotFound):
        client.images.get(TAG)
        return
    # Outside the except clause: the reason alone, not the engine's 404 chained to it.
    unavailable(f"image {TAG} is missing; build it with: python -m tests.support.postgres_image")


def remove_leftovers(client: Any) -> list[str]:
    """Remove the servers of this host's test runs whose process is gone; their names."""
    host = socket.gethostname()
    removed = []
    for container in client.containers.list(all=True, filters={"label": LABEL}):
        owner_host, _, pid = container.labels.get(LABEL, "").rpartition(":")
        if owner_host == host and pid.isdigit() and not _alive(int(pid)):
            container.remove(force=True)
            removed.append(container.name)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start_server(*, durable: bool = False) -> PostgresServer:
    """Start a server (the caller stops it: ``server.container.stop()``); skip when it cannot run.

    ``durable=False`` turns off fsync, synchronous commit and full-page writes (faster; a crash
    loses data).
    """
    if not docker_available():
        unavailable("no Docker engine reachable (docker info failed); start dockerd to run")
    import docker
    from testcontainers.community.postgres import PostgresContainer

    client = docker.from_env()
    require_image(client)
    remove_leftovers(client)
    container = PostgresContainer(
        TAG, username=USER, password=PASSWORD, dbname="test", driver=None, labels={LABEL: OWNER}
    )
    container.ports["5432"] = ("127.0.0.1", None)  # the host's loopback only, a free port
    if not durable:
        container.with_command(list(FAST))
    try:
        container.start()
    except BaseException:
        container.stop()
        raise
    return PostgresServer(container, "127.0.0.1", int(container.get_exposed_port(5432)))


def session_server() -> Iterator[PostgresServer]:
    """The session fixture's body: a server for the whole run, removed at its end."""
    server = start_server()
    try:
        yield server
    finally:
        server.container.stop()


def fresh_database(server: PostgresServer) -> Iterator[str]:
    """A new empty database on ``server`` for one test: its DSN; dropped afterwards (even when
    the test left connections open)."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(server.dsn("postgres"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield server.dsn(name)
    finally:
        with (
            contextlib.suppress(psycopg.OperationalError),
            psycopg.connect(server.dsn("postgres"), autocommit=True) as conn,
        ):
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
