"""Membership: this controller among the replicas sharing its store.

It joins (adopting the jobs of replicas that died, and of a controller that stopped before
this one started), renews its lease every third of it, lets go of the jobs it no longer holds
(adopted by another replica while this one was paused or cut off, or cancelled through another
replica), and looks every second for replicas whose lease ran out, adopting their jobs. With one
SQLite file there is one controller: every other replica recorded is dead at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from ._claims import Adopted
from ._store import JobStore
from ._store_rows import JobStoreError

_log = logging.getLogger("airlock.controller")

#: How often a replica looks for others whose lease ran out (a third of the lease if shorter),
#: so a dead replica's jobs are adopted within about this of its lease's end.
WATCH_S = 1.0

#: Receives the jobs adopted and the replicas they were adopted from (none: an earlier
#: controller's, found at start).
Adopt = Callable[[Sequence[Adopted], Sequence[str]], Awaitable[None]]
#: Receives the jobs this replica lost (its runs there stop without writing).
LetGo = Callable[[Sequence[str]], None]


class Membership:
    """Joins, renews the lease, adopts the dead's jobs, lets go of lost ones.

    Args:
        store: the shared job store (its ``claims`` are this replica's).
        lease_s: how long a replica that stopped renewing still holds its jobs.
        adopt: recovers adopted jobs (resumed or interrupted, sandboxes reaped).
        let_go: stops the local runs of lost jobs without writing.
    """

    def __init__(self, store: JobStore, lease_s: float, *, adopt: Adopt, let_go: LetGo) -> None:
        self._store = store
        self.lease_s = lease_s
        self._adopt = adopt
        self._let_go = let_go
        self._address = ""
        self._task: asyncio.Task[None] | None = None

    @property
    def replica(self) -> str:
        """This replica's id."""
        return self._store.claims.replica

    async def join(self, address: str = "") -> None:
        """Register, then adopt the jobs of dead replicas and of none (an earlier controller)."""
        self._address = address
        await self._store.register(address)
        dead = await self._store.dead_replicas(self.lease_s)
        adopted = await self._store.adopt(dead, orphans=True)
        if adopted:
            await self._adopt(adopted, dead)

    def start(self) -> None:
        """Start renewing the lease."""
        self._task = asyncio.create_task(self._renew(), name="airlock-membership")

    async def leave(self, *, hand_over: bool = False) -> None:
        """Stop renewing and leave (the caller released what it held). With ``hand_over``, the
        jobs it still holds are left to the others: its lease is ended, so the next of them to
        renew adopts them (or the next start, alone on the store)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        with contextlib.suppress(JobStoreError):
            await (self._store.end_lease() if hand_over else self._store.leave())

    async def _renew(self) -> None:
        renew_every = self.lease_s / 3
        renewed = time.monotonic()
        while True:
            await asyncio.sleep(min(renew_every, WATCH_S))
            renewing = time.monotonic() - renewed >= renew_every * 0.99
            try:
                if renewing:
                    renewed = time.monotonic()
                    await self.tick()
                else:
                    await self.watch()
            except JobStoreError as e:
                _log.warning("replica %s: cannot renew its lease: %s", self.replica, e)
            except Exception:
                _log.exception("replica %s: renewing its lease failed", self.replica)

    async def tick(self) -> None:
        """One renewal: heartbeat, lost claims, dead replicas."""
        if not await self._store.heartbeat():
            held = list(self._store.claims.held())
            self._store.claims.lose(held)
            _log.error(
                "replica %s was declared dead by another (its lease ran out): letting go of %d job(s)",
                self.replica, len(held),
            )  # fmt: skip
            self._let_go(held)
            await self._store.register(self._address)
        lost = await self._store.lost_claims()
        if lost:
            _log.warning("replica %s no longer holds %s: letting go", self.replica, ", ".join(lost))
            self._let_go(lost)
        await self.watch()

    async def watch(self) -> None:
        """Adopt the jobs of every other replica whose lease ran out."""
        dead = await self._store.dead_replicas(self.lease_s)
        if dead:
            adopted = await self._store.adopt(dead)
            _log.warning(
                "replica(s) %s stopped renewing their lease: adopted %d job(s)", ", ".join(dead), len(adopted)
            )
            await self._adopt(adopted, dead)
