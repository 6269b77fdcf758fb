"""A long-lived sandbox as the jobs API shows it: one box kept for several jobs run one after
another in the same workspace, its policy the agent's as it was at creation."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["SandboxInfo", "SandboxPhase"]

#: ``running``: its box is up; ``paused``: snapshotted and its box removed (a resume, or the
#: next job, starts a fresh one restored from the snapshot).
SandboxPhase = Literal["running", "paused"]


class SandboxInfo(BaseModel):
    """One long-lived sandbox of a tenant."""

    model_config = ConfigDict(frozen=True)

    id: str
    agent: str
    tenant: str
    #: The principal that created it.
    owner: str | None = None
    state: SandboxPhase
    #: Its workspace's last snapshot (None: none yet).
    manifest: str | None = None
    #: Removed once idle this long (None: kept until removed).
    ttl_s: float | None = None
    created_at: datetime
    last_used_at: datetime
    #: The agent's spec digest fixed at creation.
    spec_digest: str
