"""The tests' PostgreSQL: a real 15.x server from the offline-built Debian image, a fresh empty
database per test, run as non-root, no dpkg database in the image."""

from __future__ import annotations

import psycopg
import pytest

from tests.support.postgres import LABEL, OWNER, PostgresServer, fresh_database

pytestmark = pytest.mark.docker

#: The database each test of this module got (two tests must not share one).
SEEN: list[str] = []


async def tables(dsn: str) -> list[str]:
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        cur = await conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        return [row[0] for row in await cur.fetchall()]


async def test_the_server_is_postgresql_15(postgres_dsn: str) -> None:
    async with await psycopg.AsyncConnection.connect(postgres_dsn) as conn:
        cur = await conn.execute("SELECT version(), current_setting('server_version_num')::int")
        version, number = await cur.fetchone() or ("", 0)
    assert version.startswith("PostgreSQL 15.") and 150000 <= number < 160000


async def test_the_session_server_runs_with_durability_off(postgres_dsn: str) -> None:
    async with await psycopg.AsyncConnection.connect(postgres_dsn) as conn:
        settings = {}
        for name in ("fsync", "synchronous_commit", "full_page_writes", "password_encryption"):
            cur = await conn.execute(f"SHOW {name}")
            settings[name] = ((await cur.fetchone()) or ("",))[0]
    assert settings == {
        "fsync": "off",
        "synchronous_commit": "off",
        "full_page_writes": "off",
        "password_encryption": "scram-sha-256",
    }


@pytest.mark.parametrize("run", [1, 2])
async def test_each_test_gets_a_fresh_empty_database(postgres_dsn: str, run: int) -> None:
    assert await tables(postgres_dsn) == []
    async with await psycopg.AsyncConnection.connect(postgres_dsn) as conn:
        await conn.execute("CREATE TABLE marker (n int)")
        await conn.commit()
        cur = await conn.execute("SELECT current_database()")
        row = await cur.fetchone()
    assert row is not None and row[0] not in SEEN
    SEEN.append(row[0])
    assert await tables(postgres_dsn) == ["marker"]


def test_the_database_is_dropped_after_its_test(postgres_server: PostgresServer) -> None:
    databases = fresh_database(postgres_server)
    dsn = next(databases)
    name = dsn.rsplit("/", 1)[1]
    with psycopg.connect(dsn) as left_open:  # a test that leaves a connection open
        left_open.execute("CREATE TABLE t (n int)")
        left_open.commit()
        databases.close()  # the fixture's teardown
    with psycopg.connect(postgres_server.dsn("postgres")) as conn:
        names = {row[0] for row in conn.execute("SELECT datname FROM pg_database").fetchall()}
    assert name.startswith("t_") and name not in names


def exec_in(server: PostgresServer, command: str) -> str:
    result = server.container.get_wrapped_container().exec_run(["sh", "-c", command])
    assert result.exit_code == 0, result.output
    return str(result.output.decode())


def test_the_server_runs_as_non_root(postgres_server: PostgresServer) -> None:
    # PID 1 is postgres itself (the entrypoint execs it); /proc/1 belongs to its uid.
    assert exec_in(postgres_server, "cat /proc/1/comm; stat -c '%u %g %U' /proc/1").split() == [
        "postgres",
        "999",
        "999",
        "postgres",
    ]
    with psycopg.connect(postgres_server.dsn()) as conn:
        row = conn.execute("SELECT current_setting('data_directory')").fetchone()
    assert row == ("/var/lib/postgresql/data",)
    owner = exec_in(postgres_server, "stat -c %u /var/lib/postgresql/data/PG_VERSION")
    assert owner.strip() == "999"


def test_the_image_is_the_debian_package_without_a_dpkg_database(postgres_server: PostgresServer) -> None:
    assert exec_in(postgres_server, "postgres --version").startswith("postgres (PostgreSQL) 15.")
    assert "Debian" in exec_in(postgres_server, "postgres --version")
    no_dpkg_db = "test -e /var/lib/dpkg/status && echo dpkg || echo none"
    assert exec_in(postgres_server, no_dpkg_db).strip() == "none"
    assert exec_in(postgres_server, "command -v apt-get || true").strip() == ""


def test_the_server_is_labelled_for_leftover_removal(postgres_server: PostgresServer) -> None:
    postgres_server.container.get_wrapped_container().reload()
    assert postgres_server.container.get_wrapped_container().labels[LABEL] == OWNER
