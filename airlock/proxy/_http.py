"""HTTP/1.1 for the proxies on ``h11``: one request per connection, bodies streamed frame by frame.

Each side of an exchange is a :class:`Channel` (a socket plus an ``h11`` state machine). A
request head is read from the sandbox, checked, rewritten and sent upstream; its body is
copied event by event while the response (interim 1xx heads included) is relayed back, each
piece flushed as it arrives, so server-sent events stream through. ``h11`` re-frames both
bodies (Content-Length kept, otherwise chunked or close-delimited), and ``Connection: close``
goes both ways: bytes after the request's body are never forwarded.

``h11`` is lenient where request smuggling lives, so every head is also checked on its raw
bytes (:func:`check_raw_head`): bare LF line endings, obs-fold, Content-Length together with
Transfer-Encoding and a repeated or list-valued Content-Length are refused. ``h11`` itself
refuses unknown transfer codings (501), invalid Content-Length and HTTP/1.1 without Host.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Iterable, Sequence
from typing import Protocol

import h11

MAX_HEAD = 64 * 1024
_CHUNK = 64 * 1024
#: Headers that concern one connection only and are never forwarded (RFC 9110 7.6.1), plus
#: the framing headers ``h11`` sets itself.
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization", "te",
     "trailer", "upgrade", "transfer-encoding", "content-length"}
)  # fmt: skip
_REASONS = {400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
            431: "Request Header Fields Too Large", 501: "Not Implemented", 502: "Bad Gateway",
            504: "Gateway Timeout"}  # fmt: skip
_BARE_LF = re.compile(rb"(?<!\r)\n")
_OBS_FOLD = re.compile(rb"\r\n[ \t]")

Headers = list[tuple[bytes, bytes]]
Head = h11.Request | h11.InformationalResponse | h11.Response


class HttpError(Exception):
    """A malformed, refused or failed exchange; ``status`` is the response to send."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class BodyFilter(Protocol):
    """Rewrites a streamed body: ``feed`` each piece as it arrives, ``flush`` at its end."""

    def feed(self, data: bytes) -> bytes:
        """What to send now for ``data``."""
        ...

    def flush(self) -> bytes:
        """What is left to send at the end of the body."""
        ...


class ResponseRewriter(Protocol):
    """Rewrites each response head the proxy relays (and gives a filter for the final body)."""

    def rewrite(
        self, status: int, headers: Headers, reason: bytes
    ) -> tuple[Headers, bytes, BodyFilter | None]:
        """The head to send instead, and the body's filter (None: unchanged).

        Raises:
            HttpError: the response must not be relayed.
        """
        ...


def check_raw_head(raw: bytes, status: int) -> None:
    """Refuse what ``h11`` accepts but the proxies must not (request smuggling vectors).

    Raises:
        HttpError: ``status`` for bare LF, obs-fold, Content-Length with Transfer-Encoding,
            or a repeated or list-valued Content-Length.
    """
    if _BARE_LF.search(raw):
        raise HttpError(status, "bare LF line endings are not accepted")
    if _OBS_FOLD.search(raw):
        raise HttpError(status, "obsolete header line folding is not accepted")
    fields = [line.partition(b":") for line in raw.split(b"\r\n")[1:] if line]
    lengths = [value for name, _, value in fields if name.strip().lower() == b"content-length"]
    if lengths and any(name.strip().lower() == b"transfer-encoding" for name, _, _ in fields):
        raise HttpError(status, "both Content-Length and Transfer-Encoding")
    if len(lengths) > 1 or any(b"," in v for v in lengths):
        raise HttpError(status, "repeated Content-Length")


