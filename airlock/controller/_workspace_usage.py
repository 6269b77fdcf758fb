"""What workspace snapshots take: stored bytes per tenant (each blob once), and the bytes
the snapshots of each agent's jobs and sandboxes name (each content once per agent)."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass

from airlock.state import Op, fetch_all

__all__ = ["AgentUsage", "TenantUsage", "WorkspaceUsage", "workspace_usage"]

_NAMED_BY_AGENT = (
    "SELECT j.tenant, j.agent, c.manifest FROM checkpoints c JOIN jobs j ON j.id = c.job_id "
    "WHERE c.manifest IS NOT NULL "
    "UNION SELECT j.tenant, j.agent, l.manifest FROM checkpoint_log l JOIN jobs j ON j.id = l.job_id "
    "WHERE l.manifest IS NOT NULL "
    "UNION SELECT tenant, agent, manifest FROM sandboxes WHERE manifest IS NOT NULL"
)


@dataclass(frozen=True)
class TenantUsage:
    """A tenant's blob store: how many blobs, their bytes stored (compressed) and plain."""

    tenant: str
    blobs: int
    stored: int
    plain: int


@dataclass(frozen=True)
class AgentUsage:
    """The content an agent's snapshots name (each hash once): files' bytes, plain and stored."""

    tenant: str
    agent: str
    manifests: int
    blobs: int
    plain: int
    stored: int


@dataclass(frozen=True)
class WorkspaceUsage:
    """Usage by tenant and by agent, sorted."""

    tenants: list[TenantUsage]
    agents: list[AgentUsage]


def workspace_usage() -> Op[WorkspaceUsage]:
    """Read the usage (one consistent read)."""
    rows = yield from fetch_all(
        "SELECT tenant, COUNT(*), SUM(stored), SUM(size) FROM workspace_blobs GROUP BY tenant ORDER BY tenant"
    )
    tenants = [TenantUsage(str(r[0]), int(r[1]), int(r[2] or 0), int(r[3] or 0)) for r in rows]
    stored_rows = yield from fetch_all("SELECT tenant, sha256, stored FROM workspace_blobs")
    stored = {(str(r[0]), str(r[1])): int(r[2]) for r in stored_rows}
    named = yield from fetch_all(_NAMED_BY_AGENT)
    digests: dict[tuple[str, str], set[str]] = defaultdict(set)
    for r in named:
        digests[(str(r[0]), str(r[1]))].add(str(r[2]))
    entries = yield from fetch_all("SELECT tenant, digest, entries FROM workspace_manifests")
    sizes: dict[tuple[str, str], dict[str, int]] = {}
    for r in entries:
        sizes[(str(r[0]), str(r[1]))] = {
            str(e["sha256"]): int(e["size"]) for e in json.loads(str(r[2]))["entries"]
        }
    agents = []
    for (tenant, agent), names in sorted(digests.items()):
        content: dict[str, int] = {}
        for digest in names:
            content.update(sizes.get((tenant, digest), {}))
        agents.append(
            AgentUsage(
                tenant,
                agent,
                len(names),
                len(content),
                sum(content.values()),
                sum(stored.get((tenant, sha), 0) for sha in content),
            )
        )
    return WorkspaceUsage(tenants, agents)
