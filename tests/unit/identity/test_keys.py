"""KeyStore: keys hashed at rest, one refusal for every bad key, revocation, expiry, last_used."""

from __future__ import annotations

import sqlite3
import stat
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

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


class Clock:
    """A settable wall clock."""

    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def store(tmp_path: Path, clock: Clock) -> AsyncIterator[KeyStore]:
    roles = RoleBook({"team-a-submit": RoleDefinition(grants=("submitter",), agents=("a-*",))})
    async with KeyStore(tmp_path / "keys.db", roles, clock=clock) as keys:
        yield keys


def holding(folder: Path, needle: bytes) -> list[Path]:
    """The files under ``folder`` whose bytes contain ``needle`` (the database, its WAL, ...)."""
    return [f for f in folder.rglob("*") if f.is_file() and needle in f.read_bytes()]


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
    assert verified.id == record.id
    principal = verified.principal()
    assert (principal.name, principal.tenant, principal.roles, principal.method, principal.key_id) == (
        "alice",
        "team-a",
        ("team-a-submit",),
        "key",
        record.id,
    )


async def test_the_secret_is_nowhere_at_rest(store: KeyStore, tmp_path: Path) -> None:
    _, text = await store.create("alice", "team-a", ["viewer"], created_by="admin", expires_at=None)
    await store.verify(text)  # and a last_used write
    await store.list()  # after the queued write
    secret = text[16:]  # after "ak_<12 hex>_"
    await store.aclose()
    assert holding(tmp_path, secret.encode()) == []
    assert holding(tmp_path, text.encode()) == []
    with sqlite3.connect(tmp_path / "keys.db") as conn:
        for row in conn.execute("SELECT * FROM api_keys"):
            assert not any(isinstance(v, str) and secret in v for v in row), row
            assert not any(isinstance(v, bytes) and secret.encode() in v for v in row), row
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    assert stat.S_IMODE((tmp_path / "keys.db").stat().st_mode) == 0o600


async def test_every_bad_key_gets_the_same_answer(store: KeyStore) -> None:
    record, text = await store.create("alice", "team-a", ["viewer"], created_by="admin", expires_at=None)
    wrong_secret = f"ak_{record.id}_{'x' * 43}"
    unknown_id = f"ak_{'0' * 12}_{text[16:]}"
    texts = (wrong_secret, unknown_id, "ak_nope", "", "garbage", unknown_id, text + "\n", " " + text)
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


async def test_another_stores_revocation_takes_effect_within_the_ttl(tmp_path: Path, clock: Clock) -> None:
    async with (
        KeyStore(tmp_path / "k.db", RoleBook(), clock=clock, cache_ttl_s=0) as replica,
        KeyStore(tmp_path / "k.db", RoleBook(), clock=clock) as admin,
    ):
        record, text = await admin.create("bob", "t", ["viewer"], created_by="admin", expires_at=None)
        await replica.verify(text)
        await admin.revoke(record.id, "admin")
        await refusal(replica, text)  # a TTL of 0: read again at once


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


@pytest.mark.parametrize(
    ("name", "tenant", "roles", "needle"),
    [
        ("Alice", "t", ["viewer"], "name 'Alice' must be"),
        ("alice", "t/x", ["viewer"], "tenant 't/x' must be"),
        ("alice\n", "t", ["viewer"], "name 'alice\\n' must be"),
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


async def test_an_expiry_must_be_aware_and_ahead(store: KeyStore, clock: Clock) -> None:
    with pytest.raises(InvalidKeyRequest, match="time zone"):
        await store.create("a", "t", ["viewer"], created_by="x", expires_at=datetime(2031, 1, 1))
    with pytest.raises(InvalidKeyRequest, match="already past"):
        await store.create("a", "t", ["viewer"], created_by="x", expires_at=clock.now)


async def test_keys_are_listed_by_tenant(store: KeyStore) -> None:
    a, _ = await store.create("alice", "team-a", ["viewer"], created_by="admin", expires_at=None)
    b, _ = await store.create("bob", "team-b", ["viewer"], created_by="admin", expires_at=None)
    assert [k.id for k in await store.list()] == [a.id, b.id]
    assert [k.id for k in await store.list("team-b")] == [b.id]


async def test_a_file_of_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 9")
    with pytest.raises(KeyStoreError, match="schema version 9"):
        async with KeyStore(path, RoleBook()):
            pass
