"""One conformance suite for the API key store, unchanged against SQLite and PostgreSQL.

``KeyStore(path, roles)`` keeps its own SQLite file; ``KeyStore.on(db, roles)`` keeps the keys
in a PostgreSQL database several controllers share. Every test here runs on both through the
``engine`` fixture; the stores a test makes share one database (two of them are two replicas).
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from airlock.identity import (
    InvalidKeyRequest,
    KeyNotFound,
    KeyStore,
    KeyStoreError,
    RoleBook,
    RoleDefinition,
    Unauthenticated,
)
from airlock.state import PostgresDatabase

ROLES = RoleBook({"team-a-submit": RoleDefinition(grants=("submitter",), agents=("a-*",))})


class Clock:
    """A settable wall clock."""

    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


class Place:
    """Where a test's key stores live: one SQLite file or one PostgreSQL database."""

    def __init__(self, engine: str, location: str) -> None:
        self.engine = engine
        self.location = location

    async def open(self, stack: AsyncExitStack, roles: RoleBook = ROLES, **options: Any) -> KeyStore:
        """A new key store on this database, entered on ``stack``."""
        if self.engine == "sqlite":
            return await stack.enter_async_context(KeyStore(self.location, roles, **options))
        db = await stack.enter_async_context(PostgresDatabase(self.location, min_size=1, max_size=4))
        return await stack.enter_async_context(KeyStore.on(db, roles, **options))

    def rows(self) -> list[tuple[Any, ...]]:
        """Every row of the key table, read behind the stores' backs."""
        if self.engine == "sqlite":
            with sqlite3.connect(self.location) as conn:
                return [tuple(r) for r in conn.execute("SELECT * FROM api_keys")]
        import psycopg

        with psycopg.connect(self.location) as conn:
            return [tuple(r) for r in conn.execute("SELECT * FROM api_keys").fetchall()]

    def version(self) -> int:
        """The key tables' schema version as stored."""
        if self.engine == "sqlite":
            with sqlite3.connect(self.location) as conn:
                return int(conn.execute("PRAGMA user_version").fetchone()[0])
        import psycopg

        with psycopg.connect(self.location) as conn:
            row = conn.execute("SELECT version FROM airlock_schema WHERE component = 'keys'").fetchone()
        assert row is not None
        return int(row[0])

    def set_version(self, version: int) -> None:
        """Store the key tables' schema version as a newer airlock would."""
        if self.engine == "sqlite":
            with sqlite3.connect(self.location) as conn:
                conn.execute(f"PRAGMA user_version = {version}")
            return
        import psycopg

        with psycopg.connect(self.location, autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS airlock_schema "
                "(component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
            )
            conn.execute(
                "INSERT INTO airlock_schema VALUES ('keys', %s) "
                "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
                (version,),
            )


Factory = Callable[..., Awaitable[KeyStore]]


