"""Probe an agent's MCP servers from where this process runs (``airlock agents show --probe``):
start or connect to each one, list the tools it offers the agent, stop it.

This is not the sandbox: a stdio server runs on this machine, with an empty temporary
directory as its workspace and only :data:`PROBE_ENV` of this process's environment (no
secrets) plus its own ``env``; an http server is reached directly (with this process's
proxy settings), not through the sandbox's egress proxy, and without the credential a
sidecar would add.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from airlock.errors import SpecError

from ._mcp_toolset import open_mcp_tools

if TYPE_CHECKING:
    from airlock.spec import McpServerSpec

__all__ = ["PROBE_ENV", "McpProbe", "probe_mcp_servers"]

#: The variables of this process a probed stdio server inherits.
PROBE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TERM", "TMPDIR")


@dataclass(frozen=True)
class McpProbe:
    """What probing one server found."""

    #: The server's name.
    server: str
    #: The tools it offers the agent: ``(<server>.<tool>, description)``.
    tools: list[tuple[str, str]] = field(default_factory=list)
    #: Why it could not be used (None: it started and listed its tools).
    error: str | None = None


async def _probe(server: McpServerSpec, workspace: Path) -> McpProbe:
    environ = {k: v for k, v in os.environ.items() if k in PROBE_ENV}
    try:
        async with await open_mcp_tools([server], workspace=workspace, environ=environ) as opened:
            return McpProbe(server.name, [(t.name, t.description) for t in opened.tools])
    except SpecError as e:
        return McpProbe(server.name, error=str(e))


async def probe_mcp_servers(servers: Sequence[McpServerSpec]) -> list[McpProbe]:
    """Probe every server at once (see the module docstring); one result each, in order."""
    workspace = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="airlock-mcp-probe-"))
    try:
        return list(await asyncio.gather(*(_probe(s, workspace) for s in servers)))
    finally:
        await asyncio.to_thread(shutil.rmtree, workspace, ignore_errors=True)
