"""An HTTP upstream that reflects the request head it receives (with whatever credential a
proxy injected) back in every place a careless server might: the reason phrase, a header and
the body, in several encodings chosen by the request path."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from urllib.parse import quote


@dataclass
class ReflectingUpstream:
    """Each response carries the request's ``Authorization`` value in its reason phrase and an
    ``X-Echo`` header; the body depends on the path:

    - ``/json``: the head JSON-escaped with ``/`` as ``\\/`` (httpbin, PHP), then a line
      echoing the value percent-encoded in a URL;
    - ``/bytewise``: the head, chunked one byte per chunk;
    - ``/gzip``: the head, gzip-compressed;
    - ``/br``: a brotli body (a coding a proxy cannot check);
    - ``/sse``: an event stream whose first event carries the value; the second waits for
      ``gate``;
    - anything else: the head itself, ``Content-Length`` framed.

    ``heads`` holds every request head received; ``port`` is set once serving.
    """

    port: int = 0
    heads: list[bytes] = field(default_factory=list)
    gate: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer one request on a connection, then close it."""
        head = await reader.readuntil(b"\r\n\r\n")
        self.heads.append(head)
        path = head.split(b" ", 2)[1]
        value = next(
            (
                line.split(b":", 1)[1].strip()
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"authorization:")
            ),
            b"",
        )
        status = b"HTTP/1.1 200 OK " + value + b"\r\nX-Echo: " + value + b"\r\n"
        if path == b"/json":
            body = json.dumps({"headers": head.decode()}).replace("/", "\\/").encode()
            body += b'\n{"url": "/?k=' + quote(value.decode(), safe="").encode() + b'"}'
            writer.write(status + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        elif path == b"/bytewise":
            writer.write(status + b"Transfer-Encoding: chunked\r\n\r\n")
            for byte in head:
                writer.write(b"1\r\n%c\r\n" % byte)
                await writer.drain()
            writer.write(b"0\r\n\r\n")
        elif path == b"/gzip":
            body = gzip.compress(head)
            writer.write(status + b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        elif path == b"/br":
            writer.write(status + b"Content-Encoding: br\r\nContent-Length: 4\r\n\r\n\x0b\x02\x80x")
        elif path == b"/sse":
            writer.write(status + b"Content-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            first = b"event: a\ndata: " + value + b"\n\n"
            writer.write(b"%x\r\n%s\r\n" % (len(first), first))
            await writer.drain()
            await self.gate.wait()  # the second event only once the client has the first
            second = b"event: b\ndata: second\n\n"
            writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(second), second))
        else:
            writer.write(status + b"Content-Length: %d\r\n\r\n" % len(head) + head)
        await writer.drain()
        writer.close()


@contextlib.asynccontextmanager
async def reflecting_upstream(host: str = "127.0.0.1") -> AsyncIterator[ReflectingUpstream]:
    """A :class:`ReflectingUpstream` listening on ``host`` (a free port) until the block ends."""
    upstream = ReflectingUpstream()
    server = await asyncio.start_server(upstream.handle, host, 0)
    upstream.port = server.sockets[0].getsockname()[1]
    try:
        yield upstream
    finally:
        upstream.gate.set()
        server.close()
        await server.wait_closed()
