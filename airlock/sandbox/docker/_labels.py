"""Labels on every sandbox object, and who owns it (for the reaper)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache

LABEL_SANDBOX = "airlock.sandbox"
LABEL_OWNER = "airlock.owner"
LABEL_CREATED_AT = "airlock.created-at"
#: The long-lived sandbox (session) a box serves, instead of a job; it carries the owner
#: labels too, so the reaper removes it once its controller is gone.
LABEL_SESSION = "airlock.session"
#: The owner process's start time (clock ticks since boot): tells a live owner from a reused pid.
LABEL_OWNER_START = "airlock.owner-start"


@dataclass(frozen=True)
class Owner:
    """A controller process: ``hostname:pid`` plus its start time."""

    host: str
    pid: int
    start: str

    @property
    def ident(self) -> str:
        """``hostname:pid``."""
        return f"{self.host}:{self.pid}"

    @classmethod
    def parse(cls, ident: str, start: str = "") -> Owner | None:
        """From ``hostname:pid`` (None when malformed)."""
        host, _, pid = ident.rpartition(":")
        if not host or not pid.isdigit():
            return None
        return cls(host, int(pid), start)


def process_start(pid: int) -> str | None:
    """Start time of ``pid`` in clock ticks since boot (None: no such process)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ")".
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


@cache
def current_owner() -> Owner:
    """This process as an owner."""
    return Owner(socket.gethostname(), os.getpid(), process_start(os.getpid()) or "")


def owner_labels(sandbox_id: str, owner: Owner | None = None) -> dict[str, str]:
    """The labels every object of sandbox ``sandbox_id`` carries."""
    who = owner or current_owner()
    return {
        LABEL_SANDBOX: sandbox_id,
        LABEL_OWNER: who.ident,
        LABEL_OWNER_START: who.start,
        LABEL_CREATED_AT: datetime.now(UTC).isoformat(timespec="seconds"),
    }


def owner_is_gone(owner: Owner, *, hostname: str | None = None) -> bool:
    """True when ``owner`` ran on this host and that process no longer exists.

    A different host can't be checked from here: its objects are never reaped by this test.
    A live pid with a different start time is a reused pid: the owner is gone.
    """
    if owner.host != (hostname or socket.gethostname()):
        return False
    start = process_start(owner.pid)
    if start is None:
        return True
    return bool(owner.start) and start != owner.start
