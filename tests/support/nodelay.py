"""Whether a uvicorn server's accepted connections send without Nagle (``TCP_NODELAY``): the
servers started while :func:`recording` is patched in, and :func:`nodelay` of each."""

from __future__ import annotations

import socket
from typing import Any

import pytest
import uvicorn


def recording(monkeypatch: pytest.MonkeyPatch) -> list[uvicorn.Server]:
    """Every uvicorn server started from now on (this test), as it starts."""
    found: list[uvicorn.Server] = []
    original = uvicorn.Server.startup

    async def startup(self: uvicorn.Server, sockets: Any = None) -> None:
        found.append(self)
        await original(self, sockets)

    monkeypatch.setattr(uvicorn.Server, "startup", startup)
    return found


def nodelay(server: uvicorn.Server) -> list[bool]:
    """``TCP_NODELAY`` of each connection ``server`` holds open (kept alive)."""
    sockets = [c.transport.get_extra_info("socket") for c in server.server_state.connections]
    return [bool(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)) for s in sockets]
