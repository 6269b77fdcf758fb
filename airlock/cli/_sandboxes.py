"""``airlock sandboxes``: long-lived sandboxes of a controller (create, ls, pause, resume, rm);
``airlock submit --sandbox ID`` runs a job in one."""

from __future__ import annotations

import json
from typing import Literal

import typer
from rich.markup import escape
from rich.table import Table

from airlock.jobs import ControllerClient, SandboxInfo

from ._common import console
from ._jobs import Target, _with_client

__all__ = ["sandbox_action", "sandboxes_create", "sandboxes_ls"]

#: What ``pause``, ``resume`` and ``rm`` do.
Action = Literal["pause", "resume", "remove"]


def _line(info: SandboxInfo) -> str:
    ttl = f", idle TTL {info.ttl_s:g}s" if info.ttl_s is not None else ""
    snapshot = f", snapshot {info.manifest[:19]}…" if info.manifest else ""
    return f"sandbox {escape(info.id)} of agent {escape(info.agent)}: {info.state}{ttl}{snapshot}"


def sandboxes_create(target: Target, agent: str, ttl_s: float | None, as_json: bool) -> None:
    """Create a sandbox of ``agent`` and print its id."""

    async def work(client: ControllerClient) -> SandboxInfo:
        return await client.create_sandbox(agent, ttl_s=ttl_s)

    info = _with_client(target, as_json, work)
    if as_json:
        print(json.dumps({"sandbox": info.model_dump(mode="json")}))
        raise typer.Exit(0)
    console.print(_line(info), highlight=False)
    console.print(f"run jobs in it: airlock submit {escape(agent)} MESSAGE --sandbox {escape(info.id)}")


def sandboxes_ls(target: Target, as_json: bool) -> None:
    """The caller's tenant's sandboxes, newest first."""

    async def work(client: ControllerClient) -> list[SandboxInfo]:
        return await client.sandboxes()

    found = _with_client(target, as_json, work)
    if as_json:
        print(json.dumps({"sandboxes": [s.model_dump(mode="json") for s in found]}))
        return
    if not found:
        console.print("no sandboxes")
        return
    table = Table("id", "agent", "state", "last used", "idle TTL", "snapshot", "owner")
    for s in found:
        table.add_row(
            s.id,
            s.agent,
            s.state,
            s.last_used_at.astimezone().strftime("%Y-%m-%d %H:%M:%S"),
            f"{s.ttl_s:g}s" if s.ttl_s is not None else "-",
            (s.manifest or "-")[:19],
            s.owner or "-",
        )
    console.print(table)


def sandbox_action(target: Target, sandbox_id: str, action: Action, as_json: bool) -> None:
    """Pause, resume or remove a sandbox, and print it as it is then."""

    async def work(client: ControllerClient) -> SandboxInfo:
        if action == "pause":
            return await client.pause_sandbox(sandbox_id)
        if action == "resume":
            return await client.resume_sandbox(sandbox_id)
        return await client.remove_sandbox(sandbox_id)

    info = _with_client(target, as_json, work)
    if as_json:
        print(json.dumps({"sandbox": info.model_dump(mode="json"), "action": action}))
        return
    if action == "remove":
        console.print(f"removed sandbox {escape(info.id)} (its box is gone)", highlight=False)
        return
    console.print(_line(info), highlight=False)
