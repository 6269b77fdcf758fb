"""KeyStore: API keys in SQLite or PostgreSQL, stored as salted hashes, verified in microseconds.

Each operation is written once (a generator of SQL statements, ``airlock.state``) and runs on
either database: ``KeyStore(path, roles)`` keeps its own SQLite file; ``KeyStore.on(db, roles)``
uses a PostgreSQL database that several controllers share.

A verified key is cached in memory for ``cache_ttl_s`` (≤ 5 s): a call costs a SHA-256 and a
dict lookup. A revocation through this store takes effect on the very next call (it drops the
cached entry); a revocation by another store on the same database (replicas) takes effect
within the TTL. ``last_used`` is written at most once per key per ``last_used_every_s``, in a
task the call does not wait for (the store's listings and ``aclose`` wait for it).

A key is stored as SHA-256 over a 16-byte salt and its secret, never as text. The secret is 256
random bits, so no slow KDF is needed: guessing it from the hash is as hopeless as guessing it,
and a KDF would cost milliseconds per RPC (the target for all of authentication is ≤ 0.3 ms).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Self, TypeVar

from airlock.state import DatabaseError, Op, PostgresDatabase, Row, execute, fetch_all, fetch_one

from ._errors import InvalidKeyRequest, KeyNotFound, KeyStoreError, Unauthenticated
from ._key_record import (
    COLUMNS,
    ApiKeyRecord,
    digest,
    key_text,
    new_key,
    parse_key,
    record_of,
    ts,
)
from ._key_tables import KeyTables, PostgresKeyTables, SqliteKeyTables
from ._roles import RoleBook
from ._settings import NAME_PATTERN

T = TypeVar("T")

_log = logging.getLogger("airlock.identity")
_NAME = re.compile(NAME_PATTERN)
#: The one answer to every refused key: it never tells whether the key exists.
INVALID_KEY = "invalid or expired API key"
#: Ids known not to exist, remembered (so a repeated unknown id answers as fast as a known one).
_MAX_MISSES = 4096

_Records = list[ApiKeyRecord]  # ``list`` is shadowed by the method of that name


@dataclass(frozen=True)
class _Cached:
    record: ApiKeyRecord
    salt: bytes
    hash: bytes
    until: float


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _revoke(key_id: str, by: str, now: float | None) -> Op[Row | None]:
    yield from execute(
        "UPDATE api_keys SET revoked_at = ?, revoked_by = ? WHERE id = ? AND revoked_at IS NULL",
        now,
        by,
        key_id,
    )
    return (yield from fetch_one(f"SELECT {COLUMNS} FROM api_keys WHERE id = ?", key_id))


class KeyStore:
    """API keys of principals in one database: ``KeyStore(path, roles)`` in its own SQLite file
    (0600; ``user_version`` = schema version), ``KeyStore.on(db, roles)`` in PostgreSQL.

    Use as ``async with KeyStore(path, roles) as keys:``. ``clock`` gives the time keys expire
    against and ``last_used`` records (tests inject one).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        roles: RoleBook,
        *,
        clock: Callable[[], datetime] = _utcnow,
        cache_ttl_s: float = 5.0,
        last_used_every_s: float = 60.0,
    ) -> None:
        self._setup(SqliteKeyTables(path), roles, clock, cache_ttl_s, last_used_every_s)

    @classmethod
    def on(
        cls,
        db: PostgresDatabase,
        roles: RoleBook,
        *,
        clock: Callable[[], datetime] = _utcnow,
        cache_ttl_s: float = 5.0,
        last_used_every_s: float = 60.0,
    ) -> Self:
        """The keys in PostgreSQL ``db`` (opened and closed by the caller; the table is created
        or upgraded on entry, component ``keys`` of ``airlock_schema``)."""
        store = cls.__new__(cls)
        store._setup(PostgresKeyTables(db), roles, clock, cache_ttl_s, last_used_every_s)
        return store

    def _setup(
        self,
        tables: KeyTables,
        roles: RoleBook,
        clock: Callable[[], datetime],
        cache_ttl_s: float,
        last_used_every_s: float,
    ) -> None:
        if not 0 <= cache_ttl_s <= 5:
            raise ValueError("cache_ttl_s must be within 0..5 seconds")
        self._tables = tables
        self._roles = roles
        self._clock = clock
        self._ttl = cache_ttl_s
        self._touch_every = last_used_every_s
        self._closed = False
        self._cache: dict[str, _Cached] = {}
        self._misses: dict[str, float] = {}
        self._touched: dict[str, datetime] = {}
        self._pending: set[asyncio.Task[None]] = set()
        self._revocations = 0
        # An unknown id still costs one digest and one comparison, as a known one does.
        self._decoy = (os.urandom(16), os.urandom(32))

    @property
    def where(self) -> str:
        """The database, as messages name it (never a password)."""
        return self._tables.db.where

    async def __aenter__(self) -> Self:
        await self._tables.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Wait for the pending ``last_used`` writes, then let the database go (idempotent)."""
        if self._closed:
            return
        await self._settled()
        self._closed = True
        await self._tables.close()

    async def _settled(self) -> None:
        """Wait for the ``last_used`` writes queued so far (their failures are only logged)."""
        while self._pending:  # a verify meanwhile may queue another
            await asyncio.gather(*self._pending, return_exceptions=True)

    async def _run(self, op: Op[T]) -> T:
        if self._closed:
            op.close()
            raise KeyStoreError(f"key store {self.where} is closed")
        try:
            return await self._tables.db.transact(op)
        except DatabaseError as e:
            raise KeyStoreError(f"key store: {e}") from e

    # --- administration ------------------------------------------------------------------

    async def create(
        self,
        name: str,
        tenant: str,
        roles: Sequence[str],
        *,
        created_by: str,
        expires_at: datetime | None,
    ) -> tuple[ApiKeyRecord, str]:
        """A new key for principal ``name`` of ``tenant`` holding ``roles``: its record and
        its whole text (shown once: only a salted hash of the secret is stored).

        Raises:
            InvalidKeyRequest: a bad name or tenant, no role or an unknown one, an expiry
                that is naive or already past.
        """
        wanted = tuple(dict.fromkeys(roles))
        self._check(name, tenant, wanted, expires_at)
        key_id, secret = new_key()
        salt = os.urandom(16)
        record = ApiKeyRecord(
            id=key_id,
            name=name,
            tenant=tenant,
            roles=wanted,
            created_at=self._clock(),
            created_by=created_by,
            expires_at=expires_at,
        )
        row = (key_id, name, tenant, json.dumps(wanted), salt, digest(salt, secret))
        times = (ts(record.created_at), created_by, ts(expires_at))
        await self._run(
            execute(
                "INSERT INTO api_keys (id, name, tenant, roles, salt, hash, created_at, created_by, "
                "expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                *row,
                *times,
            )
        )
        self._misses.pop(key_id, None)
        return record, key_text(key_id, secret)

    def _check(self, name: str, tenant: str, roles: tuple[str, ...], expires_at: datetime | None) -> None:
        for what, value in (("name", name), ("tenant", tenant)):
            if not _NAME.fullmatch(value):
                raise InvalidKeyRequest(
                    f"{what} {value!r} must be 1-64 lowercase letters, digits, '.', '_' or '-', "
                    "starting and ending with a letter or digit"
                )
        if not roles:
            raise InvalidKeyRequest(
                f"a key needs at least one role; known roles: {sorted(self._roles.names)}"
            )
        unknown = self._roles.unknown(roles)
        if unknown:
            raise InvalidKeyRequest(f"unknown role(s) {unknown}; known roles: {sorted(self._roles.names)}")
        if expires_at is not None and expires_at.tzinfo is None:
            raise InvalidKeyRequest("expires_at must carry a time zone")
        if expires_at is not None and expires_at <= self._clock():
            raise InvalidKeyRequest(f"expires_at {expires_at.isoformat()} is already past")

    async def list(self, tenant: str | None = None, include_revoked: bool = False) -> _Records:
        """The keys (of ``tenant`` when given), oldest first; revoked ones only if asked."""
        where, args = [], []
        if tenant is not None:
            where.append("tenant = ?")
            args.append(tenant)
        if not include_revoked:
            where.append("revoked_at IS NULL")
        sql = f"SELECT {COLUMNS} FROM api_keys"
        sql += f" WHERE {' AND '.join(where)}" if where else ""
        await self._settled()  # the last uses recorded so far
        rows = await self._run(fetch_all(sql + " ORDER BY created_at, rowid", *args))
        return [record_of(r) for r in rows]

    async def revoke(self, key_id: str, by: str) -> ApiKeyRecord:
        """Revoke key ``key_id`` (from the next call on; a revoked key stays revoked).

        Raises:
            KeyNotFound: no key has this id.
        """
        now = ts(self._clock())
        self._revocations += 1
        self._cache.pop(key_id, None)
        await self._settled()
        row = await self._run(_revoke(key_id, by, now))
        self._cache.pop(key_id, None)  # a verify that read the row before the update
        if row is None:
            raise KeyNotFound(key_id)
        return record_of(row)

    # --- the hot path ----------------------------------------------------------------------

    async def verify(self, text: str) -> ApiKeyRecord:
        """The record of the key whose whole text is ``text``.

        Raises:
            Unauthenticated: one message whether the text is malformed, the id unknown, the
                secret wrong, or the key revoked or expired (it never tells which).
            KeyStoreError: the database cannot be read (not the caller's fault).
        """
        parsed = parse_key(text)
        key_id, secret = parsed if parsed is not None else ("", text[:128])
        found = await self._lookup(key_id) if parsed is not None else None
        salt, expected = (found.salt, found.hash) if found is not None else self._decoy
        matches = hmac.compare_digest(digest(salt, secret), expected)
        now = self._clock()
        if found is None or not matches or not found.record.usable_at(now):
            raise Unauthenticated(INVALID_KEY)
        self._touch(key_id, now)
        return found.record

    async def _lookup(self, key_id: str) -> _Cached | None:
        """The cached entry of ``key_id``, read again once its TTL has passed."""
        clock = time.monotonic()
        cached = self._cache.get(key_id)
        if cached is not None and clock < cached.until:
            return cached
        missed = self._misses.get(key_id)
        if missed is not None and clock < missed:
            return None
        generation = self._revocations
        row = await self._run(fetch_one(f"SELECT {COLUMNS}, salt, hash FROM api_keys WHERE id = ?", key_id))
        if row is None:
            if len(self._misses) >= _MAX_MISSES:
                self._misses.clear()
            self._misses[key_id] = clock + self._ttl
            return None
        entry = _Cached(record_of(row), bytes(row["salt"]), bytes(row["hash"]), clock + self._ttl)
        if generation == self._revocations:  # no revocation ran meanwhile: the row is current
            self._cache[key_id] = entry
        return entry

    def _touch(self, key_id: str, now: datetime) -> None:
        """Record ``last_used`` at most once per ``last_used_every_s`` per key, in a task the
        call does not wait for (a failure is only logged)."""
        last = self._touched.get(key_id)
        if self._closed:
            return
        if last is not None and (now - last).total_seconds() < self._touch_every:
            return
        self._touched[key_id] = now
        write = execute("UPDATE api_keys SET last_used = ? WHERE id = ?", ts(now), key_id)
        task = asyncio.create_task(self._run(write), name="airlock-key-last-used")
        self._pending.add(task)
        task.add_done_callback(self._touched_done)

    def _touched_done(self, task: asyncio.Task[None]) -> None:
        self._pending.discard(task)
        if not task.cancelled() and task.exception() is not None:
            _log.warning("cannot record a key's last use: %s", task.exception())
