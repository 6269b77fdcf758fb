"""The egress proxy: the sandbox's only way out, enforcing an EgressPlan.

Why our own small asyncio proxy rather than Squid or mitmproxy: airlock needs (1) the
destination checked against the IPs the proxy itself resolved, and the connection made to
exactly such an IP (Squid's ACLs match names or re-resolve; mitmproxy would need addon code
for the same), (2) the CONNECT host compared with the TLS SNI without terminating TLS (no CA
in the sandbox), (3) one structured event per decision in airlock's format, sent where the
controller reads it, and (4) nothing to install: it ships in the same offline runner image
(the airlock package, asyncio and h11) and starts in milliseconds. The whole policy is the
pure ``decide`` function, shared with the Kubernetes backend and unit-tested without traffic.

What it does per client connection (one request per connection, ``Connection: close``):

- ``CONNECT host:port``: precheck (denied names are never resolved), resolve once, decide on
  every resolved IP, answer ``200``, then read the TLS ClientHello *before* connecting
  upstream. The SNI must equal the CONNECT host; a mismatch closes the tunnel (event
  ``sni mismatch``) without a single byte sent upstream. A tunnel without SNI (no TLS, or TLS
  without server_name) is allowed only when the CONNECT host is an IP literal that a CIDR
  rule allows. Then it connects to a checked IP, forwards the buffered ClientHello and pipes
  bytes both ways, counting them.
- Absolute-URI ``http://`` requests: decided the same way; the request is re-sent to a
  checked IP in origin form with ``Host`` set from the URI (no virtual-host fronting), hop-by-
  hop headers removed, the body streamed with its framing; the response is streamed back.
- Denied: ``403`` with a one-line body naming the rule and reason. Malformed: ``400``.
  Unresolvable or unreachable: ``502``/``504``.

Limits: only TCP through this proxy; non-HTTP protocols to an allowed CIDR work only via
CONNECT to an IP literal. The proxy does not inspect traffic inside allowed tunnels.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

import h11

from airlock.policy.decision import Decision, decide, lookup_name, normalise_host, parse_ip, precheck
from airlock.policy.plan import EgressPlan

from ._clients import ClientFilter
from ._events import EgressEvent, ProxyEventSink
from ._http import Channel, HttpError, body_framing, close_writer, exchange, forwardable, outgoing_request
from ._server import ProxyServer
from ._tls import MAX_CLIENT_HELLO, parse_client_hello

__all__ = ["Connector", "EgressProxy", "Resolver", "system_resolver"]

#: Resolves a host name to IP address strings (raises OSError when it cannot).
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
#: Opens a TCP connection to an IP and port.
Connector = Callable[[str, int], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


async def system_resolver(host: str, port: int) -> list[str]:
    """The system resolver (``getaddrinfo``), TCP addresses in its preference order."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _bracket_ipv6(target: str, host_header: str) -> str:
    """``http://fd00::5:8080/x`` as ``http://[fd00::5]:8080/x``: httpx (httpcore 1.x) drops
    the brackets of an IPv6 host in a proxied request's target, but sends ``Host: [fd00::5]:8080``,
    which tells the address from the port. Anything else is returned unchanged."""
    scheme, sep, rest = target.partition("://")
    authority, slash, path = rest.partition("/")
    if not sep or "[" in authority or authority.count(":") < 2 or not host_header.startswith("["):
        return target
    address = host_header[1:].partition("]")[0]
    port = authority[len(address) + 1 :] if authority.startswith(address + ":") else None
    if authority == address:
        return f"{scheme}://[{address}]{slash}{path}"
    if port is not None and port.isdigit():
        return f"{scheme}://[{address}]:{port}{slash}{path}"
    return target


