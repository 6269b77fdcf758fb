"""``/metrics`` on an address of its own, served by uvicorn on the controller's event loop
(prometheus_client's own server would be a thread)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Generator

import uvicorn
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from airlock.errors import ConfigError

from ._metrics import Metrics, metrics_app

__all__ = ["parse_address", "serving_metrics"]


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the controller's own stop it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def parse_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (``:0`` picks a port).

    Raises:
        ConfigError: not ``HOST:PORT`` with a port in 0..65535.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"--metrics-address must be HOST:PORT, got {address!r}")
    return host.strip("[]"), int(port)


@contextlib.asynccontextmanager
async def serving_metrics(metrics: Metrics, address: str) -> AsyncIterator[str]:
    """Serve ``metrics`` at ``http://ADDRESS/metrics`` while the block runs; yields the
    ``host:port`` it listens on.

    Raises:
        ConfigError: a bad address, or one that cannot be bound.
    """
    host, port = parse_address(address)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = _listen(family, host, port, address)
    bound_host, bound_port = sock.getsockname()[:2]
    config = uvicorn.Config(
        _routes(metrics), log_config=None, log_level="warning", lifespan="off", access_log=False
    )
    server = _Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:  # the socket listens already: a scrape before uvicorn is up waits in its backlog
        yield f"[{bound_host}]:{bound_port}" if family == socket.AF_INET6 else f"{bound_host}:{bound_port}"
    finally:
        server.should_exit = True
        await asyncio.gather(task, return_exceptions=True)
        sock.close()


def _listen(family: socket.AddressFamily, host: str, port: int, address: str) -> socket.socket:
    """A listening TCP socket. Made with ``IPPROTO_TCP`` (not ``socket.create_server``'s 0):
    asyncio sets ``TCP_NODELAY`` only on connections of such a socket, and without it a
    kept-alive scrape waits ~40 ms for a delayed ACK (Nagle) before its body is sent.

    Raises:
        ConfigError: it cannot be bound.
    """
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
        sock.listen()
    except OSError as e:
        sock.close()
        raise ConfigError(f"cannot listen on {address} for metrics: {e}") from e
    return sock


def _routes(metrics: Metrics) -> ASGIApp:
    """``/metrics``, and 404 for any other path."""
    serve = metrics_app(metrics)
    missing = PlainTextResponse("not found", status_code=404)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] != "/metrics":
            await missing(scope, receive, send)
        else:
            await serve(scope, receive, send)

    return app
