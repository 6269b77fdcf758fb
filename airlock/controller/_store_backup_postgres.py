"""Backing up a PostgreSQL store (jobs, state, API keys) to one SQLite file, and restoring one.

``airlock store backup --store DSN`` copies every airlock table consistently while replicas
run; ``airlock store restore --store DSN FILE`` loads a copy back, with every controller
stopped: a replica whose heartbeat is recent refuses it (unless forced).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from airlock.identity import KEY_TABLES
from airlock.state import STATE_TABLES, Op, backup_postgres, fetch_all, fetch_one, restore_postgres

from ._store_postgres import JOB_TABLES

#: Every component's tables, in the order a backup copies them.
COMPONENTS = (JOB_TABLES, STATE_TABLES, KEY_TABLES)
#: A replica whose heartbeat is younger than this is running (``airlock serve --lease``'s default).
LIVE_S = 15.0


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


async def backup_postgres_store(dsn: str, target: Path | None = None) -> Path:
    """A consistent copy of the store in ``dsn`` at ``target`` (default: ``airlock-store-TIME.bak``
    in the working directory; 0600, never overwritten).

    Raises:
        DatabaseError: the database cannot be read.
        OSError: ``target`` exists or cannot be written.
    """
    return await backup_postgres(dsn, target or Path(f"airlock-store-{_stamp()}.bak"), COMPONENTS)


def live_replicas(now: float, live_s: float = LIVE_S) -> Op[None]:
    """Refuse while a replica's heartbeat is younger than ``live_s``.

    Raises:
        ValueError: naming the replicas.
    """
    found = yield from fetch_one("SELECT to_regclass('replicas') IS NOT NULL")
    if found is None or not found[0]:
        return
    rows = yield from fetch_all(
        "SELECT id, address, heartbeat_at FROM replicas WHERE heartbeat_at > ? ORDER BY id", now - live_s
    )
    if rows:
        named = ", ".join(
            f"{r['id']} ({r['address'] or 'no address'}, "
            f"heartbeat {max(now - r['heartbeat_at'], 0):.0f} s ago)"
            for r in rows
        )
        raise ValueError(f"controller replica(s) still running: {named}; stop every controller first")


async def restore_postgres_store(
    dsn: str, backup: Path, *, replace: bool = False, force: bool = False
) -> Path | None:
    """Load ``backup`` into the store in ``dsn`` (every controller stopped, unless ``force``).
    A store holding records is refused unless ``replace``: they are copied first to
    ``<backup>.replaced-TIME`` (returned; None when nothing was replaced).

    Raises:
        ValueError: a replica runs, ``backup`` is no store backup or is newer than this airlock.
        DatabaseError: the store holds records (without ``replace``), or cannot be written.
        OSError: the copy of the replaced records cannot be written.
    """
    kept = backup.with_name(f"{backup.name}.replaced-{_stamp()}") if replace else None
    guard = None if force else (lambda: live_replicas(time.time()))
    return await restore_postgres(dsn, backup, COMPONENTS, replace=kept, guard=guard)
