"""Copies of the job store: one made before every schema upgrade, and restoring one.

An upgrade rewrites the store in place, and an older controller refuses a store newer than
itself: without a copy, rolling the controller back (``helm rollback``) after an upgrade
that changed the schema would leave it refusing to start. So before upgrading a store that
holds anything, :func:`backup_before_upgrade` copies it, consistently (SQLite's online
backup), to ``<store>.schema-v<N>-<UTC time>.bak`` beside it, private like the store.
:func:`restore` puts such a copy back (what ``airlock store restore`` runs, with the
controller stopped): jobs recorded since the copy are lost, which the command says first.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

__all__ = [
    "JOB_STORE",
    "StoreBackup",
    "backup_before_upgrade",
    "backup_store",
    "backups",
    "copy_store",
    "restore",
    "restore_store",
]

#: The job store's file name in a data dir.
JOB_STORE = "jobs.db"

_NAME = re.compile(r"^(?P<store>.+)\.schema-v(?P<version>\d+)-(?P<time>\d{8}T\d{6}Z)\.bak$")
_SIDE_FILES = ("-wal", "-shm", "-journal")
#: How the copies' names spell their time.
_STAMP = "%Y%m%dT%H%M%SZ"


@dataclass(frozen=True)
class StoreBackup:
    """One copy of a store: where, the schema version it holds, when it was made."""

    path: Path
    version: int
    made_at: datetime


def copy_store(conn: sqlite3.Connection, target: Path) -> Path:
    """A consistent copy of ``conn``'s database at ``target`` (mode 0600; never overwritten)."""
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    copy = sqlite3.connect(target)
    try:
        conn.backup(copy)
    finally:
        copy.close()
    return target


def _stamp() -> str:
    """Now, as the copies' names spell it (UTC, to the second)."""
    return datetime.now(UTC).strftime(_STAMP)


def backup_before_upgrade(conn: sqlite3.Connection, store: Path) -> Path:
    """Copy the store beside it (before it is upgraded, or when asked), named after the
    schema version the copy holds (read from the copy: another process may have upgraded it
    meanwhile)."""
    stamp = _stamp()
    partial = copy_store(conn, store.with_name(f"{store.name}.copying-{stamp}"))
    with contextlib.closing(sqlite3.connect(partial)) as copy:
        version = int(copy.execute("PRAGMA user_version").fetchone()[0])
    return partial.rename(store.with_name(f"{store.name}.schema-v{version}-{stamp}.bak"))


def backups(store: Path) -> list[StoreBackup]:
    """The copies made before upgrades of ``store``, newest first."""
    found = []
    for path in store.parent.glob(f"{store.name}.schema-v*.bak"):
        match = _NAME.match(path.name)
        if match and match["store"] == store.name:
            made = datetime.strptime(match["time"], _STAMP).replace(tzinfo=UTC)
            found.append(StoreBackup(path, int(match["version"]), made))
    return sorted(found, key=lambda b: b.made_at, reverse=True)


def restore(store: Path, backup: Path, *, version: int) -> Path | None:
    """Replace ``store`` by ``backup`` (the controller must be stopped). The backup must be a
    store this code can open (schema ``version`` or older); the replaced file is kept as
    ``<store>.replaced-<time>`` (returned; None when there was none) so nothing is lost by a
    wrong choice.

    Raises:
        ValueError: ``backup`` is not a job store, or is newer than ``version``.
    """
    source = sqlite3.connect(f"file:{backup}?mode=ro", uri=True)
    with contextlib.closing(source):
        try:
            found = int(source.execute("PRAGMA user_version").fetchone()[0])
            source.execute("SELECT count(*) FROM jobs").fetchone()
        except sqlite3.Error as e:
            raise ValueError(f"{backup} is not a job store: {e}") from None
        if found > version:
            raise ValueError(f"{backup} holds schema version {found}, newer than this airlock's ({version})")
        kept = store.with_name(f"{store.name}.replaced-{_stamp()}")
        replaced = store.exists()
        if replaced:
            store.rename(kept)
        for suffix in _SIDE_FILES:
            side = store.with_name(store.name + suffix)
            if side.exists():
                side.rename(kept.with_name(kept.name + suffix))
        copy_store(source, store)
    return kept if replaced else None


def backup_store(data_dir: Path, target: Path | None = None) -> Path:
    """A consistent copy of ``data_dir``'s job store (while a controller runs, too) at
    ``target`` (default: beside it, named like an upgrade's copy)."""
    store = data_dir / JOB_STORE
    if not store.exists():
        raise ValueError(f"no job store at {store}")
    with contextlib.closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as conn:
        return copy_store(conn, target) if target is not None else backup_before_upgrade(conn, store)


def restore_store(data_dir: Path, backup: Path) -> Path:
    """Put ``backup`` (a path, or a name beside the store) back as ``data_dir``'s job store;
    where the replaced store was kept."""
    from ._migrate import SCHEMA_VERSION

    store = data_dir / JOB_STORE
    chosen = backup if backup.is_absolute() or backup.exists() else store.with_name(backup.name)
    if not chosen.exists():
        raise ValueError(f"no backup at {chosen}")
    return restore(store, chosen, version=SCHEMA_VERSION) or store