async def _open(ip: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(ip, port)


_Phase = Literal["decision", "closed"]


@dataclass
class _Conn:
    client: str
    method: str = ""
    host: str = ""
    port: int = 0
    started: float = 0.0
    ip: str | None = None
    sni: str | None = None


class EgressProxy(ProxyServer):
    """An HTTP/CONNECT proxy that lets through only what an :class:`EgressPlan` allows.

    Use as an async context manager (or ``start``/``aclose``); ``address`` is the bound
    ``(host, port)``.
    """

    def __init__(
        self,
        plan: EgressPlan,
        sink: ProxyEventSink,
        *,
        resolver: Resolver = system_resolver,
        connector: Connector = _open,
        connect_timeout: float = 10.0,
        head_timeout: float = 30.0,
        clients: ClientFilter | None = None,
    ) -> None:
        super().__init__(clients)
        self.plan = plan
        self._sink = sink
        self._resolve = resolver
        self._connect = connector
        self._connect_timeout = connect_timeout
        self._head_timeout = head_timeout

    # --- connection handling ------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client: str) -> None:
        conn = _Conn(client=client, started=time.monotonic())
        channel = Channel(h11.SERVER, reader, writer)
        try:
            head = await asyncio.wait_for(channel.read_head(), self._head_timeout)
            if not isinstance(head, h11.Request):
                return
            conn.method = head.method.decode("ascii").upper()
            if conn.method == "CONNECT":
                await self._connect_tunnel(conn, head, channel)
            else:
                await self._forward_http(conn, head, channel)
        except HttpError as e:
            await channel.send_error(e.status, e.message)
        except (TimeoutError, OSError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass  # aclose() cut the connection; its events are already emitted

    def _emit(
        self, conn: _Conn, phase: Literal["decision", "closed"], d: Decision, **extra: int | None
    ) -> None:
        self._sink.emit(
            EgressEvent(
                client=conn.client,
                phase=phase,
                method=conn.method,
                host=conn.host,
                port=conn.port,
                ip=conn.ip,
                sni=conn.sni,
                allowed=d.allowed,
                rule=d.rule,
                reason=d.reason,
                **extra,
            )
        )

    async def _decide(self, conn: _Conn) -> Decision:
        early = precheck(self.plan, conn.host, conn.port)
        if early is not None:
            return early
        try:
            lookup = lookup_name(self.plan, conn.host)  # a Service: its full name, absolute
            ips = await asyncio.wait_for(self._resolve(lookup, conn.port), self._connect_timeout)
        except (OSError, TimeoutError) as e:
            return Decision(False, "resolution failed", f"cannot resolve {conn.host}: {type(e).__name__}")
        return decide(self.plan, conn.host, conn.port, list(ips))

    async def _deny(self, conn: _Conn, d: Decision, channel: Channel) -> None:
        self._emit(conn, "decision", d)
        status = 502 if d.rule == "resolution failed" else 403
        await channel.send_error(status, f"airlock egress denied: {d.reason} [rule: {d.rule}]")

    async def _open_upstream(
        self, conn: _Conn, d: Decision
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        last: Exception | None = None
        for ip in d.ips:  # only addresses decide() checked; never re-resolved
            try:
                r, w = await asyncio.wait_for(self._connect(ip, conn.port), self._connect_timeout)
            except (OSError, TimeoutError) as e:
                last = e
                continue
            conn.ip = ip
            return r, w
        raise HttpError(
            504 if isinstance(last, TimeoutError) else 502, f"cannot connect to {conn.host}:{conn.port}"
        )

    async def _connect_tunnel(self, conn: _Conn, head: h11.Request, channel: Channel) -> None:
        target = head.target.decode("ascii")
        if body_framing(head) or not isinstance(await channel.next_event(), h11.EndOfMessage):
            raise HttpError(400, "a CONNECT request carries no body")
        hostpart, sep, port_text = target.rpartition(":")
        if not sep or not port_text.isdigit() or not hostpart:
            raise HttpError(400, f"CONNECT target must be host:port, got {target[:100]!r}")
        conn.host, conn.port = normalise_host(hostpart), int(port_text)
        d = await self._decide(conn)
        if not d.allowed:
            await self._deny(conn, d, channel)
            return
        conn.ip = d.ips[0] if d.ips else None
        await channel.send(h11.Response(status_code=200, headers=[], reason=b"Connection Established"))
        early, _ = channel.conn.trailing_data  # the first tunnel bytes, read with the head
        reader, writer = channel.reader, channel.writer
        hello, sni_ok, why = await self._read_hello(conn, reader, early)
        if not sni_ok:
            self._emit(conn, "decision", Decision(False, d.rule, why, d.ips))
            return
        self._emit(conn, "decision", d)
        up_reader, up_writer = await self._open_upstream(conn, d)
        up_writer.write(hello)
        counts = [len(hello), 0]
        try:
            await _pipe(reader, writer, up_reader, up_writer, counts)
        finally:
            self._emit_closed(conn, d, counts[0], counts[1])

    async def _read_hello(
        self, conn: _Conn, reader: asyncio.StreamReader, data: bytes
    ) -> tuple[bytes, bool, str]:
        """Read the ClientHello after ``data``; (bytes read, tunnel allowed, reason if not)."""
        literal = parse_ip(conn.host) is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._head_timeout
        while True:
            result = parse_client_hello(data)
            if result.status != "need_more" or len(data) > MAX_CLIENT_HELLO:
                break
            try:
                chunk = await asyncio.wait_for(reader.read(16384), max(0.0, deadline - loop.time()))
            except TimeoutError:
                chunk = b""
            if not chunk:
                break
            data += chunk
        if result.status == "ok" and result.sni is not None:
            conn.sni = result.sni
            if result.sni != conn.host:
                return data, False, f"sni mismatch: CONNECT {conn.host}, TLS SNI {result.sni}"
            return data, True, ""
        if result.status == "malformed":
            return data, False, "malformed TLS ClientHello"
        if literal:
            return data, True, ""
        what = "no TLS ClientHello" if result.status != "ok" else "TLS ClientHello without SNI"
        return data, False, f"no sni: {what}; a CONNECT to a name must carry TLS with SNI {conn.host}"

    def _emit_closed(self, conn: _Conn, d: Decision, up: int, down: int) -> None:
        ms = int((time.monotonic() - conn.started) * 1000)
        self._emit(conn, "closed", d, bytes_up=up, bytes_down=down, duration_ms=ms)

    async def _forward_http(self, conn: _Conn, head: h11.Request, channel: Channel) -> None:
        host_header = next((v for k, v in head.headers if k == b"host"), b"").decode("ascii", "replace")
        url = urlsplit(_bracket_ipv6(head.target.decode("ascii"), host_header))
        if url.scheme == "https":
            raise HttpError(400, "https:// URLs must use CONNECT")
        if url.scheme != "http" or not url.hostname:
            raise HttpError(400, "this is a proxy: send an absolute http:// URI (or CONNECT)")
        if url.username is not None or url.password is not None:
            raise HttpError(400, "credentials in the URL are not forwarded")
        try:
            port = url.port or 80
        except ValueError as e:
            raise HttpError(400, "invalid port") from e
        conn.host, conn.port = normalise_host(url.hostname), port
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        authority = url.netloc.rsplit("@", 1)[-1]
        headers = [*forwardable(head, {"host"}), *body_framing(head)]
        request = outgoing_request(head.method, path.encode("ascii"), authority.encode("ascii"), headers)
        d = await self._decide(conn)
        if not d.allowed:
            await self._deny(conn, d, channel)
            return
        conn.ip = d.ips[0]
        self._emit(conn, "decision", d)
        up_reader, up_writer = await self._open_upstream(conn, d)
        upstream = Channel(h11.CLIENT, up_reader, up_writer)
        try:
            await exchange(channel, upstream, request)
        finally:
            await close_writer(up_writer)
            self._emit_closed(conn, d, upstream.sent, channel.sent)


async def _pipe(
    client_r: asyncio.StreamReader,
    client_w: asyncio.StreamWriter,
    up_r: asyncio.StreamReader,
    up_w: asyncio.StreamWriter,
    counts: list[int],
) -> None:
    """Copy both ways until both directions end, adding bytes to ``counts`` [up, down] as they flow."""

    async def one_way(src: asyncio.StreamReader, dst: asyncio.StreamWriter, index: int) -> None:
        try:
            while chunk := await src.read(65536):
                dst.write(chunk)
                await dst.drain()
                counts[index] += len(chunk)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError, RuntimeError):
                if dst.can_write_eof():
                    dst.write_eof()

    try:
        await asyncio.gather(one_way(client_r, up_w, 0), one_way(up_r, client_w, 1))
    finally:
        await close_writer(up_w)
