"""The tools of an agent's MCP servers: :func:`open_mcp_tools` starts them, the
:class:`McpToolSet` it returns offers their tools until it is closed.

A server that fails to start, to answer or to list its tools within its
``startup_timeout_s``, or that lists tools airlock cannot offer (an invalid name or schema,
an ``allowed_tools`` entry matching none), fails the whole set with one ``SpecError``
naming every such server and why: a turn never starts with tools missing, and a runner
answers INVALID_ARGUMENT before the model is called, instead of a job that fails later
or hangs.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Self

from airlock.errors import SpecError

from ._mcp_connection import McpConnection

if TYPE_CHECKING:
    from airlock.spec import McpServerSpec
    from airlock.turn import ToolDyn

    from ._mcp_connection import McpTransport
    from ._mcp_tool import McpTool

__all__ = ["McpToolSet", "open_mcp_tools"]


class McpToolSet:
    """Open MCP servers and the tools they offer (``<server>.<tool>``), in the servers' order.

    An async context manager; :meth:`aclose` stops every server (idempotent, bounded, and it
    may be called from any task).
    """

    def __init__(self, connections: Sequence[McpConnection], tools: Sequence[McpTool]) -> None:
        self._connections = list(connections)
        self._tools = list(tools)

    @property
    def tools(self) -> list[ToolDyn]:
        """The offered tools, to register with the turn."""
        return list(self._tools)

    @property
    def servers(self) -> list[str]:
        """The servers' names."""
        return [c.name for c in self._connections]

    async def aclose(self) -> None:
        """Close every session and stop every stdio server (and its processes)."""
        await asyncio.gather(*(c.aclose() for c in self._connections))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.shield(self.aclose())


def _transport(spec: McpServerSpec, workspace: Path | None, environ: Mapping[str, str]) -> McpTransport:
    from ._mcp_http import HttpServer
    from ._mcp_stdio import StdioServer

    if spec.transport == "stdio":
        return StdioServer(spec, workspace=workspace, environ=environ)
    return HttpServer(spec)


def _require_sdk(servers: Sequence[McpServerSpec]) -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as e:
        names = ", ".join(repr(s.name) for s in servers)
        raise SpecError(
            f"MCP server(s) {names} need the MCP SDK, which is not installed here: "
            "pip install 'airlock[mcp]' (the runner image has it)"
        ) from e


async def open_mcp_tools(
    servers: Sequence[McpServerSpec],
    *,
    workspace: Path | None,
    environ: Mapping[str, str] | None = None,
) -> McpToolSet:
    """Start or connect to every server (at once) and offer the tools each allows.

    Args:
        servers: the agent's ``mcp_servers``.
        workspace: the working directory of stdio servers (required when there is one).
        environ: the environment stdio servers start from (default: this process's, without
            the runner's token); each server's ``env`` goes on top.

    Raises:
        SpecError: the MCP SDK is missing, a stdio server has no workspace, or servers that
            did not start or list usable tools (one line each; see the module docstring).
            Nothing is left running.
    """
    if not servers:
        return McpToolSet([], [])
    from ._mcp_tool import checked_tools

    _require_sdk(servers)
    base = os.environ if environ is None else environ
    connections = [McpConnection(s, _transport(s, workspace, base)) for s in servers]
    listed = await asyncio.gather(*(c.open() for c in connections), return_exceptions=True)
    problems: list[str] = []
    tools: list[McpTool] = []
    for connection, result in zip(connections, listed, strict=True):
        if isinstance(result, SpecError):
            problems.append(str(result))
        elif isinstance(result, BaseException):
            problems.append(
                f"MCP server {connection.name!r} did not start: {type(result).__name__}: {result}"
            )
        else:
            offered, refused = checked_tools(connection, result)
            tools += offered
            problems += refused
    opened = McpToolSet(connections, tools)
    if problems:
        await asyncio.shield(opened.aclose())
        raise SpecError("\n".join(problems))
    return opened
