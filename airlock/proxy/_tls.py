"""Read the SNI from a TLS ClientHello without terminating TLS.

The ClientHello may span several TLS records and TCP segments; :func:`parse_client_hello`
says whether it needs more bytes, and the caller keeps every byte it read to forward it
unchanged once the tunnel is allowed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MAX_CLIENT_HELLO = 64 * 1024
_HANDSHAKE = 0x16
_CLIENT_HELLO = 0x01
_SERVER_NAME = 0x0000


@dataclass(frozen=True)
class HelloResult:
    """``need_more`` (read more bytes), ``not_tls`` (not a TLS handshake), ``malformed``,
    or ``ok`` with ``sni`` (None when the ClientHello carries no host_name)."""

    status: Literal["need_more", "not_tls", "malformed", "ok"]
    sni: str | None = None


def parse_client_hello(data: bytes) -> HelloResult:
    """Parse the TLS records at the start of ``data`` far enough to find the SNI."""
    if not data:
        return HelloResult("need_more")
    if data[0] != _HANDSHAKE:
        return HelloResult("not_tls")
    handshake = b""
    pos = 0
    while pos + 5 <= len(data):
        if data[pos] != _HANDSHAKE or data[pos + 1] != 0x03:
            return HelloResult("malformed")
        length = int.from_bytes(data[pos + 3 : pos + 5], "big")
        if length == 0 or length > 2**14:
            return HelloResult("malformed")
        if pos + 5 + length > len(data):
            return HelloResult("need_more")
        handshake += data[pos + 5 : pos + 5 + length]
        pos += 5 + length
        if len(handshake) >= 4:
            if handshake[0] != _CLIENT_HELLO:
                return HelloResult("malformed")
            body_len = int.from_bytes(handshake[1:4], "big")
            if body_len > MAX_CLIENT_HELLO:
                return HelloResult("malformed")
            if len(handshake) >= 4 + body_len:
                return _parse_body(handshake[4 : 4 + body_len])
    return HelloResult("need_more")


def _parse_body(body: bytes) -> HelloResult:
    try:
        pos = 2 + 32  # legacy_version, random
        pos += 1 + body[pos]  # session id
        pos += 2 + int.from_bytes(body[pos : pos + 2], "big")  # cipher suites
        pos += 1 + body[pos]  # compression methods
        if pos == len(body):
            return HelloResult("ok", None)  # no extensions
        end = pos + 2 + int.from_bytes(body[pos : pos + 2], "big")
        if end > len(body):
            return HelloResult("malformed")
        pos += 2
        while pos + 4 <= end:
            ext_type = int.from_bytes(body[pos : pos + 2], "big")
            ext_len = int.from_bytes(body[pos + 2 : pos + 4], "big")
            ext = body[pos + 4 : pos + 4 + ext_len]
            if len(ext) != ext_len:
                return HelloResult("malformed")
            if ext_type == _SERVER_NAME:
                return _parse_server_name(ext)
            pos += 4 + ext_len
        return HelloResult("ok", None)
    except IndexError:
        return HelloResult("malformed")


def _parse_server_name(ext: bytes) -> HelloResult:
    list_len = int.from_bytes(ext[0:2], "big")
    if list_len + 2 != len(ext):
        return HelloResult("malformed")
    pos = 2
    while pos + 3 <= len(ext):
        name_type = ext[pos]
        name_len = int.from_bytes(ext[pos + 1 : pos + 3], "big")
        name = ext[pos + 3 : pos + 3 + name_len]
        if len(name) != name_len:
            return HelloResult("malformed")
        if name_type == 0:
            try:
                return HelloResult("ok", name.decode("ascii").lower().rstrip("."))
            except UnicodeDecodeError:
                return HelloResult("malformed")
        pos += 3 + name_len
    return HelloResult("ok", None)
