"""One MCP server's client session, owned by one long-lived task.

The MCP SDK's transports and sessions hold anyio task groups, which must be entered and
exited in the same task. So each connection runs an *owner task* that enters them on an
``AsyncExitStack``, lists the server's tools, then waits until :meth:`McpConnection.aclose`
asks it to leave; it unwinds the stack itself. Calls come from any task (the SDK's
requests travel over memory streams). Every wait is bounded: starting and listing by the
spec's ``startup_timeout_s``, a call by its ``call_timeout_s``, closing by the transports'
own bounded shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol

from airlock.errors import SpecError, ToolError, shorten

if TYPE_CHECKING:
    import anyio
    from mcp import Client
    from mcp_types import CallToolResult, Tool

    from airlock.spec import McpServerSpec

__all__ = ["McpConnection", "McpTransport"]

log = logging.getLogger(__name__)

#: The most tools one server may list, and the most pages it may list them in.
MAX_TOOLS = 512
MAX_PAGES = 64
#: Beyond the spec's timeouts: how long a transport may take to shut down.
_SHUTDOWN_S = 15.0
#: Beyond ``call_timeout_s``: the hard bound of a call (the SDK's own timeout comes first).
_CALL_GRACE_S = 5.0
#: Bytes of a server's error text kept in a message.
_DETAIL_BYTES = 2000


class McpTransport(Protocol):
    """How to reach one server (``StdioServer``, ``HttpServer``)."""

    def where(self) -> str:
        """``stdio: <command>`` / ``http: <url>``, for messages."""
        ...

    def streams(self) -> AbstractAsyncContextManager[Any]:
        """Start or connect; yields the client's message streams."""
        ...

    async def gone(self) -> str:
        """Why the connection ended (``exited (code 1): <stderr>``, …)."""
        ...

    def describe(self) -> str:
        """The server's state now, for a failure at start ("" when there is nothing to say)."""
        ...


class _Refused(Exception):
    """The server answered, but with something airlock does not accept."""


def _leaf(error: BaseException) -> BaseException:
    """The first error of an exception group that is not a cancellation (else the group)."""
    while isinstance(error, BaseExceptionGroup):
        inner = [e for e in error.exceptions if not isinstance(e, asyncio.CancelledError)]
        if not inner:
            return error
        error = inner[0]
    return error


