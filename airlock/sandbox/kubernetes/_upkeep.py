"""The backend's sweep while it is in use: what dead controllers left, every lease period.

From the first use of a backend (:meth:`Upkeep.start`) until it is closed
(:meth:`Upkeep.aclose`), the namespace is swept every lease period for what dead controllers
left (:func:`~._reaper.reap_with`, this controller's own Lease spared even when it expired
while idle), so a crashed controller's sandboxes go about one lease period after its Lease
expired, not only when a controller starts. (A predecessor of the same identity is retired
at once, when the owner Lease is first taken: see :mod:`._owner`.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ._api import KubeApi
from ._owner import OwnerLease
from ._reaper import reap_with
from ._settings import KubernetesSettings

__all__ = ["Upkeep"]

_log = logging.getLogger("airlock.sandbox.kubernetes")


class Upkeep:
    """A sweep every ``every`` seconds until closed."""

    def __init__(self, api: KubeApi, settings: KubernetesSettings, lease: OwnerLease, every: float) -> None:
        self.api = api
        self.settings = settings
        self.lease = lease
        self.every = every
        #: How many periodic sweeps have run.
        self.sweeps = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the periodic sweep (once)."""
        if self._task is None:
            self._task = asyncio.create_task(self._sweep_loop(), name=f"sweep {self.settings.namespace}")

    async def aclose(self) -> None:
        """Stop the periodic sweep (a sweep under way is cancelled)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _sweep_loop(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            try:
                report = await reap_with(self.api, self.settings, keep=frozenset({self.lease.name}))
            except Exception:  # a sweep's failure must not end the sweeping
                _log.exception("sweeping %s failed", self.settings.namespace)
                continue
            self.sweeps += 1
            if report.removed:
                _log.info("removed leftovers of dead controllers: %s", report.summary())
            for error in report.errors:
                _log.warning("sweep of %s: %s", self.settings.namespace, error)
