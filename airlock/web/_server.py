"""``WebServer``: uvicorn serving an ASGI app on the caller's event loop (a task, no thread),
started and stopped as an async context manager."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import uvicorn
from starlette.types import ASGIApp

from airlock.errors import AirlockError
from airlock.jobs import is_local_address

_log = logging.getLogger("airlock.web")

#: The HTTP API's default address: loopback only.
DEFAULT_HTTP_ADDRESS = "127.0.0.1:8480"


class WebServerError(AirlockError):
    """The HTTP server cannot start (a bad address, or one in use)."""


@dataclass(frozen=True)
class WebTls:
    """Serve HTTPS with these PEM files (read at start); ``client_ca``: clients need a
    certificate from it (mutual TLS)."""

    cert: Path
    key: Path
    client_ca: Path | None = None

    def uvicorn_options(self) -> dict[str, Any]:
        """uvicorn's settings for these files."""
        options: dict[str, Any] = {"ssl_certfile": str(self.cert), "ssl_keyfile": str(self.key)}
        if self.client_ca is not None:
            options |= {"ssl_ca_certs": str(self.client_ca), "ssl_cert_reqs": ssl.CERT_REQUIRED}
        return options


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: ``airlock serve`` owns SIGINT/SIGTERM."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def bind(address: str) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``:0`` picks a port). Made with ``IPPROTO_TCP``:
    asyncio sets ``TCP_NODELAY`` only on connections of such a socket, and without it every
    request on a kept-alive connection waits ~40 ms for a delayed ACK (Nagle).

    Raises:
        WebServerError: not ``host:port``, or it cannot be bound.
    """
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or int(port) > 65535:
        raise WebServerError(f"--http-address {address!r} is not host:port")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, int(port)))
        sock.listen(128)
        sock.setblocking(False)
    except OSError as e:
        sock.close()
        raise WebServerError(f"cannot listen on {address}: {e.strerror or e}") from e
    return sock


class WebServer:
    """``async with WebServer(app, "127.0.0.1:0") as web: web.address`` serves ``app`` until exit.

    On exit open connections (event streams included) get ``grace_s`` to finish, then are cut.
    """

    def __init__(
        self,
        app: ASGIApp,
        address: str = DEFAULT_HTTP_ADDRESS,
        *,
        tls: WebTls | None = None,
        grace_s: int = 2,
    ) -> None:
        self.listen = address
        self.address: str | None = None
        self.tls = tls
        config = uvicorn.Config(
            app,
            log_config=None,
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=grace_s,
            **(tls.uvicorn_options() if tls is not None else {}),
        )
        self._server = _Server(config)
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        """``http://host:port`` (after entry)."""
        assert self.address is not None, "not started"
        host, _, port = self.address.rpartition(":")
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{self.address}"

    async def __aenter__(self) -> Self:
        """Listen and serve.

        Raises:
            WebServerError: the address cannot be bound, or a TLS file cannot be loaded.
        """
        sock = bind(self.listen)
        try:
            self._server.config.load()
        except (OSError, ssl.SSLError) as e:
            sock.close()
            raise WebServerError(f"cannot serve HTTPS on {self.listen}: {e}") from e
        host, port = sock.getsockname()[:2]
        self.address = f"{host}:{port}"
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._task.done():
                sock.close()
                await self._task  # its error
                raise WebServerError(f"the HTTP server on {self.address} stopped at start")
            await asyncio.sleep(0.01)
        _log.info("HTTP API on %s", self.url)
        if self.tls is None and not is_local_address(self.listen):
            _log.warning(
                "the HTTP API on %s is plaintext beyond loopback: credentials and the login cookie "
                "cross the network in the clear (serve with --tls-cert/--tls-key)",
                self.url,
            )
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._server.should_exit = True
        await self._task
