"""Just enough HTTP/1.1 for the proxies: head parsing, hop-by-hop filtering, body framing.

Bodies are never buffered: they are copied frame by frame (Content-Length, chunked, or
until EOF) and flushed as they arrive, so server-sent events stream through. Requests
carrying both Content-Length and Transfer-Encoding, or an unknown transfer coding, are
refused (request smuggling). Each proxied connection carries one request (``Connection:
close`` both ways): bytes after the request's body are never forwarded.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import Literal

MAX_HEAD = 64 * 1024
_CHUNK = 64 * 1024
_TOKEN = re.compile(rb"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
#: Headers that concern one connection only and are never forwarded (RFC 9110 7.6.1).
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization", "te",
     "trailer", "upgrade"}
)  # fmt: skip


class HttpError(Exception):
    """A malformed or unsupported message; ``status`` is the response to send."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Head:
    """A request or response head. ``headers`` keeps order and case as received."""

    start: tuple[str, str, str]
    headers: list[tuple[str, str]] = field(default_factory=list)
    size: int = 0

    def get(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive)."""
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)

    def get_all(self, name: str) -> list[str]:
        """Every value of header ``name``."""
        name = name.lower()
        return [v for k, v in self.headers if k.lower() == name]


#: (kind, length): ``none`` (no body), ``length`` (Content-Length), ``chunked``, ``eof`` (until close).
Framing = tuple[Literal["none", "length", "chunked", "eof"], int]


async def read_head(reader: asyncio.StreamReader) -> bytes | None:
    """The raw head up to and including the blank line; None on a clean EOF before any byte.

    Raises:
        HttpError: 431 when the head exceeds 64 KiB, 400 when the peer closes mid-head.
    """
    try:
        return await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if not e.partial:
            return None
        raise HttpError(400, "connection closed in the middle of the request head") from e
    except asyncio.LimitOverrunError as e:
        raise HttpError(431, "request head too large") from e


def parse_head(raw: bytes) -> Head:
    """Split a raw head into its start line (three parts) and headers.

    Raises:
        HttpError: 400 on anything malformed (bad start line, obs-fold, bad header names).
    """
    try:
        text = raw.decode("latin-1")
    except UnicodeDecodeError as e:  # pragma: no cover - latin-1 decodes every byte
        raise HttpError(400, "undecodable head") from e
    lines = text.split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 3 and not (len(parts) == 2 and parts[0].startswith("HTTP/")):
        raise HttpError(400, "malformed start line")
    start = (parts[0], parts[1], parts[2] if len(parts) == 3 else "")
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        if not line:
            continue
        if line[0] in " \t":
            raise HttpError(400, "obsolete header line folding is not accepted")
        name, sep, value = line.partition(":")
        if not sep or not _TOKEN.match(name.encode("latin-1")):
            raise HttpError(400, f"malformed header line {line[:40]!r}")
        headers.append((name, value.strip()))
    return Head(start=start, headers=headers, size=len(raw))


def request_framing(head: Head) -> Framing:
    """How a request's body is delimited.

    Raises:
        HttpError: on conflicting or unsupported framing.
    """
    return _framing(head, default="none")


def response_framing(head: Head, request_method: str) -> Framing:
    """How a response's body is delimited (HEAD, 1xx, 204 and 304 have none)."""
    status = int(head.start[1])
    if request_method == "HEAD" or status < 200 or status in (204, 304):
        return ("none", 0)
    return _framing(head, default="eof")


def _framing(head: Head, default: Literal["none", "eof"]) -> Framing:
    te = [v.strip().lower() for value in head.get_all("transfer-encoding") for v in value.split(",")]
    lengths = {v.strip() for v in head.get_all("content-length")}
    if te:
        if lengths:
            raise HttpError(400, "both Content-Length and Transfer-Encoding")
        if te != ["chunked"]:
            raise HttpError(501, f"unsupported transfer coding {', '.join(te)}")
        return ("chunked", 0)
    if lengths:
        if len(lengths) != 1 or not next(iter(lengths)).isdigit():
            raise HttpError(400, "invalid Content-Length")
        return ("length", int(next(iter(lengths))))
    return (default, 0)


def connection_tokens(head: Head) -> set[str]:
    """Header names listed in ``Connection`` (also hop-by-hop)."""
    return {t.strip().lower() for v in head.get_all("connection") for t in v.split(",") if t.strip()}


def forwardable(head: Head, drop: frozenset[str] | set[str] = frozenset()) -> list[tuple[str, str]]:
    """The head's headers without hop-by-hop ones, ``Connection``-listed ones and ``drop``."""
    skip = HOP_BY_HOP | connection_tokens(head) | {d.lower() for d in drop}
    return [(k, v) for k, v in head.headers if k.lower() not in skip]


