"""What a sandbox reports while a turn runs: the turn's own events and its proxies' decisions."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from pydantic import Field

from airlock.policy import WorkspaceBlob, WorkspaceSnapshot, WorkspaceStopped
from airlock.proxy import CredentialProxyEvent, EgressEvent
from airlock.turn import AnyTurnEvent

__all__ = ["SandboxEvent", "SandboxEventSink"]

#: One event of a sandboxed turn, tagged by ``type``: a turn event (``started``,
#: ``inference_started``, …), a proxy event (``egress``, ``credential_proxy``) or a workspace
#: snapshot's (``workspace_blob``, ``workspace``, ``workspace_stopped``; never a job event).
SandboxEvent = Annotated[
    AnyTurnEvent | EgressEvent | CredentialProxyEvent | WorkspaceBlob | WorkspaceSnapshot | WorkspaceStopped,
    Field(discriminator="type"),
]

#: Receives each event of a sandboxed turn as it happens; it must be quick (awaited inline).
SandboxEventSink = Callable[[SandboxEvent], Awaitable[None]]
