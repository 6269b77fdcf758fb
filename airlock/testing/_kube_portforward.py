"""A pod's ``portforward`` subresource over a WebSocket, as the kubelet serves it (``v4.channel.k8s.io``).

Each forwarded port ``i`` (in the order of the ``ports`` query parameter) has two channels:
data ``2i`` and error ``2i+1``. Every binary message starts with its channel byte; the first
message the server sends on each channel carries the port (2 bytes, little-endian). Bytes on a
data channel are relayed to and from the pod's port (``PodRuntime.connect``); a port that
cannot be reached gets an error message on its error channel. The WebSocket closes (closing
handshake) once every port's connection ended, or when the client closes it.

As with the real protocol there is no half-close: a client that closes its side ends the forward.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable

from ._kube_websocket import OP_BINARY, ProtocolError, WebSocket

__all__ = ["PROTOCOL", "relay_portforward"]

#: The subprotocol the official client's port-forward speaks.
PROTOCOL = "v4.channel.k8s.io"
_CHUNK = 64 * 1024
#: How long to wait for the client's answer to a close before dropping the connection.
_CLOSE_WAIT_S = 2.0


def relay_portforward(
    ws: WebSocket, ports: list[int], connect: Callable[[int], socket.socket], describe: Callable[[int], str]
) -> None:
    """Forward ``ports`` over ``ws`` until the forward ends (blocks; the caller closes the connection).

    ``connect(port)`` opens a connection to the pod's port (OSError when it cannot);
    ``describe(port)`` prefixes the error message sent when it cannot.
    """
    conns: dict[int, socket.socket] = {}
    try:
        for i, port in enumerate(ports):
            prefix = port.to_bytes(2, "little")
            ws.send(OP_BINARY, bytes([2 * i]) + prefix)
            ws.send(OP_BINARY, bytes([2 * i + 1]) + prefix)
        for i, port in enumerate(ports):
            try:
                conns[i] = connect(port)
            except OSError as e:
                ws.send(OP_BINARY, bytes([2 * i + 1]) + f"{describe(port)}: {e}".encode())
    except OSError:
        _close_all(conns)
        return
    pumps = _Pumps(ws, conns)
    if not conns:
        pumps.finish()
    for i, sock in conns.items():
        threading.Thread(target=pumps.pump, args=(i, sock), name=f"portforward pump {i}", daemon=True).start()
    try:
        while (message := ws.receive()) is not None:
            opcode, data = message
            if opcode != OP_BINARY or not data:
                continue
            channel, payload = data[0], data[1:]
            target = conns.get(channel // 2)
            if channel % 2 == 0 and target is not None and payload:
                with contextlib.suppress(OSError):  # the pod side is gone; its pump ends the forward
                    target.sendall(payload)
    except (EOFError, ProtocolError, OSError):
        pass
    finally:
        pumps.stop()
        _close_all(conns)


class _Pumps:
    """The pod-to-client half: one thread per port; the last to end closes the WebSocket."""

    def __init__(self, ws: WebSocket, conns: dict[int, socket.socket]) -> None:
        self.ws = ws
        self._running = len(conns)
        self._lock = threading.Lock()
        self._stopped = False

    def pump(self, index: int, sock: socket.socket) -> None:
        try:
            while data := sock.recv(_CHUNK):
                self.ws.send(OP_BINARY, bytes([2 * index]) + data)
        except OSError:
            pass
        with self._lock:
            self._running -= 1
            last = self._running == 0 and not self._stopped
        if last:
            self.finish()

    def finish(self) -> None:
        """Close the WebSocket; drop the connection if the client does not answer in time."""
        self.ws.close()
        timer = threading.Timer(_CLOSE_WAIT_S, self._drop)
        timer.daemon = True
        timer.start()

    def _drop(self) -> None:
        if not self.ws.close_received:
            with contextlib.suppress(OSError):
                self.ws.sock.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True


def _close_all(conns: dict[int, socket.socket]) -> None:
    for sock in conns.values():
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