class McpConnection:
    """A connection to one MCP server (see the module docstring)."""

    def __init__(self, spec: McpServerSpec, transport: McpTransport) -> None:
        self.spec = spec
        self.transport = transport
        self._client: Client | None = None
        self._ready: asyncio.Future[list[Tool]] | None = None
        self._closing = asyncio.Event()
        self._owner: asyncio.Task[None] | None = None
        #: The owner's scope while it starts (closing cancels it).
        self._start: anyio.CancelScope | None = None

    @property
    def name(self) -> str:
        """The server's name (its tools are ``<name>.<tool>``)."""
        return self.spec.name

    async def open(self) -> list[Tool]:
        """Start (or connect to) the server and list its tools.

        Raises:
            SpecError: the server does not start, answer or list its tools within
                ``startup_timeout_s``; the message names the server and why (its exit code
                and stderr, the HTTP error, …).
        """
        self._ready = asyncio.get_running_loop().create_future()
        # Retrieved here too: a start that fails after its caller left logs nothing at GC.
        self._ready.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._owner = asyncio.create_task(self._own(), name=f"mcp-server-{self.name}")
        try:
            return await asyncio.wait_for(
                asyncio.shield(self._ready), self.spec.startup_timeout_s + _SHUTDOWN_S
            )
        except TimeoutError:
            await self.aclose()
            raise SpecError(self._failed(f"no answer within {self.spec.startup_timeout_s:g}s")) from None
        except asyncio.CancelledError:
            await asyncio.shield(self.aclose())
            raise

    def _failed(self, why: str) -> str:
        return f"MCP server {self.name!r} ({self.transport.where()}) did not start: {why}"

    async def _own(self) -> None:
        """The owner task: connect, list, wait to be closed, unwind (see the module docstring)."""
        import anyio
        from mcp import Client

        assert self._ready is not None
        try:
            # One scope around the whole life (scopes nest: the session's task groups open
            # inside it), with a deadline for the start that is lifted once the tools are in.
            with anyio.CancelScope(deadline=anyio.current_time() + self.spec.startup_timeout_s) as start:
                self._start = start
                if self._closing.is_set():  # closed before it began
                    start.cancel()
                async with contextlib.AsyncExitStack() as stack:
                    client = Client(self.transport.streams(), mode="auto", cache=None)
                    await stack.enter_async_context(client)
                    tools = await self._list(client)
                    start.deadline = math.inf
                    self._start = None
                    self._client = client
                    self._ready.set_result(tools)
                    await self._closing.wait()
            if start.cancelled_caught and not self._ready.done():
                raise _Refused("it was closed while starting") if self._closing.is_set() else TimeoutError
        except BaseException as e:
            if not self._ready.done():
                self._ready.set_exception(SpecError(self._failed(await self._explain_start(e))))
            elif not isinstance(e, asyncio.CancelledError):
                log.warning("MCP server %r: session ended: %r", self.name, _leaf(e))
            if isinstance(e, asyncio.CancelledError) and not self._closing.is_set():
                raise
        finally:
            self._client = None

    async def _list(self, client: Client) -> list[Tool]:
        tools: list[Tool] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools += page.tools
            if len(tools) > MAX_TOOLS:
                raise _Refused(f"it lists more than {MAX_TOOLS} tools")
            cursor = page.next_cursor
            if cursor is None:
                return tools
        raise _Refused(f"it lists its tools in more than {MAX_PAGES} pages")

    async def _explain_start(self, error: BaseException) -> str:
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        leaf = _leaf(error)
        if isinstance(leaf, MCPError) and leaf.code == CONNECTION_CLOSED:
            return f"the server {await self.transport.gone()}"
        if isinstance(leaf, _Refused):
            return str(leaf)
        if isinstance(leaf, asyncio.CancelledError):
            return "cancelled"
        state = self.transport.describe()
        if isinstance(leaf, MCPError):
            code = f"MCP error {leaf.code}: {shorten(leaf.message, _DETAIL_BYTES)}"
            # The HTTP error (e.g. the egress proxy's denial) says more than the client's code.
            return f"the server {state} ({code})" if state else code
        if isinstance(leaf, TimeoutError):
            why = f"no answer within {self.spec.startup_timeout_s:g}s (startup_timeout_s)"
        else:
            why = f"{type(leaf).__name__}: {shorten(str(leaf), _DETAIL_BYTES)}"
        return f"{why}; the server {state}" if state else why

    async def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        """Call the server's tool ``tool`` (its own name).

        Raises:
            ToolError: ``invalid_input`` when the server refuses the arguments;
                ``execution_failed`` when it has exited or closed the connection (why, with
                its stderr), does not answer within ``call_timeout_s``, or answers with an
                error or an invalid result.
        """
        import anyio
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED, INVALID_PARAMS, REQUEST_TIMEOUT

        client = self._client
        label = f"MCP server {self.name!r}"
        if client is None:
            raise ToolError.execution_failed(f"{label} is not connected: {await self.transport.gone()}")
        limit = self.spec.call_timeout_s
        try:
            with anyio.fail_after(limit + _CALL_GRACE_S):
                return await client.call_tool(tool, arguments, read_timeout_seconds=limit)
        except MCPError as e:
            if e.code == CONNECTION_CLOSED:
                raise ToolError.execution_failed(f"{label} {await self.transport.gone()}") from e
            if e.code == REQUEST_TIMEOUT:
                raise ToolError.execution_failed(
                    f"{label} did not answer {tool!r} within {limit:g}s (call_timeout_s)"
                ) from e
            detail = shorten(e.message, _DETAIL_BYTES)
            if e.code == INVALID_PARAMS:
                raise ToolError.invalid_input(f"{label} refused the input of {tool!r}: {detail}") from e
            raise ToolError.execution_failed(
                f"{label}: {tool!r} failed: {detail} (MCP error {e.code})"
            ) from e
        except TimeoutError as e:
            raise ToolError.execution_failed(
                f"{label} did not answer {tool!r} within {limit:g}s (call_timeout_s)"
            ) from e
        except Exception as e:  # an invalid result, a transport failure: the server is untrusted
            raise ToolError.execution_failed(
                f"{label}: {tool!r} failed: {type(e).__name__}: {shorten(str(e), _DETAIL_BYTES)}"
            ) from e

    async def aclose(self) -> None:
        """Close the session and stop the server (bounded; idempotent; survives cancellation)."""
        owner = self._owner
        if owner is None:
            return
        self._closing.set()
        if self._start is not None:  # still starting: stop at once
            self._start.cancel()
        # asyncio.wait: a cancelled caller leaves the owner closing; its outcome raises nothing
        # here (the owner reports its own failures: at start, or in the log).
        done, _ = await asyncio.wait({owner}, timeout=_SHUTDOWN_S)
        if not done:
            owner.cancel()  # last resort: its transports' shutdowns are shielded and bounded
            await asyncio.wait({owner}, timeout=_SHUTDOWN_S)