@pytest.fixture(params=["sqlite", "postgresql"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Place:
    if request.param == "sqlite":
        return Place("sqlite", str(tmp_path / "keys.db"))
    return Place("postgresql", request.getfixturevalue("postgres_dsn"))


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def make_keys(place: Place, clock: Clock) -> AsyncIterator[Factory]:
    """A factory of key stores that share the test's database (each with its own connections)."""
    async with AsyncExitStack() as stack:

        async def make(**options: Any) -> KeyStore:
            return await place.open(stack, clock=clock, **options)

        yield make


@pytest.fixture
async def store(make_keys: Factory) -> KeyStore:
    return await make_keys()


async def refusal(store: KeyStore, text: str) -> str:
    with pytest.raises(Unauthenticated) as info:
        await store.verify(text)
    return info.value.reason


async def test_a_created_key_verifies_as_its_principal(store: KeyStore) -> None:
    record, text = await store.create(
        "alice", "team-a", ["team-a-submit"], created_by="admin", expires_at=None
    )
    assert text.startswith(f"ak_{record.id}_") and len(record.id) == 12
    verified = await store.verify(text)
    assert verified == record
    principal = verified.principal()
    assert (principal.name, principal.tenant, principal.roles, principal.method, principal.key_id) == (
        "alice",
        "team-a",
        ("team-a-submit",),
        "key",
        record.id,
    )


async def test_the_secret_is_nowhere_at_rest(store: KeyStore, place: Place) -> None:
    _, text = await store.create("alice", "team-a", ["viewer"], created_by="admin", expires_at=None)
    await store.verify(text)  # and a last_used write
    await store.list()  # after the queued write
    secret = text[16:]  # after "ak_<12 hex>_"
    rows = place.rows()
    assert len(rows) == 1
    for row in rows:
        assert not any(isinstance(v, str) and secret in v for v in row), row
        assert not any(isinstance(v, bytes | memoryview) and secret.encode() in bytes(v) for v in row), row
    assert place.version() == 1


async def test_every_bad_key_gets_the_same_answer(store: KeyStore) -> None:
    record, text = await store.create("alice", "team-a", ["viewer"], created_by="admin", expires_at=None)
    wrong_secret = f"ak_{record.id}_{'x' * 43}"
    unknown_id = f"ak_{'0' * 12}_{text[16:]}"
    texts = (wrong_secret, unknown_id, "ak_nope", "", "garbage", unknown_id, text + "\n", " " + text, "ak_☃")
    reasons = {await refusal(store, t) for t in texts}
    assert reasons == {"invalid or expired API key"}
    await store.revoke(record.id, "admin")
    assert await refusal(store, text) == "invalid or expired API key"


async def test_revocation_takes_effect_on_the_next_call(store: KeyStore) -> None:
    record, text = await store.create("alice", "team-a", ["viewer"], created_by="admin", expires_at=None)
    await store.verify(text)  # cached now
    revoked = await store.revoke(record.id, "root")
    assert revoked.revoked_at is not None and revoked.revoked_by == "root"
    await refusal(store, text)
    assert [k.id for k in await store.list()] == []
    assert [k.id for k in await store.list(include_revoked=True)] == [record.id]
    again = await store.revoke(record.id, "someone-else")  # a revoked key stays revoked, as it was
    assert (again.revoked_at, again.revoked_by) == (revoked.revoked_at, "root")


async def test_another_stores_revocation_takes_effect_within_the_ttl(make_keys: Factory) -> None:
    replica = await make_keys(roles=RoleBook(), cache_ttl_s=0)
    admin = await make_keys(roles=RoleBook())
    record, text = await admin.create("bob", "t", ["viewer"], created_by="admin", expires_at=None)
    await replica.verify(text)
    await admin.revoke(record.id, "admin")
    await refusal(replica, text)  # a TTL of 0: read again at once


async def test_two_stores_on_one_database_see_each_others_keys(make_keys: Factory) -> None:
    a, b = await make_keys(), await make_keys()
    first, text = await a.create("alice", "team-a", ["viewer"], created_by="admin", expires_at=None)
    assert (await b.verify(text)).id == first.id
    second, _ = await b.create("bob", "team-b", ["viewer"], created_by="admin", expires_at=None)
    assert [k.id for k in await a.list()] == [first.id, second.id]
    await b.revoke(first.id, "admin")
    assert [k.id for k in await a.list()] == [second.id]


async def test_revoking_an_unknown_key_is_not_found(store: KeyStore) -> None:
    with pytest.raises(KeyNotFound, match="'0123456789ab'"):
        await store.revoke("0123456789ab", "admin")


async def test_a_key_expires(store: KeyStore, clock: Clock) -> None:
    expiry = clock.now + timedelta(hours=1)
    record, text = await store.create("alice", "team-a", ["viewer"], created_by="admin", expires_at=expiry)
    assert record.expires_at == expiry
    await store.verify(text)
    clock.now = expiry
    assert await refusal(store, text) == "invalid or expired API key"


async def test_last_used_is_written_at_most_once_a_minute(store: KeyStore, clock: Clock) -> None:
    _, text = await store.create("alice", "team-a", ["viewer"], created_by="admin", expires_at=None)
    assert (await store.list())[0].last_used is None
    first = clock.now
    await store.verify(text)
    clock.now += timedelta(seconds=30)
    await store.verify(text)
    assert (await store.list())[0].last_used == first  # not the second use: debounced
    clock.now += timedelta(seconds=31)
    await store.verify(text)
    assert (await store.list())[0].last_used == clock.now


async def test_a_last_use_is_recorded_before_the_store_closes(place: Place, clock: Clock) -> None:
    async with AsyncExitStack() as stack:
        store = await place.open(stack, clock=clock)
        _, text = await store.create("alice", "team-a", ["viewer"], created_by="admin", expires_at=None)
        await store.verify(text)
    async with AsyncExitStack() as stack:
        store = await place.open(stack, clock=clock)
        assert (await store.list())[0].last_used == clock.now


@pytest.mark.parametrize(
    ("name", "tenant", "roles", "needle"),
    [
        ("Alice", "t", ["viewer"], "name 'Alice' must be"),
        ("alice", "t/x", ["viewer"], "tenant 't/x' must be"),
        ("alice\n", "t", ["viewer"], "name 'alice\\n' must be"),
        ("älice", "t", ["viewer"], "name 'älice' must be"),
        ("alice", "t", [], "at least one role"),
        ("alice", "t", ["viewer", "superuser"], "unknown role(s) ['superuser']; known roles: ['admin', "),
    ],
)
async def test_a_bad_key_request_is_a_clear_error(
    store: KeyStore, name: str, tenant: str, roles: list[str], needle: str
) -> None:
    with pytest.raises(InvalidKeyRequest) as info:
        await store.create(name, tenant, roles, created_by="admin", expires_at=None)
    assert needle in str(info.value)
    assert await store.list(include_revoked=True) == []


async def test_an_expiry_must_be_aware_and_ahead(store: KeyStore, clock: Clock) -> None:
    with pytest.raises(InvalidKeyRequest, match="time zone"):
        await store.create("a", "t", ["viewer"], created_by="x", expires_at=datetime(2031, 1, 1))
    with pytest.raises(InvalidKeyRequest, match="already past"):
        await store.create("a", "t", ["viewer"], created_by="x", expires_at=clock.now)


async def test_keys_are_listed_by_tenant_in_creation_order(store: KeyStore) -> None:
    a, _ = await store.create("alice", "team-a", ["viewer"], created_by="admin", expires_at=None)
    b, _ = await store.create("bob", "team-b", ["viewer"], created_by="admin", expires_at=None)
    c, _ = await store.create("carol", "team-a", ["viewer"], created_by="admin", expires_at=None)
    assert [k.id for k in await store.list()] == [a.id, b.id, c.id]  # one instant: insertion order
    assert [k.id for k in await store.list("team-b")] == [b.id]
    assert [k.id for k in await store.list("team-a")] == [a.id, c.id]


async def test_unicode_text_and_times_round_trip(store: KeyStore, clock: Clock) -> None:
    clock.now = datetime(2030, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)
    expiry = clock.now + timedelta(days=3, microseconds=7)
    record, text = await store.create(
        "alice",
        "team-a",
        ["viewer", "team-a-submit"],
        created_by="ädmin ☃ 日本 \U0001f600",
        expires_at=expiry,
    )
    (listed,) = await store.list()
    assert listed == record == await store.verify(text)
    assert listed.created_by == "ädmin ☃ 日本 \U0001f600" and listed.expires_at == expiry
    assert listed.roles == ("viewer", "team-a-submit")
    revoked = await store.revoke(record.id, "rööt ✓")
    assert revoked.revoked_by == "rööt ✓" and revoked.revoked_at == clock.now


async def test_a_closed_store_raises(place: Place) -> None:
    async with AsyncExitStack() as stack:
        store = await place.open(stack)
    await store.aclose()  # again: idempotent
    with pytest.raises(KeyStoreError, match="closed"):
        await store.list()


async def test_tables_of_a_newer_schema_are_refused(place: Place) -> None:
    async with AsyncExitStack() as stack:
        await place.open(stack)
    place.set_version(9)
    with pytest.raises(KeyStoreError, match="schema version 9; this airlock reads up to 1"):
        async with AsyncExitStack() as stack:
            await place.open(stack)


async def test_a_new_database_with_a_newer_schema_is_refused(place: Place) -> None:
    place.set_version(9)  # before any store made the table
    with pytest.raises(KeyStoreError, match="schema version 9"):
        async with AsyncExitStack() as stack:
            await place.open(stack)
