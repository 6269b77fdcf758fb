"""A small HTTP/1.1 server on 127.0.0.1 for wire-level stand-ins of model APIs.

It runs on the caller's event loop (stdlib asyncio streams, no extra dependency), keeps
connections alive as the SDKs expect, records every request with its headers, and
answers from a queue of :class:`FakeResponse` or a handler function. Subclasses speak a
real vendor protocol on top of it (:mod:`._anthropic_server`, :mod:`._openai_server`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from types import TracebackType
from typing import Any, Self


@dataclass(frozen=True)
class RecordedRequest:
    """One request as received on the wire."""

    method: str
    #: Path and query, e.g. ``/v1/messages``.
    path: str
    #: Header names lowercased (the last value wins for repeated headers).
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


@dataclass(frozen=True)
class FakeResponse:
    """What the server answers."""

    status: int = 200
    #: JSON-serializable value, or raw bytes sent as is.
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    #: Seconds to wait before answering (to provoke client timeouts).
    delay_s: float = 0.0
    #: Close the connection without answering (the client sees a dropped connection).
    drop_connection: bool = False
    #: A streamed body (e.g. server-sent events): sent chunked, piece by piece, instead of
    #: ``body``, ``stream_delay_s`` apart.
    stream: tuple[bytes, ...] = ()
    stream_delay_s: float = 0.0


#: Answers a request; may be sync or async.
Handler = Callable[[RecordedRequest], FakeResponse | Awaitable[FakeResponse]]


class FakeHTTPServer:
    """An HTTP/1.1 server bound to 127.0.0.1 (or ``host``) on an ephemeral port; an async context manager.

    Responses come first from :meth:`enqueue`'d ones (FIFO), then from :attr:`handler`,
    then from :meth:`default_response` (subclasses: a protocol-shaped error).
    """

    def __init__(self, handler: Handler | None = None, *, host: str = "127.0.0.1") -> None:
        #: The address to bind (tests may bind a Docker network's gateway address they created).
        self.host = host
        #: Used when the queue is empty.
        self.handler = handler
        #: Every request received, in order.
        self.requests: list[RecordedRequest] = []
        #: Exceptions raised by the handler (each also answered with a 500).
        self.handler_errors: list[BaseException] = []
        self._queue: deque[FakeResponse] = deque()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Bind ``host`` on an ephemeral port and start serving."""
        self._server = await asyncio.start_server(self._serve, self.host, 0)

    async def close(self) -> None:
        """Stop accepting, drop open connections, wait for handlers to finish."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    @property
    def port(self) -> int:
        """The bound port."""
        if self._server is None:
            raise RuntimeError("server not started")
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def origin(self) -> str:
        """``http://<host>:<port>``."""
        return f"http://{self.host}:{self.port}"

    # -- programming -----------------------------------------------------------------

    def enqueue(self, *responses: FakeResponse) -> None:
        """Answer the next requests with these, in order."""
        self._queue.extend(responses)

    @property
    def pending(self) -> int:
        """Queued responses not yet sent."""
        return len(self._queue)

    async def respond(self, request: RecordedRequest) -> FakeResponse:
        """The answer to ``request``: the queue, the handler, or :meth:`default_response`."""
        if self._queue:
            return self._queue.popleft()
        if self.handler is not None:
            result = self.handler(request)
            if inspect.isawaitable(result):
                result = await result
            assert isinstance(result, FakeResponse)
            return result
        return self.default_response(request)

    def default_response(self, request: RecordedRequest) -> FakeResponse:
        """Nothing queued and no handler (subclasses give it the protocol's error shape)."""
        return FakeResponse(
            500, {"error": f"fake server: no response queued for {request.method} {request.path}"}
        )

    # -- wire ------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        try:
            while await self._one_exchange(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)
            self._writers.discard(writer)
            writer.close()
            # close() cancels handlers; ending normally keeps asyncio from logging the task.
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await writer.wait_closed()

    async def _one_exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        line = await reader.readline()
        if not line.strip():
            return False
        method, target, _version = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
        headers: dict[str, str] = {}
        while True:
            raw = await reader.readline()
            if raw in (b"\r\n", b"\n", b""):
                break
            name, _, value = raw.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        body = await _read_body(reader, headers)
        request = RecordedRequest(method, target, headers, body)
        self.requests.append(request)
        try:
            response = await self.respond(request)
        except Exception as e:
            self.handler_errors.append(e)
            response = FakeResponse(500, {"error": f"fake server handler raised {type(e).__name__}: {e}"})
        if response.delay_s:
            await asyncio.sleep(response.delay_s)
        if response.drop_connection:
            writer.transport.abort()
            return False
        if response.stream:
            return await _stream(writer, response, headers)
        payload = response.body if isinstance(response.body, bytes) else json.dumps(response.body).encode()
        out_headers = {"content-type": "application/json", **response.headers}
        out_headers["content-length"] = str(len(payload))
        keep_alive = headers.get("connection", "").lower() != "close"
        out_headers["connection"] = "keep-alive" if keep_alive else "close"
        try:
            reason = HTTPStatus(response.status).phrase
        except ValueError:  # e.g. Anthropic's 529
            reason = "Unknown"
        head = f"HTTP/1.1 {response.status} {reason}\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in out_headers.items()
        )
        writer.write(head.encode("latin-1") + b"\r\n" + payload)
        await writer.drain()
        return keep_alive


async def _stream(writer: asyncio.StreamWriter, response: FakeResponse, headers: dict[str, str]) -> bool:
    """Send a streamed answer chunked, a piece at a time (the connection closes after it)."""
    out_headers = {"content-type": "text/event-stream", **response.headers}
    out_headers.update({"transfer-encoding": "chunked", "connection": "close"})
    head = f"HTTP/1.1 {response.status} {HTTPStatus(response.status).phrase}\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in out_headers.items()
    )
    writer.write(head.encode("latin-1") + b"\r\n")
    for i, piece in enumerate(response.stream):
        if i and response.stream_delay_s:
            await asyncio.sleep(response.stream_delay_s)
        writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        await writer.drain()
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    return False


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        out = bytearray()
        while True:
            size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(out)
            out += await reader.readexactly(size)
            await reader.readline()
    length = int(headers.get("content-length") or 0)
    return await reader.readexactly(length) if length else b""