class Channel:
    """One side of an exchange: a socket and the ``h11`` connection framing it."""

    def __init__(
        self,
        role: type[h11.CLIENT] | type[h11.SERVER],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.conn = h11.Connection(role, max_incomplete_event_size=MAX_HEAD)
        self.reader = reader
        self.writer = writer
        #: Bytes written to this side so far.
        self.sent = 0
        #: Status sent for a head when this side's peer sends a malformed one.
        self._bad = 400 if role is h11.SERVER else 502
        self._who = "request" if role is h11.SERVER else "upstream response"
        self._raw = bytearray()

    def request_line(self) -> tuple[str, str] | None:
        """(method, target) of the last head read, even a refused one, for events only."""
        line = bytes(self._raw).split(b"\n", 1)[0].rstrip(b"\r")
        parts = line.decode("latin-1").split(" ")
        if len(parts) != 3 or not parts[0].isalpha() or not parts[2].startswith("HTTP/"):
            return None
        return parts[0], parts[1]

    @property
    def can_respond(self) -> bool:
        """Whether no response head has gone out yet (an error response still fits)."""
        return self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE)

    async def _receive(self) -> bytes:
        data = await self.reader.read(_CHUNK)
        self.conn.receive_data(data)
        return data

    async def next_event(self) -> h11.Event | type[h11.PAUSED]:
        """The next body event (``Data``, ``EndOfMessage``…), reading as needed.

        Raises:
            HttpError: the peer broke the framing (400 from the sandbox, 502 from upstream).
        """
        try:
            while True:
                event = self.conn.next_event()
                if event is h11.NEED_DATA:
                    await self._receive()
                    continue
                return event  # type: ignore[return-value]  # h11's Union does not narrow
        except h11.RemoteProtocolError as e:
            raise HttpError(self._bad, f"malformed {self._who}: {e}") from e

    async def read_head(self) -> Head | None:
        """The next head, checked by :func:`check_raw_head`; None on a clean EOF before any byte.

        Raises:
            HttpError: 400/431/501 for a bad request head, 502 for a bad response head.
        """
        raw = self._raw = bytearray(self.conn.trailing_data[0])
        too_large = HttpError(431 if self._bad == 400 else 502, f"{self._who} head too large")
        try:
            while (event := self.conn.next_event()) is h11.NEED_DATA:
                if len(raw) > MAX_HEAD:
                    raise too_large
                raw += await self._receive()
        except h11.RemoteProtocolError as e:
            if len(raw) > MAX_HEAD:
                raise too_large from e
            status = self._bad if self._bad == 502 else e.error_status_hint
            raise HttpError(status, f"malformed {self._who}: {e}") from e
        if isinstance(event, h11.ConnectionClosed) and not raw:
            return None
        if not isinstance(event, h11.Request | h11.InformationalResponse | h11.Response):
            raise HttpError(self._bad, f"malformed {self._who}: no head")
        head = bytes(raw[: len(raw) - len(self.conn.trailing_data[0])])
        if len(head) > MAX_HEAD:
            raise HttpError(431 if self._bad == 400 else 502, f"{self._who} head too large")
        check_raw_head(head, self._bad)
        return event

    async def send(self, *events: h11.Event) -> None:
        """Frame ``events`` and write them, then flush."""
        for event in events:
            data = self.conn.send(event)
            if data:
                self.writer.write(data)
                self.sent += len(data)
        await self.writer.drain()

    async def send_error(self, status: int, message: str) -> None:
        """A one-line ``text/plain`` response that closes the connection (if one still fits)."""
        if not self.can_respond:
            return
        body = (message.replace("\r", " ").replace("\n", " ") + "\n").encode("utf-8")
        response = h11.Response(
            status_code=status,
            reason=_REASONS.get(status, "Error"),
            headers=[
                ("Content-Type", "text/plain; charset=utf-8"),
                ("Content-Length", str(len(body))),
                ("Connection", "close"),
            ],
        )
        with contextlib.suppress(h11.LocalProtocolError, OSError):
            await self.send(response, h11.Data(data=body), h11.EndOfMessage())


def forwardable(head: Head, drop: Iterable[str] = ()) -> Headers:
    """``head``'s headers (original case) without hop-by-hop, ``Connection``-listed and ``drop`` ones."""
    listed = {t.strip().lower() for k, v in head.headers if k == b"connection" for t in v.split(b",")}
    skip = {s.encode("latin-1") for s in HOP_BY_HOP | {d.lower() for d in drop}} | listed
    return [(k, v) for k, v in head.headers.raw_items() if k.lower() not in skip]


