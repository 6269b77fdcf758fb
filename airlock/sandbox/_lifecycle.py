"""What every container backend's sandbox does the same way around its own objects.

Provisioning runs shielded, so a cancel mid-create cannot lose track of what was created:
teardown first waits for the create (:func:`settle`), then removes everything. Teardown
itself runs to its end even when cancelled again (:func:`shielded`). An OOM kill inside is
the same ``resource_exceeded`` on every backend (:func:`oom_exceeded`), and a turn whose
channel broke is judged once the sandbox has had time to show how it ended (:data:`SETTLE_S`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from layer0 import EnvError

from ._limits import Limits

__all__ = ["SETTLE_S", "oom_exceeded", "settle", "shielded"]

#: How long a sandbox whose runner's channel broke may take to show how it ended (a dying
#: gVisor kernel, an OOM kill its engine or kubelet reports once the sandbox has gone), before
#: the break counts as the channel's own.
SETTLE_S = 20.0


async def shielded(teardown: Callable[[], Awaitable[None]]) -> None:
    """Run ``teardown()`` to its end even if we are cancelled (again) meanwhile; the
    cancellation is re-raised once it is done."""
    task = asyncio.ensure_future(teardown())
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await task
        raise


async def settle(inflight: asyncio.Future[Any] | None) -> None:
    """Wait for a provisioning step still in flight; its error was raised to the caller
    already, so it is only retrieved here."""
    if inflight is None:
        return
    await asyncio.wait([inflight])
    if not inflight.cancelled():
        inflight.exception()


def oom_exceeded(sandbox_id: str, limits: Limits) -> EnvError:
    """The error of a sandbox whose process was OOM-killed at its memory limit."""
    return EnvError.resource_exceeded(
        f"memory: sandbox {sandbox_id} hit its {limits.memory_bytes / 2**20:.0f}Mi limit "
        "(a process inside was OOM-killed)"
    )
