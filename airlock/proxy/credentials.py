"""The credential proxy (sidecar): a reverse proxy that adds a secret the sandbox never sees.

It runs outside the sandbox (its own container on the sandbox's internal network), listens
on an address the sandbox can reach, and forwards every request to one upstream (a
:class:`~airlock.policy.SidecarRoute`, e.g. ``https://api.anthropic.com``). It
removes every credential-bearing header the sandbox sent (``authorization``, ``x-api-key``,
``api-key``, ``proxy-authorization`` and the route's header), then sets the route's header
to the secret (``x-api-key: <secret>`` or ``authorization: Bearer <secret>``). The runner's
provider ``base_url`` points at this proxy, with any placeholder key.

The secret is given to the constructor (the CLI reads it from a file or an environment
variable at start, never from argv). It is never logged: events carry method, path (no
query), status and byte counts, and every event line and error text passes through
``redact``. Responses, including server-sent event streams, are streamed as they arrive.

Nothing the upstream reflects carries the secret back: every response head and body is
masked (:mod:`._shield`): the secret raw, as the header value sent, JSON-escaped or
percent-encoded, replaced by a mask of the same length, across chunk boundaries. The
request asks for ``Accept-Encoding: identity``; a gzip/deflate body is decoded to be
checked, any other coding is refused (502). Each event's ``redacted`` counts the masks.

The upstream is fixed by the controller from a validated plan (its host was allowed at
configuration time); the sandbox cannot choose it: the request's own ``Host`` is replaced.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import h11

from airlock.policy.decision import decide, lookup_name, precheck
from airlock.policy.plan import EgressPlan, SidecarRoute
from airlock.policy.secrets import redact

from ._clients import ClientFilter
from ._events import CredentialProxyEvent, ProxyEventSink
from ._http import Channel, HttpError, body_framing, close_writer, exchange, forwardable, outgoing_request
from ._redact import SecretPatterns
from ._server import ProxyServer
from ._shield import ResponseShield
from .egress import system_resolver

__all__ = ["CredentialProxy"]


@dataclass
class _Attempt:
    """What is known of one request while it is relayed (for its event)."""

    method: str = ""
    path: str = ""
    status: int = 0
    reason: str = ""
    up: int = 0


class CredentialProxy(ProxyServer):
    """Forwards requests to ``route.upstream`` with the secret injected.

    Use as an async context manager (or ``start``/``aclose``); ``address`` is the bound
    ``(host, port)``.
    """

    def __init__(
        self,
        route: SidecarRoute,
        secret: str,
        sink: ProxyEventSink,
        *,
        credential: str = "",
        ssl_context: ssl.SSLContext | None = None,
        connect_timeout: float = 10.0,
        head_timeout: float = 60.0,
        clients: ClientFilter | None = None,
        plan: EgressPlan | None = None,
    ) -> None:
        """Args:
        route: Upstream URL and header.
        secret: The value to inject (kept in memory only).
        sink: Where per-request events go.
        credential: The credential's name, for events.
        ssl_context: TLS settings for an https upstream (default: system trust store).
        clients: Which peers may connect (default: any); others are closed unread.
        plan: When given, the upstream's resolved addresses are checked against this egress
            plan (no DNS-rebinding detour for the secret) and only a checked address is dialled.
        """
        if not secret or "\r" in secret or "\n" in secret:
            raise ValueError("the secret must be non-empty and contain no line breaks")
        super().__init__(clients)
        self.route = route
        self._secret = secret
        self._value = (route.value_prefix + secret).encode("utf-8")
        self._sink = sink
        self._credential = credential
        self._ssl = ssl_context
        self._connect_timeout = connect_timeout
        self._head_timeout = head_timeout
        self._plan = plan
        base = urlsplit(route.upstream)
        self._base_path = base.path.rstrip("/")
        self._authority = base.netloc.encode("ascii")
        self._patterns = SecretPatterns(secret, route.value_prefix)

    def __repr__(self) -> str:
        route = self.route
        return f"CredentialProxy(upstream={route.upstream!r}, header={route.header!r}, secret=<redacted>)"

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str
    ) -> None:
        started = time.monotonic()
        client = Channel(h11.SERVER, reader, writer)
        shield = ResponseShield(self._patterns)
        attempt = _Attempt()
        try:
            await self._relay(client, shield, attempt)
        except HttpError as e:
            attempt.status, attempt.reason = e.status, redact(e.message, [self._secret])
            if not attempt.method and (line := client.request_line()):
                attempt.method, attempt.path = line[0], line[1].split("?", 1)[0]
            await client.send_error(e.status, f"airlock credential proxy: {attempt.reason}")
        except (TimeoutError, OSError, asyncio.IncompleteReadError) as e:
            attempt.reason = redact(f"{type(e).__name__}", [self._secret])
        except asyncio.CancelledError:
            attempt.reason = "proxy shutting down"  # aclose() cut the connection; the event still goes out
        finally:
            if attempt.method:
                duration_ms = int((time.monotonic() - started) * 1000)
                self._sink.emit(self._event(attempt, client_id, client.sent, duration_ms, shield.found))

    async def _relay(self, client: Channel, shield: ResponseShield, attempt: _Attempt) -> None:
        """Read one request, send it upstream with the credential, stream the answer back."""
        head = await asyncio.wait_for(client.read_head(), self._head_timeout)
        if not isinstance(head, h11.Request):
            return
        attempt.method, target = head.method.decode("ascii"), head.target.decode("ascii")
        attempt.path = target.split("?", 1)[0]
        if not target.startswith("/"):
            raise HttpError(400, "send an origin-form HTTP/1.x request (this is not a forward proxy)")
        drop = {"host", "accept-encoding", *self.route.stripped_headers}
        request = outgoing_request(
            head.method,
            self._base_path.encode("ascii") + head.target,
            self._authority,
            [
                *forwardable(head, drop),
                *body_framing(head),
                (b"Accept-Encoding", b"identity"),
                (self.route.header.encode("ascii"), self._value),
            ],
        )
        up_reader, up_writer = await self._open_upstream()
        upstream = Channel(h11.CLIENT, up_reader, up_writer)
        try:
            attempt.status = await exchange(client, upstream, request, shield)
        finally:
            attempt.up = upstream.sent
            await close_writer(up_writer)

    def _event(
        self, attempt: _Attempt, client_id: str, down: int, duration_ms: int, redacted: int
    ) -> CredentialProxyEvent:
        """The event of one request (its path redacted)."""
        return CredentialProxyEvent(
            client=client_id,
            credential=self._credential,
            method=attempt.method,
            path=redact(attempt.path, [self._secret]),
            upstream=self.route.upstream,
            status=attempt.status,
            reason=attempt.reason,
            bytes_up=attempt.up,
            bytes_down=down,
            duration_ms=duration_ms,
            redacted=redacted,
        )

    async def _checked_addresses(self) -> list[str]:
        """Where to dial: the upstream host itself, or (with a plan) only addresses it allows."""
        route = self.route
        if self._plan is None:
            return [route.host]
        early = precheck(self._plan, route.host, route.port)
        if early is None:
            try:
                ips = await asyncio.wait_for(
                    system_resolver(lookup_name(self._plan, route.host), route.port), self._connect_timeout
                )
            except (OSError, TimeoutError) as e:
                raise HttpError(502, f"cannot resolve upstream {route.host} ({type(e).__name__})") from e
            early = decide(self._plan, route.host, route.port, ips)
        if not early.allowed:
            raise HttpError(403, f"airlock egress denied the upstream: {early.reason} [rule: {early.rule}]")
        return list(early.ips) or [route.host]

    async def _open_upstream(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        route = self.route
        tls: ssl.SSLContext | None = None
        if route.scheme == "https":
            tls = self._ssl or ssl.create_default_context()
        targets = await self._checked_addresses()
        try:
            last: OSError | None = None
            for target in targets:
                try:
                    return await asyncio.wait_for(
                        asyncio.open_connection(
                            target, route.port, ssl=tls, server_hostname=route.host if tls else None
                        ),
                        self._connect_timeout,
                    )
                except OSError as e:  # ssl.SSLError is an OSError too
                    last = e
            assert last is not None
            raise last
        except TimeoutError as e:
            raise HttpError(504, f"upstream {route.host}:{route.port} timed out") from e
        except (OSError, ssl.SSLError) as e:
            raise HttpError(
                502, f"cannot reach upstream {route.host}:{route.port} ({type(e).__name__})"
            ) from e