def serialise(start: str, headers: list[tuple[str, str]]) -> bytes:
    """A head as bytes (start line, headers, blank line)."""
    for k, v in headers:
        if "\r" in v or "\n" in v or "\r" in k or "\n" in k:
            raise HttpError(400, "header contains a line break")
    lines = [start, *(f"{k}: {v}" for k, v in headers), "", ""]
    return "\r\n".join(lines).encode("latin-1")


async def copy_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, framing: Framing) -> int:
    """Copy one body from ``reader`` to ``writer`` frame by frame, flushing each piece.

    Returns:
        The number of bytes written.

    Raises:
        HttpError: 400/502 on malformed chunked framing or a premature EOF.
    """
    kind, length = framing
    if kind == "none":
        return 0
    if kind == "length":
        return await _copy_exact(reader, writer, length)
    if kind == "eof":
        total = 0
        while chunk := await reader.read(_CHUNK):
            writer.write(chunk)
            await writer.drain()
            total += len(chunk)
        return total
    return await _copy_chunked(reader, writer)


async def _copy_exact(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, length: int) -> int:
    remaining = length
    while remaining:
        chunk = await reader.read(min(_CHUNK, remaining))
        if not chunk:
            raise HttpError(400, f"body ended {remaining} bytes early")
        writer.write(chunk)
        await writer.drain()
        remaining -= len(chunk)
    return length


async def _read_line(reader: asyncio.StreamReader) -> bytes:
    try:
        line = await reader.readuntil(b"\r\n")
    except asyncio.IncompleteReadError as e:
        raise HttpError(400, "chunked body ended early") from e
    except asyncio.LimitOverrunError as e:
        raise HttpError(400, "chunk line too long") from e
    return line


async def _copy_chunked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> int:
    total = 0
    while True:
        line = await _read_line(reader)
        size_text = line.split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError as e:
            raise HttpError(400, "invalid chunk size") from e
        if size < 0:
            raise HttpError(400, "invalid chunk size")
        writer.write(line)
        total += len(line)
        if size == 0:
            while True:  # trailers, then the final blank line
                trailer = await _read_line(reader)
                writer.write(trailer)
                total += len(trailer)
                if trailer == b"\r\n":
                    await writer.drain()
                    return total
        total += await _copy_exact(reader, writer, size)
        crlf = await _read_line(reader)
        if crlf != b"\r\n":
            raise HttpError(400, "chunk not terminated by CRLF")
        writer.write(crlf)
        await writer.drain()
        total += 2


async def relay_response(
    method: str, up_reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> tuple[int, int]:
    """Stream an upstream response (interim 1xx heads included) to ``writer``.

    Hop-by-hop headers are removed and ``Connection: close`` added to the final head.

    Returns:
        (final status, bytes written).

    Raises:
        HttpError: 502 when the upstream sends no or a malformed response.
    """
    total = 0
    while True:
        raw = await read_head(up_reader)
        if raw is None:
            raise HttpError(502, "upstream closed without a response")
        head = parse_head(raw)
        if not head.start[0].startswith("HTTP/1.") or not head.start[1].isdigit():
            raise HttpError(502, "upstream sent a malformed status line")
        status = int(head.start[1])
        framing = response_framing(head, method)
        extra = [] if status < 200 else [("Connection", "close")]
        out = serialise(f"HTTP/1.1 {status} {head.start[2]}".rstrip(), [*forwardable(head), *extra])
        writer.write(out)
        await writer.drain()
        total += len(out)
        if status >= 200 or status == 101:
            return status, total + await copy_body(up_reader, writer, framing)


def error_response(status: int, message: str) -> bytes:
    """A small ``text/plain`` response that closes the connection."""
    reasons = {400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
               431: "Request Header Fields Too Large", 501: "Not Implemented", 502: "Bad Gateway",
               504: "Gateway Timeout"}  # fmt: skip
    body = (message.replace("\r", " ").replace("\n", " ") + "\n").encode("utf-8")
    head = serialise(
        f"HTTP/1.1 {status} {reasons.get(status, 'Error')}",
        [
            ("Content-Type", "text/plain; charset=utf-8"),
            ("Content-Length", str(len(body))),
            ("Connection", "close"),
        ],
    )
    return head + body


async def close_writer(writer: asyncio.StreamWriter) -> None:
    """Close ``writer`` and wait, ignoring errors of an already broken connection."""
    try:
        writer.close()
        await writer.wait_closed()
    except (OSError, RuntimeError):
        pass
