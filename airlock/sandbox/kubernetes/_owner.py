"""The controller's owner Lease: what every sandbox object names in its ownerReferences.

A controller process holds one ``coordination.k8s.io/v1`` Lease in the sandbox namespace and
renews it while it has sandboxes running. Every pod, Secret and NetworkPolicy it creates names
the Lease as its owner, so:

* deleting the Lease makes the cluster's garbage collector delete everything of that
  controller (``ownerReferences`` cascade, no airlock code involved);
* a crashed controller stops renewing; once ``renewTime + leaseDurationSeconds`` has passed,
  the reaper (the next controller's start-up sweep, ``airlock gc --backend kubernetes``)
  deletes the Lease and whatever of it remains.

A Lease and not the controller's own Pod: owners must live in the dependents' namespace,
and the controller usually runs in another one (or outside the cluster).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
from datetime import UTC, datetime, timedelta
from typing import Any

from ._api import ApiFailure, KubeApi
from ._names import LABEL_MANAGED, LABEL_ROLE, MANAGED_BY, Owner

__all__ = ["OwnerLease", "lease_expired", "micro_time"]

#: The role label value of an owner Lease.
OWNER_ROLE = "owner"


def micro_time(when: datetime) -> str:
    """A ``MicroTime`` as the API writes it (RFC 3339, microseconds, ``Z``)."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_expired(lease: dict[str, Any], now: datetime | None = None) -> bool:
    """Whether ``lease`` was last renewed longer ago than its duration (or never)."""
    spec = lease.get("spec") or {}
    renewed = spec.get("renewTime") or spec.get("acquireTime")
    if not renewed:
        return True
    try:
        at = datetime.fromisoformat(str(renewed).replace("Z", "+00:00"))
    except ValueError:
        return True
    seconds = int(spec.get("leaseDurationSeconds") or 0)
    return (now or datetime.now(UTC)) > at + timedelta(seconds=seconds)


class OwnerLease:
    """This process's owner Lease in ``namespace``: created on first use, renewed while in use."""

    def __init__(self, api: KubeApi, namespace: str, seconds: int) -> None:
        self.api = api
        self.namespace = namespace
        self.seconds = seconds
        self.name = f"airlock-owner-{secrets.token_hex(6)}"
        self.holder = f"{socket.gethostname()}/{os.getpid()}"
        self._owner: Owner | None = None
        self._renewed = datetime.min.replace(tzinfo=UTC)
        self._lock = asyncio.Lock()
        self._users = 0
        self._renewer: asyncio.Task[None] | None = None

    async def acquire(self) -> Owner:
        """The Lease (created or renewed now), renewed in the background until :meth:`release`.

        Raises:
            ApiFailure: the Lease cannot be created or renewed.
        """
        async with self._lock:
            owner = await self._ensure()
            self._users += 1
            if self._renewer is None:
                self._renewer = asyncio.create_task(self._renew_loop(), name=f"renew {self.name}")
            return owner

    async def release(self) -> None:
        """One user fewer; the last stops the renewals (the Lease then expires on its own)."""
        async with self._lock:
            self._users -= 1
            if self._users == 0 and self._renewer is not None:
                self._renewer.cancel()
                self._renewer = None

    async def _ensure(self) -> Owner:
        now = datetime.now(UTC)
        if self._owner is not None and now - self._renewed < timedelta(seconds=self.seconds / 3):
            return self._owner
        body = self._body(now)
        if self._owner is None:
            created = await self.api.call(self.api.coordination.create_namespaced_lease, self.namespace, body)
        else:
            try:
                created = await self.api.call(
                    self.api.coordination.replace_namespaced_lease, self.name, self.namespace, body
                )
            except ApiFailure as e:
                if e.status != 404:
                    raise
                # Reaped while we were idle (it had expired): a fresh one, under a fresh name.
                self.name = f"airlock-owner-{secrets.token_hex(6)}"
                created = await self.api.call(
                    self.api.coordination.create_namespaced_lease, self.namespace, self._body(now)
                )
        self._owner = Owner(name=self.name, uid=str(created["metadata"]["uid"]))
        self._renewed = now
        return self._owner

    def _body(self, now: datetime) -> dict[str, Any]:
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": {LABEL_MANAGED: MANAGED_BY, LABEL_ROLE: OWNER_ROLE},
            },
            "spec": {
                "holderIdentity": self.holder,
                "leaseDurationSeconds": self.seconds,
                "renewTime": micro_time(now),
            },
        }

    async def _renew_loop(self) -> None:
        while True:
            await asyncio.sleep(self.seconds / 3)
            try:
                async with self._lock:
                    await self._ensure()
            except ApiFailure:
                continue  # the next round retries; sandboxes keep running meanwhile
