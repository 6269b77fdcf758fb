"""The runner's second line against escaped tool processes: it adopts and kills orphans.

Each bash call runs under its own supervisor (``_supervisor.py``), which kills the call's
whole tree. Tool code runs as the same uid and can SIGKILL its supervisor, though. A
process that called :func:`adopt_orphans` is a child subreaper, so the tree of a killed
supervisor is re-parented to it; :func:`reap_orphans`, run after every bash call, then
SIGKILLs and reaps each child of this process that is not a live supervisor registered with
:func:`spawn` (asyncio's child watcher only reaps the pids it started, so these would
otherwise stay zombies). Without :func:`adopt_orphans` (tools embedded in another program,
e.g. the tests) nothing is swept: that program's other children are not ours to kill.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
import weakref
from typing import Any

from ._supervisor import children_of, set_child_subreaper

__all__ = ["adopt_orphans", "reap_orphans", "spawn"]

#: How long one sweep waits for the processes it killed to be reaped.
_REAP_S = 5.0

_adopting = False
#: Supervisors of bash calls still running: never swept.
_live: set[int] = set()
#: Spawning and sweeping exclude each other: between the fork and the registration of a new
#: supervisor, a sweep would take it for an orphan. One lock per event loop.
_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()


def adopt_orphans() -> None:
    """Make this process a child subreaper and sweep orphans after each bash call.

    Raises:
        OSError: the kernel refused ``PR_SET_CHILD_SUBREAPER``.
    """
    global _adopting
    set_child_subreaper()
    _adopting = True


def _lock() -> asyncio.Lock:
    loop = asyncio.get_running_loop()
    lock = _locks.get(loop)
    if lock is None:
        lock = _locks[loop] = asyncio.Lock()
    return lock


async def spawn(*args: str, **kwargs: Any) -> asyncio.subprocess.Process:
    """``asyncio.create_subprocess_exec`` for a supervisor, registered as live until
    :func:`reap_orphans` is called with its pid."""
    async with _lock():
        proc = await asyncio.create_subprocess_exec(*args, **kwargs)
        _live.add(proc.pid)
    return proc


async def reap_orphans(finished: int | None = None) -> list[int]:
    """Forget the supervisor ``finished``; when adopting, SIGKILL and reap every other child
    of this process that is not a live supervisor, until none is left. The pids killed."""
    if finished is not None:
        _live.discard(finished)
    if not _adopting:
        return []
    me = os.getpid()
    killed: list[int] = []
    async with _lock():
        while orphans := [pid for pid in children_of(me) if pid not in _live]:
            for pid in orphans:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            killed += orphans
            if not await _reap(orphans):
                break  # stuck (uninterruptible sleep): the next sweep retries
    return killed


def _reaped(pid: int) -> bool:
    """Reap ``pid`` if it has ended (``WNOHANG``: never blocks); whether it is gone."""
    try:
        return os.waitpid(pid, os.WNOHANG)[0] != 0
    except ChildProcessError:  # not ours (any more)
        return True


async def _reap(pids: list[int]) -> bool:
    """Reap the SIGKILLed ``pids`` (WNOHANG polling: never block the loop); False if some
    were still there after a while."""
    pending = set(pids)
    deadline = time.monotonic() + _REAP_S
    while True:
        pending = {pid for pid in pending if not _reaped(pid)}
        if not pending:
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.005)
