"""``--exit-with-parent PID``: a runner that outlives the process that started it stops.

The process backend starts each runner in a session of its own (so a turn's end kills the
whole group). When the controller that started it dies without stopping it (a crash, a
SIGKILL), the runner is re-parented, and nothing would stop it: its tools would go on
running while the job resumes in a new runner (side effects twice). The watcher learns of
the parent's exit from a pidfd (Linux 5.3+; elsewhere it looks every :data:`POLL_S`), and
the runner stops with no grace: running turns are cancelled, which kills each tool's whole
process tree, and the runner exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import os

__all__ = ["POLL_S", "watch_parent"]

#: Seconds between two looks at the parent where no pidfd can be had.
POLL_S = 0.2


async def watch_parent(parent: int, gone: asyncio.Event) -> None:
    """Set ``gone`` once ``parent`` has exited (or is no longer this process's parent)."""
    if os.getppid() == parent:
        fd = _pidfd(parent)
        if fd is not None:
            try:
                await _readable(fd)
            finally:
                os.close(fd)
        else:
            while os.getppid() == parent:  # noqa: ASYNC110 - no event exists for it without a pidfd
                await asyncio.sleep(POLL_S)
    gone.set()


def _pidfd(pid: int) -> int | None:
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    with contextlib.suppress(OSError):
        fd: int = opener(pid)
        if os.getppid() == pid:  # opened the parent itself, not a pid reused after its exit
            return fd
        os.close(fd)
    return None


async def _readable(fd: int) -> None:
    """Until ``fd`` (a pidfd) is readable: its process exited."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def woke() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, woke)
    try:
        await ready
    finally:
        loop.remove_reader(fd)
