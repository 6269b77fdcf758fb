"""The server side of RFC 6455 WebSockets, small and blocking, for the stand-in's port-forward.

:func:`accept_key` answers the opening handshake; :func:`read_frame` and :func:`encode_frame`
are the framing (a client's frames must be masked, a server's are not; 7-, 16- and 64-bit
lengths); :class:`WebSocket` carries messages over one connection: fragments reassembled,
pings answered with pongs, the closing handshake done (a close is answered with a close).
No extensions (no compression) are negotiated.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "OP_BINARY",
    "OP_CLOSE",
    "OP_CONTINUATION",
    "OP_PING",
    "OP_PONG",
    "OP_TEXT",
    "Frame",
    "ProtocolError",
    "WebSocket",
    "accept_key",
    "encode_frame",
    "read_frame",
]

OP_CONTINUATION, OP_TEXT, OP_BINARY = 0x0, 0x1, 0x2
OP_CLOSE, OP_PING, OP_PONG = 0x8, 0x9, 0xA
_CONTROL = frozenset({OP_CLOSE, OP_PING, OP_PONG})
_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#: The largest message accepted (a port-forward frame carries at most a megabyte).
MAX_MESSAGE = 16 * 1024 * 1024


class ProtocolError(Exception):
    """The peer broke RFC 6455 (an unmasked client frame, a bad control frame, ...)."""


def accept_key(key: str) -> str:
    """The ``Sec-WebSocket-Accept`` value answering a ``Sec-WebSocket-Key``."""
    return base64.b64encode(hashlib.sha1((key.strip() + _GUID).encode()).digest()).decode()


@dataclass(frozen=True)
class Frame:
    """One frame, its payload unmasked."""

    fin: bool
    opcode: int
    payload: bytes


def encode_frame(opcode: int, payload: bytes, *, fin: bool = True, mask: bytes | None = None) -> bytes:
    """A frame on the wire (masked with the 4-byte ``mask`` when given: what a client sends)."""
    head = bytes([(0x80 if fin else 0) | opcode])
    bit = 0x80 if mask is not None else 0
    n = len(payload)
    if n < 126:
        head += bytes([bit | n])
    elif n < 1 << 16:
        head += bytes([bit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", n)
    if mask is None:
        return head + payload
    return head + mask + _unmask(payload, mask)


def _unmask(data: bytes, mask: bytes) -> bytes:
    if not data:
        return data
    repeated = (mask * (len(data) // 4 + 1))[: len(data)]
    return (int.from_bytes(data, "big") ^ int.from_bytes(repeated, "big")).to_bytes(len(data), "big")


def read_frame(read: Callable[[int], bytes], *, masked: bool = True) -> Frame:
    """The next frame from ``read(n)`` (which returns up to ``n`` bytes, ``b""`` at the end).

    Raises:
        EOFError: the connection ended (before or within the frame).
        ProtocolError: the frame breaks RFC 6455 (``masked``: client frames must be masked).
    """

    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = read(n - len(data))
            if not chunk:
                raise EOFError("the WebSocket connection ended")
            data += chunk
        return data

    first, second = exactly(2)
    fin, opcode = bool(first & 0x80), first & 0x0F
    if first & 0x70:
        raise ProtocolError("reserved bits set (no extension was negotiated)")
    if opcode not in (OP_CONTINUATION, OP_TEXT, OP_BINARY, *_CONTROL):
        raise ProtocolError(f"unknown opcode {opcode:#x}")
    is_masked, length = bool(second & 0x80), second & 0x7F
    if is_masked != masked:
        raise ProtocolError("client frames must be masked" if masked else "server frames must not be masked")
    if length == 126:
        (length,) = struct.unpack("!H", exactly(2))
    elif length == 127:
        (length,) = struct.unpack("!Q", exactly(8))
    if opcode in _CONTROL and (length > 125 or not fin):
        raise ProtocolError("a control frame must be whole and at most 125 bytes")
    if length > MAX_MESSAGE:
        raise ProtocolError(f"a frame of {length} bytes is too large")
    mask = exactly(4) if is_masked else b""
    payload = exactly(length)
    return Frame(fin, opcode, _unmask(payload, mask) if is_masked else payload)


class WebSocket:
    """The server end of an upgraded connection: whole messages in, frames out (thread-safe sends)."""

    def __init__(self, read: Callable[[int], bytes], sock: socket.socket) -> None:
        self._read = read
        self.sock = sock
        self._send_lock = threading.Lock()
        self.close_sent = False
        self.close_received = False

    def receive(self) -> tuple[int, bytes] | None:
        """The next data message (opcode, payload); None once the peer closed (the close answered).

        Raises:
            ProtocolError: the peer broke the protocol (the connection is closed with 1002).
            EOFError: the connection ended without a closing handshake.
        """
        opcode, parts = None, b""
        while True:
            try:
                frame = read_frame(self._read)
            except ProtocolError:
                self.close(1002)
                raise
            if frame.opcode == OP_PING:
                self.send(OP_PONG, frame.payload)
            elif frame.opcode == OP_PONG:
                continue
            elif frame.opcode == OP_CLOSE:
                self.close_received = True
                code = frame.payload[:2] if len(frame.payload) >= 2 else struct.pack("!H", 1000)
                self._send_close(code)
                return None
            elif frame.opcode == OP_CONTINUATION:
                if opcode is None:
                    raise ProtocolError("a continuation frame without a message to continue")
                parts += frame.payload
            else:
                if opcode is not None:
                    raise ProtocolError("a new message began before the last one ended")
                opcode, parts = frame.opcode, frame.payload
            if len(parts) > MAX_MESSAGE:
                raise ProtocolError("message too large")
            if opcode is not None and frame.fin and frame.opcode not in _CONTROL:
                return opcode, parts

    def send(self, opcode: int, payload: bytes) -> None:
        """One unfragmented frame (nothing once a close was sent).

        Raises:
            OSError: the connection is gone.
        """
        with self._send_lock:
            if self.close_sent:
                return
            self.sock.sendall(encode_frame(opcode, payload))

    def close(self, code: int = 1000, reason: str = "") -> None:
        """Begin (or complete) the closing handshake; idempotent, never raises."""
        with contextlib.suppress(OSError):
            self._send_close(struct.pack("!H", code) + reason.encode()[:120])

    def _send_close(self, payload: bytes) -> None:
        with self._send_lock:
            if self.close_sent:
                return
            self.close_sent = True
            self.sock.sendall(encode_frame(OP_CLOSE, payload))
