"""The lifecycle both proxies share: an asyncio TCP server that tracks its connections.

``start`` listens (on one address, or on every address family: :data:`~._listen.EVERY_FAMILY`),
each admitted connection is handed to the subclass's ``_serve``, and
``aclose`` stops listening, gives open connections a grace period and then cuts them. Peers
the :class:`~._clients.ClientFilter` refuses are closed before a byte is read.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self

from ._clients import ClientFilter
from ._http import close_writer
from ._listen import EVERY_FAMILY, bind_every_family, peer_text

__all__ = ["ProxyServer"]

#: The stream reader's buffer limit (bytes): the longest line a request head may carry.
_STREAM_LIMIT = 64 * 1024


class ProxyServer(ABC):
    """An asyncio TCP server: ``start``/``aclose`` or an async context manager.

    ``address`` is the bound ``(host, port)`` once started.
    """

    def __init__(self, clients: ClientFilter | None = None) -> None:
        self._clients = clients or ClientFilter()
        self._servers: list[asyncio.Server] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self.address: tuple[str, int] = ("", 0)

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> tuple[str, int]:
        """Listen on ``host:port`` (0: any free port) and return the bound address.

        ``host`` :data:`~._listen.EVERY_FAMILY` (``"*"``) listens on ``::`` and ``0.0.0.0``
        (one port; IPv4 alone where the host has no IPv6); the address is then the first
        socket's (``::``).

        Raises:
            OSError: the address cannot be bound.
        """
        if host == EVERY_FAMILY:
            for sock in bind_every_family(port):
                self._servers.append(
                    await asyncio.start_server(self._on_client, sock=sock, limit=_STREAM_LIMIT)
                )
        else:
            self._servers.append(await asyncio.start_server(self._on_client, host, port, limit=_STREAM_LIMIT))
        sockname = self._servers[0].sockets[0].getsockname()
        self.address = (str(sockname[0]), int(sockname[1]))
        return self.address

    async def aclose(self, grace: float = 1.0) -> None:
        """Stop listening; give open connections ``grace`` seconds to end, then cut them."""
        servers, self._servers = self._servers, []
        if servers:
            for server in servers:
                server.close()
            if self._tasks:
                await asyncio.wait(list(self._tasks), timeout=grace)
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            for server in servers:
                await server.wait_closed()

    async def __aenter__(self) -> Self:
        if not self._servers:
            await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            peer = writer.get_extra_info("peername")
            if self._clients.admits(peer):
                await self._serve(reader, writer, peer_text(peer))
        finally:
            await close_writer(writer)
            self._tasks.discard(task)

    @abstractmethod
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client: str) -> None:
        """Handle one admitted connection from ``client`` (``ip:port``, ``[ip]:port`` for IPv6);
        the writer is closed after.

        ``aclose`` cancels a connection still open after its grace period: handle
        :class:`asyncio.CancelledError` to finish the connection's events.
        """
