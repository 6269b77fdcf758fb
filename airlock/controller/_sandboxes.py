"""KeptSandboxes: long-lived sandboxes, one box kept for several jobs run one after another.

A sandbox is created for an agent and fixed to it: its box is provisioned with the agent's
policy as it is then, and the agent's spec digest is recorded; a job for another agent, or for
the agent once its configuration changed, is refused. Jobs submitted to a sandbox run in its
box one after another (a per-sandbox lock), in the same workspace. Each job's workspace
snapshots (its agent's ``durability.workspace``) become the sandbox's manifest when it ends.

:meth:`~KeptSandboxes.pause` snapshots the idle box's whole workspace into the blob store and
removes the box; :meth:`~KeptSandboxes.resume` (or the next job) opens a fresh box, restored
from that snapshot before its first job's turn. A box found lost, or one a job failed in, is
closed; the next job opens a fresh one from the last snapshot. A sandbox idle longer than its
TTL is removed by the sweep. After a controller restart every sandbox is paused (its box went
with the process that held it). The boxes live in this process: with replicas sharing a store
a job could be claimed by a replica that does not hold its box, so creating one is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airlock.errors import AirlockError
from airlock.jobs import Job, SandboxInfo, utcnow
from airlock.policy import EMPTY_MANIFEST, WorkspaceBlob, WorkspaceSnapshot, WorkspaceStopped
from layer0 import EnvError

from . import _store_sandboxes as rows
from ._job_workspace import KeptWorkspace
from ._workspace_intake import WorkspaceIntake

if TYPE_CHECKING:
    from airlock.config import AgentConfig
    from airlock.sandbox import LongLivedBox

    from ._blobs import BlobStore
    from ._execute import AgentRunner
    from ._store import JobStore

__all__ = ["BoxLease", "KeptSandboxes", "SandboxNotFound", "SandboxRefused", "spec_digest"]

_log = logging.getLogger("airlock.controller")

#: How often idle sandboxes are looked for (seconds).
SWEEP_S = 5.0
#: The workspace cap of a pause's snapshot when the agent sets none smaller.
PAUSE_MAX_BYTES = 1 << 30


class SandboxNotFound(AirlockError):
    """No such sandbox (or another tenant's)."""


class SandboxRefused(AirlockError):
    """The sandbox cannot do that (another agent's, a changed agent, no blob store, replicas)."""


def spec_digest(agent: AgentConfig) -> str:
    """The digest of everything an agent's box is made from (its spec, environment, backend,
    routes, placement, effects): a sandbox is fixed to it at creation."""
    text = agent.model_dump_json(exclude={"source", "line"})
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _same_agent(info: SandboxInfo, agent: AgentConfig) -> None:
    """``agent`` is configured as it was when the sandbox was created (else SandboxRefused)."""
    if info.spec_digest != spec_digest(agent):
        raise SandboxRefused(
            f"sandbox {info.id} was fixed to agent {agent.name} as configured at its creation, "
            "and the agent's configuration changed since: create a new sandbox"
        )


@dataclass
class _Held:
    """What this process holds of one sandbox: its lock and its box."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    box: LongLivedBox[Any] | None = None
    #: The box was just opened: its first job restores the workspace.
    fresh: bool = False


@dataclass
class BoxLease:
    """A job's hold on a sandbox's box while it runs (see :meth:`KeptSandboxes.lease`)."""

    box: LongLivedBox[Any]
    workspace: KeptWorkspace
    #: The manifest the job's last snapshot made ("": none), kept as the sandbox's at the end.
    digest: str = ""


class KeptSandboxes:
    """The long-lived sandboxes of this controller.

    Args:
        store: the job store (its ``sandboxes`` rows, manifests and blob rows).
        runner: opens the boxes.
        blobs: where paused workspaces' files go (None: sandboxes cannot be created).
        replica: this controller's replica id (recorded as the holder).
        shared: the store is shared by replicas (sandboxes are refused).
        sweep_s: how often idle sandboxes are looked for.
    """

    def __init__(
        self,
        store: JobStore,
        runner: AgentRunner,
        blobs: BlobStore | None,
        replica: str,
        *,
        shared: bool,
        sweep_s: float = SWEEP_S,
    ) -> None:
        self._store, self._runner, self._blobs = store, runner, blobs
        self._replica, self._shared, self._sweep_s = replica, shared, sweep_s
        self._held: dict[str, _Held] = {}
        self._sweeper: asyncio.Task[None] | None = None

    # -- the API ---------------------------------------------------------------------------

    async def create(
        self, agent_name: str, *, ttl_s: float | None, tenant: str, owner: str | None
    ) -> SandboxInfo:
        """A new sandbox of ``agent_name`` with its box started.

        Raises:
            ConfigError: unknown agent.
            SandboxRefused: no blob store, replicas, or a non-positive TTL.
            EnvError: the box could not be provisioned (nothing is recorded).
        """
        agent = self._runner.agent(agent_name)
        if self._blobs is None:
            raise SandboxRefused(
                "a long-lived sandbox keeps its workspace in the blob store, and this controller "
                "has none (airlock serve --blob-store)"
            )
        if self._shared:
            raise SandboxRefused(
                "long-lived sandboxes need a single controller: with replicas sharing the store, a "
                "job could be claimed by a replica that does not hold the sandbox's box"
            )
        if ttl_s is not None and ttl_s <= 0:
            raise SandboxRefused(f"a sandbox's TTL must be positive, got {ttl_s:g} s")
        sandbox_id = "sbx-" + secrets.token_hex(8)
        held = self._held[sandbox_id] = _Held()
        async with held.lock:
            try:
                held.box = await self._runner.open_box(agent, label=sandbox_id, ttl=None)
            except BaseException:
                self._held.pop(sandbox_id, None)
                raise
            now = utcnow()
            info = SandboxInfo(
                id=sandbox_id,
                agent=agent.name,
                tenant=tenant,
                owner=owner,
                state="running",
                ttl_s=ttl_s,
                created_at=now,
                last_used_at=now,
                spec_digest=spec_digest(agent),
            )
            try:
                await self._store.run(rows.insert(info, self._replica))
            except BaseException:
                await self._close(sandbox_id)
                self._held.pop(sandbox_id, None)
                raise
        return info

    async def get(self, sandbox_id: str, tenant: str | None) -> SandboxInfo:
        """The sandbox (``tenant``: it must be that tenant's; None: any).

        Raises:
            SandboxNotFound: unknown, or another tenant's.
        """
        info = await self._store.run(rows.get(sandbox_id))
        if info is None or (tenant is not None and info.tenant != tenant):
            raise SandboxNotFound(f"no sandbox {sandbox_id}")
        return info

    async def listed(self, tenant: str | None) -> list[SandboxInfo]:
        """The tenant's sandboxes (None: every tenant's), newest first."""
        return await self._store.run(rows.listed(tenant))

    async def admit(self, sandbox_id: str, agent: AgentConfig, tenant: str) -> SandboxInfo:
        """The sandbox, once it is checked that a job of ``agent`` for ``tenant`` may run in it.

        Raises:
            SandboxNotFound: unknown, or another tenant's.
            SandboxRefused: another agent's, or the agent changed since the sandbox's creation.
        """
        info = await self.get(sandbox_id, tenant)
        if info.agent != agent.name:
            raise SandboxRefused(f"sandbox {sandbox_id} runs agent {info.agent}'s jobs, not {agent.name}'s")
        _same_agent(info, agent)
        return info

    async def pause(self, sandbox_id: str, tenant: str | None) -> SandboxInfo:
        """Snapshot the workspace (after the job running in it), then remove the box.

        Raises:
            SandboxNotFound: unknown, or another tenant's.
            WorkspaceViolation: the box sent a snapshot no well-behaved runner sends.
        """
        info = await self.get(sandbox_id, tenant)
        held = self._held.setdefault(sandbox_id, _Held())
        async with held.lock:
            manifest = await self._snapshot(info, held)
            await self._close(sandbox_id)
            await self._store.run(rows.update(sandbox_id, state="paused", manifest=manifest))
        return await self.get(sandbox_id, tenant)

    async def resume(self, sandbox_id: str, tenant: str | None) -> SandboxInfo:
        """Open a fresh box (a running one is kept); its first job's workspace is restored
        from the last snapshot.

        Raises:
            SandboxNotFound: unknown, or another tenant's.
            SandboxRefused: the agent changed since the sandbox's creation.
            EnvError: the box could not be provisioned (the sandbox stays paused).
        """
        info = await self.get(sandbox_id, tenant)
        held = self._held.setdefault(sandbox_id, _Held())
        async with held.lock:
            await self._open(info, held)
        return await self.get(sandbox_id, tenant)

    async def remove(self, sandbox_id: str, tenant: str | None) -> SandboxInfo:
        """Remove the box (after the job running in it) and forget the sandbox; its
        snapshot's blobs go once nothing else names them.

        Raises:
            SandboxNotFound: unknown, or another tenant's.
        """
        info = await self.get(sandbox_id, tenant)
        held = self._held.setdefault(sandbox_id, _Held())
        async with held.lock:
            await self._close(sandbox_id)
            await self._store.run(rows.delete(sandbox_id))
        self._held.pop(sandbox_id, None)
        return info

    @contextlib.asynccontextmanager
    async def lease(self, job: Job, agent: AgentConfig) -> AsyncIterator[BoxLease]:
        """Hold ``job``'s sandbox for its execution (after the jobs before it): its box, open
        (a fresh one when none is, or it was lost), and the workspace it starts with. When
        the job ends, its last snapshot becomes the sandbox's; a job that failed leaves the
        box closed (the next one restores the last snapshot into a fresh box).

        Raises:
            EnvError: ``provision_failed`` when the sandbox is gone or no longer the agent's;
                else as the box's provisioning.
        """
        assert job.sandbox is not None
        held = self._held.setdefault(job.sandbox, _Held())
        async with held.lock:
            try:
                info = await self.admit(job.sandbox, agent, job.tenant)
            except (SandboxNotFound, SandboxRefused) as e:
                raise EnvError.provision_failed(f"job {job.id}: {e}") from e
            if held.box is not None and not await held.box.alive():
                await self._close(job.sandbox)
            if held.box is None:
                await self._open(info, held)
            assert held.box is not None
            lease = BoxLease(held.box, KeptWorkspace(info.manifest, held.fresh))
            await self._store.run(rows.update(job.sandbox, used=True))
            try:
                yield lease
            except BaseException:
                await self._close(job.sandbox)
                raise
            finally:
                held.fresh = False  # restored by now, or closed
                await self._store.run(rows.update(job.sandbox, manifest=lease.digest or None))

    # -- life ------------------------------------------------------------------------------

    async def recover(self) -> None:
        """At start: every running sandbox is paused (the process that held its box is gone,
        and its box with it: reaped as an orphan)."""
        for info in await self.listed(None):
            if info.state == "running" and info.id not in self._held:
                await self._store.run(rows.update(info.id, state="paused", used=False))

    def start(self) -> None:
        """Start the sweep of idle sandboxes."""
        if self._sweeper is None:
            self._sweeper = asyncio.create_task(self._sweep())

    async def expire(self, now: float | None = None) -> list[str]:
        """Remove the sandboxes idle past their TTL (not one a job holds); their ids."""
        removed = []
        for sandbox_id in await self._store.run(rows.idle(now if now is not None else time.time())):
            held = self._held.get(sandbox_id)
            if held is not None and held.lock.locked():
                continue
            with contextlib.suppress(SandboxNotFound):
                await self.remove(sandbox_id, None)
                removed.append(sandbox_id)
                _log.info("sandbox %s: removed, idle past its TTL", sandbox_id)
        return removed

    async def aclose(self) -> None:
        """Stop the sweep; pause every open box (its workspace snapshotted, the box removed)."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
            self._sweeper = None
        for sandbox_id, held in list(self._held.items()):
            if held.box is None:
                continue
            try:
                await self.pause(sandbox_id, None)
            except Exception:
                _log.exception("sandbox %s: could not be paused at stop; its box is removed", sandbox_id)
                await self._close(sandbox_id)
                with contextlib.suppress(Exception):
                    await self._store.run(rows.update(sandbox_id, state="paused", used=False))

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(self._sweep_s)
            try:
                await self.expire()
            except Exception:
                _log.exception("the sweep of idle sandboxes failed; it runs again")

    # -- parts -----------------------------------------------------------------------------

    async def _open(self, info: SandboxInfo, held: _Held) -> None:
        """A fresh box for the sandbox (its first job restores the last snapshot)."""
        if held.box is not None and await held.box.alive():
            return
        await self._close(info.id)
        agent = self._runner.agent(info.agent)
        _same_agent(info, agent)
        held.box = await self._runner.open_box(agent, label=info.id, ttl=None)
        held.fresh = info.manifest is not None
        await self._store.run(rows.update(info.id, state="running"))

    async def _close(self, sandbox_id: str) -> None:
        held = self._held.get(sandbox_id)
        if held is not None and held.box is not None:
            box, held.box, held.fresh = held.box, None, False
            await box.close()

    async def _snapshot(self, info: SandboxInfo, held: _Held) -> str | None:
        """The idle box's whole workspace, verified and kept; its manifest's digest (the
        last one when no box is open, or the workspace outgrew the cap)."""
        box = held.box
        if box is None or held.fresh or self._blobs is None:
            return info.manifest
        base = await self._store.manifest(info.tenant, info.manifest) if info.manifest else None
        cap = min(self._runner.agent(info.agent).durability.workspace.max_bytes, PAUSE_MAX_BYTES)
        intake = WorkspaceIntake(
            self._blobs,
            self._store,
            info.tenant,
            f"sandbox {info.id}",
            base=EMPTY_MANIFEST,
            known=set(base.hashes()) if base is not None else set(),
            max_bytes=cap,
        )
        digest = info.manifest
        async for event in box.snapshot(cap):
            if isinstance(event, WorkspaceBlob):
                await intake.blob(event)
            elif isinstance(event, WorkspaceSnapshot):
                digest = (await intake.snapshot(event)).digest
            elif isinstance(event, WorkspaceStopped):
                _log.warning("sandbox %s: its workspace is not snapshotted: %s", info.id, event.reason)
        return digest
