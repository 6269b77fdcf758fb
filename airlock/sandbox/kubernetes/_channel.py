"""How the controller reaches a runner's gRPC port in a pod.

* **Pod IP** (the controller runs in the cluster): ``<pod IP>:50051`` directly. The sandbox's
  NetworkPolicy admits only the controller's pods to that port.
* **Port-forward** (the controller runs outside the cluster): a listener on this host's
  loopback relays each gRPC connection through the API server's port-forward
  (``pods/portforward``, the official client's WebSocket transport) to the pod's port.
  NetworkPolicies do not apply to it: the API server's RBAC does (``get`` and ``create`` on
  ``pods/portforward``: the WebSocket upgrade is a GET, and newer servers also check create).

Both give :class:`~airlock.runner.RemoteTurn` a plain ``host:port`` target; either way the
channel is TLS pinned to the sandbox's own certificate (:mod:`._runner_tls`, end to end through
a port-forward too) and carries the per-sandbox bearer token.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from typing import Any

from airlock.proxy import host_port_text

from ._api import KubeApi
from ._names import RUNNER_PORT

__all__ = ["PortForward", "pod_ip_target"]

_log = logging.getLogger("airlock.sandbox.kubernetes")
_CHUNK = 65536


def pod_ip_target(pod: dict[str, Any]) -> str | None:
    """``<pod IP>:<runner port>`` (None while the pod has no IP)."""
    ip = (pod.get("status") or {}).get("podIP")
    if not ip:
        return None
    return host_port_text(str(ip), RUNNER_PORT)


class PortForward:
    """A loopback listener relaying every connection to a pod's port through the API server."""

    def __init__(self, api: KubeApi, namespace: str, pod: str, port: int = RUNNER_PORT) -> None:
        self.api = api
        self.namespace = namespace
        self.pod = pod
        self.port = port
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._forwards: list[Any] = []

    async def start(self) -> str:
        """Listen on 127.0.0.1 (a free port); returns the ``host:port`` target."""
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"{host}:{port}"

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            sock = await asyncio.to_thread(self._open)
            remote_reader, remote_writer = await asyncio.open_connection(sock=sock)
            try:
                await asyncio.gather(_pump(reader, remote_writer), _pump(remote_reader, writer))
            finally:
                remote_writer.close()
        except Exception as e:  # the pod is gone, RBAC denied, …: the gRPC call sees a reset
            _log.debug("port-forward to %s/%s failed: %s", self.namespace, self.pod, e)
        except asyncio.CancelledError:
            pass  # aclose(): this relay is ours to end (the server's callback must not see it)
        finally:
            writer.close()
            self._tasks.discard(task)

    def _open(self) -> socket.socket:
        """One port-forward WebSocket; the client hands back one end of a socket pair."""
        forward = self.api.port_forward_blocking(self.pod, self.namespace, self.port)
        self._forwards.append(forward)
        wrapped = forward.socket(self.port)
        sock: socket.socket = wrapped._socket  # the socket-pair end under the client's wrapper
        sock.setblocking(False)
        return sock

    async def aclose(self) -> None:
        """Stop listening; close every relay and port-forward."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for forward in self._forwards:
            with contextlib.suppress(Exception):
                forward.close()
        self._forwards.clear()


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
    finally:
        with contextlib.suppress(Exception):
            if writer.can_write_eof():
                writer.write_eof()
