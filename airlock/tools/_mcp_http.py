"""An HTTP MCP server: the streamable-HTTP endpoint ``url``, reached like ``http_request``.

The client takes its proxy settings from the environment (``trust_env``): inside a sandbox
that is the egress proxy, so the agent's network policy decides whether the server may be
reached, and a sidecar credential for its host is added by the credential proxy, never
here. The last HTTP error a POST got (e.g. the egress proxy's ``403 … airlock egress
denied: …``) is kept for error messages.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from airlock.errors import shorten

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

    from airlock.spec import McpServerSpec

__all__ = ["HttpServer"]

#: Bytes of an error response's body kept for messages.
_ERROR_BODY_BYTES = 512
#: The read timeout's floor (an idle event stream may stay silent this long).
_READ_FLOOR_S = 300.0


def shown_url(url: str) -> str:
    """``url`` for messages: without user info, query or fragment (they may hold secrets)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return shorten(urlunsplit((parts.scheme, host, parts.path, "", "")), 300)


class HttpServer:
    """One streamable-HTTP MCP server (see the module docstring); :meth:`streams` connects."""

    def __init__(self, spec: McpServerSpec) -> None:
        assert spec.url is not None  # McpServerSpec: transport http has a url
        self.spec = spec
        self.url = spec.url
        self.last_error: str | None = None

    def where(self) -> str:
        """``http: <url>``, for messages."""
        return f"http: {shown_url(self.url)}"

    async def gone(self) -> str:
        """Why the connection ended, as far as the client saw."""
        return self.describe() or "closed the connection"

    def describe(self) -> str:
        """The last HTTP error a request got (``answered HTTP 403 …``), or "" when none did."""
        return f"answered {self.last_error}" if self.last_error is not None else ""

    async def _record(self, response: Any) -> None:
        """Response hook: keep an error answer to a POST (its status and the start of its body)."""
        if response.status_code < 400 or response.request.method != "POST":
            return
        text = f"HTTP {response.status_code} {response.reason_phrase}".rstrip()
        if not response.headers.get("content-type", "").lower().startswith("application/json"):
            # Not a JSON-RPC error (which the client reads itself): take the start of the body.
            body = bytearray()
            with contextlib.suppress(Exception):
                async for chunk in response.aiter_raw():
                    body += chunk
                    if len(body) >= _ERROR_BODY_BYTES:
                        break
            detail = " ".join(bytes(body[:_ERROR_BODY_BYTES]).decode("utf-8", "replace").split())
            if detail:
                text += f": {detail}"
        self.last_error = text

    @contextlib.asynccontextmanager
    async def streams(self) -> AsyncIterator[TransportStreams]:
        """Connect and yield the message streams; close the session on exit.

        Enter and exit in the same task (the client holds an anyio task group).
        """
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        timeout = httpx2.Timeout(
            30.0, connect=self.spec.startup_timeout_s, read=max(_READ_FLOOR_S, self.spec.call_timeout_s + 5)
        )
        async with (
            httpx2.AsyncClient(
                trust_env=True, timeout=timeout, event_hooks={"response": [self._record]}
            ) as client,
            streamable_http_client(self.url, http_client=client) as streams,
        ):
            yield streams
