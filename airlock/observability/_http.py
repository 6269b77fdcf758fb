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
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.create_server((host, port), family=family)
    except OSError as e:
        raise ConfigError(f"cannot listen on {address} for metrics: {e}") from e
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