def body_framing(request: h11.Request) -> Headers:
    """The framing header to send upstream for ``request``'s body (none, length or chunked)."""
    for name, _ in request.headers:
        if name == b"transfer-encoding":
            return [(b"Transfer-Encoding", b"chunked")]
    for name, value in request.headers:
        if name == b"content-length":
            return [(b"Content-Length", value)]
    return []


def outgoing_request(
    method: bytes, target: bytes, host: bytes, headers: Sequence[tuple[bytes, bytes]]
) -> h11.Request:
    """A request for upstream: ``Host`` first, ``Connection: close`` last.

    Raises:
        HttpError: 400 when the rewritten head is not valid HTTP.
    """
    try:
        return h11.Request(
            method=method, target=target, headers=[(b"Host", host), *headers, (b"Connection", b"close")]
        )
    except h11.LocalProtocolError as e:
        raise HttpError(400, f"cannot forward this request: {e}") from e


async def exchange(
    client: Channel, upstream: Channel, request: h11.Request, rewriter: ResponseRewriter | None = None
) -> int:
    """Send ``request`` upstream, stream the client's body after it and relay the response.

    Returns:
        The final response status.

    Raises:
        HttpError: either side broke HTTP, or ``rewriter`` refused the response.
    """
    await upstream.send(request)
    upload = asyncio.create_task(_upload(client, upstream))
    relay = asyncio.create_task(_relay(upstream, client, rewriter))
    try:
        done, _ = await asyncio.wait({upload, relay}, return_when=asyncio.FIRST_COMPLETED)
        if relay not in done and upload.exception() is not None:
            await upload  # the client's body was malformed: raise its error
        return await relay
    finally:
        for task in (upload, relay):
            if not task.done():
                task.cancel()
        await asyncio.gather(upload, relay, return_exceptions=True)


async def _upload(client: Channel, upstream: Channel) -> None:
    while True:
        event = await client.next_event()
        if isinstance(event, h11.Data):
            await upstream.send(h11.Data(data=event.data))
        elif isinstance(event, h11.EndOfMessage):
            await upstream.send(h11.EndOfMessage(headers=list(event.headers.raw_items())))
            return
        else:
            raise HttpError(400, "request body ended early")


def _relayed(head: h11.InformationalResponse | h11.Response) -> Headers:
    """Response headers to relay: ``Content-Length`` kept (``h11`` enforces it), framing redone."""
    length = [(k, v) for k, v in head.headers.raw_items() if k.lower() == b"content-length"]
    has_te = any(k == b"transfer-encoding" for k, _ in head.headers)
    return forwardable(head) + ([] if has_te else length[:1])


async def _relay(upstream: Channel, client: Channel, rewriter: ResponseRewriter | None) -> int:
    try:
        while True:
            head = await upstream.read_head()
            if not isinstance(head, h11.InformationalResponse | h11.Response):
                raise HttpError(502, "upstream closed without a response")
            headers, reason, body = _relayed(head), head.reason, None
            if rewriter is not None:
                headers, reason, body = rewriter.rewrite(head.status_code, headers, reason)
            if isinstance(head, h11.InformationalResponse):
                await client.send(
                    h11.InformationalResponse(status_code=head.status_code, headers=headers, reason=reason)
                )
                continue
            headers = [*headers, (b"Connection", b"close")]
            await client.send(h11.Response(status_code=head.status_code, headers=headers, reason=reason))
            break
        while isinstance(event := await upstream.next_event(), h11.Data):
            data = body.feed(event.data) if body is not None else event.data
            if data:
                await client.send(h11.Data(data=data))
        if not isinstance(event, h11.EndOfMessage):
            raise HttpError(502, "upstream response ended early")
        tail = body.flush() if body is not None else b""
        await client.send(*([h11.Data(data=tail)] if tail else []), h11.EndOfMessage())
        return head.status_code
    except h11.LocalProtocolError as e:
        raise HttpError(502, f"cannot relay the upstream response: {e}") from e


async def close_writer(writer: asyncio.StreamWriter) -> None:
    """Close ``writer`` and wait, ignoring errors of an already broken connection."""
    try:
        writer.close()
        await writer.wait_closed()
    except (OSError, RuntimeError):
        pass
