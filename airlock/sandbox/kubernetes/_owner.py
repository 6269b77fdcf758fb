"""The controller's owner Lease: what every sandbox object names in its ownerReferences.

A controller holds one ``coordination.k8s.io/v1`` Lease in the sandbox namespace and renews
it while it has sandboxes running. Every pod, Secret and NetworkPolicy it creates names the
Lease as its owner (label and ownerReference), so:

* deleting the Lease makes the cluster's garbage collector delete everything of that
  controller (``ownerReferences`` cascade, no airlock code involved);
* a crashed controller stops renewing; once ``renewTime + leaseDurationSeconds`` has passed,
  the reaper (every running controller's sweep, each lease period; ``airlock gc --backend
  kubernetes``) deletes the Lease and whatever of it remains.

**Identity.** The Lease's name is derived from the controller's identity
(``backends.kubernetes.owner_identity``; the Helm chart sets it to the release's fullname;
default: this host's name), so a restarted controller finds its predecessor's Lease at once,
without waiting for it to expire. Its ``holderIdentity`` names the process
(``host/pid/random``). When a controller first takes its Lease and finds it held by another
holder (the previous process of the same identity, crashed or stopped), it **retires** it:
it deletes every sandbox object labelled with that owner (pods first, confirmed gone, then
their policies and Secrets), then the Lease, and creates a fresh one. A one-shot command
(``airlock run``) holds a Lease of its own process instead (it resumes no job, and must not
retire a controller running on the same host).

**Two live controllers of one identity** (a misconfiguration: two releases with one
fullname, or a rolling update instead of ``Recreate``): the one starting later retires the
other's Lease and deletes its running sandboxes (their jobs fail as lost); the other, at its
next renewal, recreates the Lease under the same name, and from then on both renew it. Each
controller needs an identity of its own; the chart runs one replica with the ``Recreate``
strategy, so the old pod is gone before the new one starts.

A Lease and not the controller's own Pod: owners must live in the dependents' namespace,
and the controller usually runs in another one (or outside the cluster).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import re
import secrets
import socket
from datetime import UTC, datetime, timedelta
from typing import Any

from layer0 import EnvError

from ._api import ApiFailure, KubeApi
from ._names import LABEL_MANAGED, LABEL_ROLE, MANAGED_BY, Owner
from ._removal import retire_owner

__all__ = ["OWNER_ROLE", "OwnerLease", "default_identity", "lease_expired", "lease_name", "micro_time"]

_log = logging.getLogger("airlock.sandbox.kubernetes")

#: The role label value of an owner Lease.
OWNER_ROLE = "owner"
#: This process as a Lease holder: host, pid, and a random part (a restarted container may
#: have the same host name and pid 1 again).
PROCESS_HOLDER = f"{socket.gethostname()}/{os.getpid()}/{secrets.token_hex(4)}"


def default_identity() -> str:
    """The owner identity when none is configured: this host's name."""
    return socket.gethostname()


def lease_name(identity: str) -> str:
    """The owner Lease's name for ``identity``: ``airlock-owner-<slug>-<hash>``, a valid object
    name and label value (at most 63 characters), the same for the same identity."""
    slug = re.sub(r"[^a-z0-9-]+", "-", identity.lower()).strip("-")[:36].strip("-") or "x"
    digest = hashlib.sha256(identity.encode()).hexdigest()[:8]
    return f"airlock-owner-{slug}-{digest}"


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
    """The owner Lease of ``identity`` in ``namespace``: created (a predecessor's retired) on
    first use, renewed while in use.

    Args:
        identity: the controller's stable identity (None: a Lease of this process alone, under
            a random name, for a one-shot command).
        holder: who holds it (default: this process).
    """

    def __init__(
        self,
        api: KubeApi,
        namespace: str,
        seconds: int,
        identity: str | None = None,
        holder: str = PROCESS_HOLDER,
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.seconds = seconds
        self.stable = identity is not None
        self.name = lease_name(identity) if identity is not None else f"airlock-owner-{secrets.token_hex(6)}"
        self.holder = holder
        self._owner: Owner | None = None
        self._renewed = datetime.min.replace(tzinfo=UTC)
        self._lock = asyncio.Lock()
        self._users = 0
        self._renewer: asyncio.Task[None] | None = None
        #: What retiring a predecessor's Lease removed (``(kind, name)``), once it happened.
        self.retired: list[tuple[str, str]] = []

    async def acquire(self) -> Owner:
        """The Lease (created or renewed now), renewed in the background until :meth:`release`.

        Raises:
            ApiFailure: the Lease cannot be created or renewed.
            EnvError: ``provision_failed`` when a predecessor's sandboxes cannot all be removed.
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
        if self._owner is None:
            created = await self._first(now)
        else:
            try:
                created = await self.api.call(
                    self.api.coordination.replace_namespaced_lease, self.name, self.namespace, self._body(now)
                )
            except ApiFailure as e:
                if e.status != 404:
                    raise
                # Reaped while we were idle (it had expired): a fresh one (of a stable identity,
                # perhaps created meanwhile by another backend of this process: then adopted).
                if not self.stable:
                    self.name = f"airlock-owner-{secrets.token_hex(6)}"
                created = await self._first(now)
        self._owner = Owner(name=self.name, uid=str(created["metadata"]["uid"]))
        self._renewed = now
        return self._owner

    async def _first(self, now: datetime) -> dict[str, Any]:
        """The Lease created; one of this identity already there is adopted when this process
        holds it (another sandbox backend of the same controller), else retired first.

        Raises:
            ApiFailure: the Lease cannot be listed, created or replaced.
            EnvError: ``provision_failed`` when a predecessor's sandboxes cannot all be removed.
        """
        try:
            return await self._create(now)
        except ApiFailure as e:
            if e.status != 409 or not self.stable:
                raise
        found = await self._read()
        holder = (found.get("spec") or {}).get("holderIdentity")
        if not found:  # removed meanwhile (it had expired): nothing to retire
            return await self._create(now)
        if holder == self.holder:
            adopted: dict[str, Any] = await self.api.call(
                self.api.coordination.replace_namespaced_lease, self.name, self.namespace, self._body(now)
            )
            return adopted
        retired = await retire_owner(self.api, self.namespace, self.name)
        if retired.errors:
            raise EnvError.provision_failed(
                f"the owner Lease {self.name} is held by {holder} (a previous controller of this "
                "identity, or another one configured with it); its sandboxes could not all be "
                f"removed, so none is started: {'; '.join(retired.errors)}"
            )
        self.retired = retired.removed
        _log.warning(
            "owner Lease %s was held by %s (a previous controller of this identity): retired it "
            "and removed %d of its objects",
            self.name,
            holder,
            len(retired.removed),
        )
        return await self._create(now)

    async def _create(self, now: datetime) -> dict[str, Any]:
        created: dict[str, Any] = await self.api.call(
            self.api.coordination.create_namespaced_lease, self.namespace, self._body(now)
        )
        return created

    async def _read(self) -> dict[str, Any]:
        """The Lease as stored, through the ``list`` the reaper also uses (no ``get`` needed);
        an empty one when it went meanwhile."""
        selector = f"{LABEL_MANAGED}={MANAGED_BY},{LABEL_ROLE}={OWNER_ROLE}"
        found = await self.api.call(
            self.api.coordination.list_namespaced_lease, self.namespace, label_selector=selector
        )
        named = [o for o in found.get("items") or [] if (o.get("metadata") or {}).get("name") == self.name]
        return named[0] if named else {}

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
