"""The controller's weaves: one per job tree, its turn records written through the StateStore.

Only the controller writes records (from what the runner reports and what the controller
itself decides); the sandbox cannot. Each record is sealed with the controller's audit key
(``audit.key`` in its data directory, 0600, or the file ``--audit-key-file`` names, which
replicas share), so a record rewritten in the database, even with its hash chain recomputed,
fails verification.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import stat
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from airlock.errors import ConfigError
from airlock.weave import (
    EMPTY_STATE,
    AnchorStore,
    ChainReport,
    RecordDraft,
    RecordType,
    TurnRecord,
    Weave,
    WeaveStore,
    anchor_of,
    content_digest,
    folded_state,
    verify,
)
from layer0 import StateStore

#: The audit key's file in the controller's data directory.
AUDIT_KEY_FILE = "audit.key"


def load_or_create_audit_key(path: Path) -> bytes:
    """The controller's audit key (32 random bytes, hex in a 0600 file), created if absent."""
    with contextlib.suppress(FileNotFoundError):
        return bytes.fromhex(path.read_text().strip())
    key = secrets.token_bytes(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key.hex())
    return key


#: An audit key's least length, in bytes (hex: twice as many digits).
AUDIT_KEY_BYTES = 32


def read_audit_key_file(path: Path) -> bytes:
    """The audit key in an existing file (hex, at least 32 bytes), which every replica of a
    controller reads so that each verifies the others' records; never created.

    The file must be private: owned by this user and readable by no one else (0600, 0400), or
    owned by root and readable by its group at most (0640, 0440: a Kubernetes Secret mounted
    for a non-root pod, whose ``fsGroup`` is that group).

    Raises:
        ConfigError: the file is missing, unreadable, not private, not hex or too short.
    """
    try:
        info = path.stat()
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise ConfigError(f"cannot read the audit key file {path}: {reason}") from e
    _check_private(path, info)
    try:
        key = bytes.fromhex(text)
    except ValueError:
        raise ConfigError(f"the audit key file {path} is not hex (make one: openssl rand -hex 32)") from None
    if len(key) < AUDIT_KEY_BYTES:
        raise ConfigError(
            f"the audit key file {path} holds {len(key)} bytes; an audit key is at least "
            f"{AUDIT_KEY_BYTES} (make one: openssl rand -hex 32)"
        )
    return key


def _check_private(path: Path, info: os.stat_result) -> None:
    mode = stat.S_IMODE(info.st_mode)
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"the audit key file {path} is not a regular file")
    allowed = 0o600 if info.st_uid == os.getuid() else 0o640 if info.st_uid == 0 else None
    if allowed is None or mode & ~allowed:
        raise ConfigError(
            f"the audit key file {path} (mode {mode:04o}) is open to others: it must be this user's "
            "with mode 0600 or 0400, or root's with mode 0640 or 0440 (a mounted Secret)"
        )


class Weaves:
    """The weave of each job tree (by its root job), loaded on first use, appended to in order.

    Args:
        state: the StateStore the records are read from (and written through, without ``writer``).
        key: the audit key records are sealed with (None: unsealed).
        writer: the state store as a job writes its records (fenced to the replica holding
            the job: a replica that lost it appends nothing).
        anchors: where each thread's tip is kept outside the chain (the job store), advanced
            just after each append; :meth:`verify` then names a truncated or missing thread.
    """

    def __init__(
        self,
        state: StateStore,
        key: bytes | None = None,
        *,
        writer: Callable[[str], StateStore] | None = None,
        anchors: AnchorStore | None = None,
    ) -> None:
        self.store = WeaveStore(state)
        self.key = key
        self._writer = writer
        self.anchors = anchors
        self._weaves: dict[str, Weave] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def _weave(self, root: str) -> Weave:
        weave = self._weaves.get(root)
        if weave is None:
            records = await self.store.load(root)
            # Another task may have loaded (and appended to) it meanwhile: theirs stays the one,
            # else two copies would each place a record at the same position.
            weave = self._weaves.setdefault(root, Weave(records, key=self.key))
        return weave

    async def record(
        self,
        root: str,
        *,
        job: str,
        agent: str,
        type: RecordType,
        kind: str,
        content: JsonValue = None,
        depends_on: tuple[str, ...] = (),
        pre: str = "",
        post: str = "",
        derive_state: bool = False,
        **usage: Any,
    ) -> TurnRecord:
        """Append one record to ``root``'s weave and persist it (in weave order), then its
        thread's anchor. With ``derive_state`` (a record that reports no state of its own)
        its state hashes are derived: before, its thread's last state; after, that folded
        with its content."""
        lock = self._locks.setdefault(root, asyncio.Lock())
        async with lock:
            weave = await self._weave(root)
            if derive_state:
                thread = weave.job_thread(job)
                pre = (thread[-1].state_hash_post if thread else "") or EMPTY_STATE
                post = folded_state(pre, content_digest(content))
            draft = RecordDraft(
                job=job,
                agent=agent,
                type=type,
                kind=kind,
                depends_on=depends_on,
                state_hash_pre=pre,
                state_hash_post=post,
                content=content,
                time=datetime.now(UTC),
                **usage,
            )
            record = weave.record(draft)
            store = self.store if self._writer is None else WeaveStore(self._writer(job))
            try:
                await store.append(root, record, len(weave) - 1)
            except BaseException:
                self._weaves.pop(root, None)  # it holds a record the store does not: reload
                raise
            if self.anchors is not None:
                await self.anchors.advance(root, anchor_of(root, record, self.key))
            return record

    async def tips(self, root: str, *jobs: str) -> tuple[str, ...]:
        """The ids of the latest record of each job's thread, once each (a record that depends
        on them knots the threads)."""
        weave = await self._weave(root)
        return tuple(dict.fromkeys(thread[-1].id for job in jobs if (thread := weave.job_thread(job))))

    async def cone(self, root: str, record_id: str) -> tuple[list[TurnRecord], int]:
        """``record_id``'s causal cone (itself and what it depends on, linearized) and the
        number of records in the weave."""
        weave = await self._weave(root)
        return weave.cone_of(record_id), len(weave)

    async def thread(self, root: str, job: str) -> list[TurnRecord]:
        """The records of ``job``'s thread so far."""
        return (await self._weave(root)).job_thread(job)

    async def load(self, root: str) -> list[TurnRecord]:
        """Every record of ``root``'s weave, as stored (not the cached copy)."""
        return await self.store.load(root)

    async def verify(self, root: str) -> ChainReport:
        """Check ``root``'s stored records: hash chain, order, dependencies, clocks, (with the
        key) seals and, when anchors are kept and the tree has some (a tree recorded before
        anchors has none), each thread against its anchor."""
        records = await self.store.load(root, gaps=True)
        anchors = await self.anchors.anchors(root) if self.anchors is not None else []
        return verify(records, self.key, anchors=anchors or None, root=root)

    def forget(self, root: str) -> None:
        """Drop the cached weave of a finished job tree (it is reloaded if needed)."""
        self._weaves.pop(root, None)
        self._locks.pop(root, None)

    async def drop(self, root: str) -> int:
        """Delete ``root``'s stored records (its job tree was pruned); how many there were."""
        self.forget(root)
        if self.anchors is not None:
            await self.anchors.drop(root)
        return await self.store.drop(root)
