"""The credential proxy over loopback: the fake upstream (a test server on 127.0.0.1) gets the
secret; the sandbox's own credential headers are stripped; the secret never shows up in events
or logs. The Anthropic case uses the real ``anthropic`` SDK against a local server speaking the
Messages API."""

from __future__ import annotations

import asyncio

import anthropic
import httpx
import pytest

from airlock.policy.plan import SidecarRoute
from airlock.proxy import CredentialProxy, CredentialProxyEvent, MemorySink

from .proxy_servers import SSE_EVENTS, Cert, RecordingServer

SECRET = "sk-ant-api03-SECRET-value-0123456789"


def route(server: RecordingServer, header: str = "x-api-key", prefix: str = "") -> SidecarRoute:
    return SidecarRoute(upstream=f"http://127.0.0.1:{server.port}", header=header, value_prefix=prefix)


def base(proxy: CredentialProxy) -> str:
    return f"http://{proxy.address[0]}:{proxy.address[1]}"


async def test_injects_secret_and_strips_sandbox_credentials(http_server: RecordingServer) -> None:
    sink = MemorySink()
    async with (
        CredentialProxy(route(http_server), SECRET, sink, credential="anthropic-api-key") as proxy,
        httpx.AsyncClient(trust_env=False) as c,
    ):
        r = await c.post(
            f"{base(proxy)}/v1/echo?beta=1",
            content=b'{"q": 1}',
            headers={
                "x-api-key": "sandbox-guess",
                "Authorization": "Bearer sandbox",
                "Proxy-Authorization": "Basic eA==",
                "api-key": "azure-style",
                "Host": "evil.test",
                "anthropic-version": "2023-06-01",
            },
        )
    assert r.status_code == 200
    (req,) = http_server.requests
    assert req.headers["x-api-key"] == [SECRET]
    for gone in ("authorization", "proxy-authorization", "api-key"):
        assert gone not in req.headers
    assert req.headers["host"] == [f"127.0.0.1:{http_server.port}"]
    assert req.headers["anthropic-version"] == ["2023-06-01"]  # ordinary headers pass
    assert req.path == "/v1/echo?beta=1" and req.body == b'{"q": 1}'
    assert SECRET not in r.text
    (ev,) = sink.events
    assert isinstance(ev, CredentialProxyEvent)
    assert (ev.credential, ev.method, ev.path, ev.status) == ("anthropic-api-key", "POST", "/v1/echo", 200)
    assert ev.bytes_up > 0 and ev.bytes_down > 0
    assert SECRET not in ev.model_dump_json()
    assert "secret=<redacted>" in repr(proxy) and SECRET not in repr(proxy)


async def test_bearer_route_and_upstream_base_path(http_server: RecordingServer) -> None:
    r_ = SidecarRoute(
        upstream=f"http://127.0.0.1:{http_server.port}/openai", header="Authorization", value_prefix="Bearer "
    )
    async with CredentialProxy(r_, SECRET, MemorySink()) as proxy, httpx.AsyncClient(trust_env=False) as c:
        r = await c.get(f"{base(proxy)}/v1/models", headers={"Authorization": "Bearer sk-sandbox"})
    assert r.status_code == 200
    (req,) = http_server.requests
    assert req.headers["authorization"] == [f"Bearer {SECRET}"]
    assert req.path == "/openai/v1/models"


async def test_server_sent_events_stream_through(http_server: RecordingServer) -> None:
    async with (
        CredentialProxy(route(http_server), SECRET, MemorySink()) as proxy,
        httpx.AsyncClient(trust_env=False, timeout=10) as c,
        c.stream("GET", f"{base(proxy)}/sse") as r,
    ):
        assert r.headers["content-type"] == "text/event-stream"
        chunks = r.aiter_bytes()
        first = await asyncio.wait_for(chunks.__anext__(), 5)
        # The upstream holds its second event until we have seen the first: proof of streaming.
        assert first == SSE_EVENTS[0]
        http_server.sse_gate.set()
        rest = b"".join([c async for c in chunks])
    assert rest == SSE_EVENTS[1]


async def test_anthropic_sdk_through_the_proxy(http_server: RecordingServer) -> None:
    async with CredentialProxy(
        route(http_server), SECRET, MemorySink(), credential="anthropic-api-key"
    ) as proxy:
        client = anthropic.AsyncAnthropic(
            base_url=base(proxy), api_key="placeholder-not-a-secret", max_retries=0, timeout=10
        )
        msg = await client.messages.create(
            model="claude-haiku-4-5-20251001", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
        )
        await client.close()
    assert msg.content[0].type == "text" and msg.content[0].text == "hello through the proxy"
    (req,) = http_server.requests
    assert req.path == "/v1/messages"
    assert req.headers["x-api-key"] == [SECRET]


async def test_https_upstream(cert: Cert, tls_server: RecordingServer) -> None:
    r_ = SidecarRoute(upstream=f"https://127.0.0.1:{tls_server.port}", header="x-api-key")
    async with (
        CredentialProxy(r_, SECRET, MemorySink(), ssl_context=cert.client_context()) as proxy,
        httpx.AsyncClient(trust_env=False) as c,
    ):
        r = await c.get(f"{base(proxy)}/tls")
    assert r.status_code == 200 and r.json()["path"] == "/tls"
    assert tls_server.requests[0].headers["x-api-key"] == [SECRET]


async def test_unreachable_upstream_is_502_without_the_secret(http_server: RecordingServer) -> None:
    port = http_server.port
    http_server.server.shutdown()
    http_server.server.server_close()
    sink = MemorySink()
    r_ = SidecarRoute(upstream=f"http://127.0.0.1:{port}", header="x-api-key")
    async with CredentialProxy(r_, SECRET, sink) as proxy, httpx.AsyncClient(trust_env=False) as c:
        r = await c.get(f"{base(proxy)}/x")
    assert r.status_code == 502 and SECRET not in r.text
    (ev,) = sink.events
    assert isinstance(ev, CredentialProxyEvent) and ev.status == 502


async def test_absolute_form_is_refused(http_server: RecordingServer) -> None:
    async with CredentialProxy(route(http_server), SECRET, MemorySink()) as proxy:
        reader, writer = await asyncio.open_connection(*proxy.address)
        writer.write(b"GET http://elsewhere.test/ HTTP/1.1\r\nHost: elsewhere.test\r\n\r\n")
        data = await asyncio.wait_for(reader.read(), 10)
        writer.close()
    assert data.startswith(b"HTTP/1.1 400")
    assert http_server.connections == 0


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (
            b"POST /x HTTP/1.1\r\nHost: p\r\nContent-Length: 3\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            b"400",
        ),
        (b"POST /x HTTP/1.1\r\nHost: p\r\nTransfer-Encoding: chunked, identity\r\n\r\n", b"501"),
        (b"POST /x HTTP/1.1\r\nHost: p\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nab", b"400"),
        (b"POST /x HTTP/1.1\r\nHost: p\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc", b"400"),
        (b"POST /x HTTP/1.1\r\nHost: p\r\nContent-Length: -1\r\n\r\n", b"400"),
        (b"GET /x HTTP/1.1\r\nHost: p\r\nX-A: 1\r\n folded\r\n\r\n", b"400"),
        (b"GET /x HTTP/1.1\nHost: p\n\n", b"400"),
        (b"GET /x HTTP/1.1\r\nHost: p\r\nX: " + b"a" * 70000 + b"\r\n\r\n", b"431"),
        (b"GET * HTTP/1.1\r\nHost: p\r\n\r\n", b"400"),
    ],
)
async def test_smuggling_and_malformed_requests_are_refused(
    http_server: RecordingServer, raw: bytes, status: bytes
) -> None:
    async with CredentialProxy(route(http_server), SECRET, MemorySink()) as proxy:
        reader, writer = await asyncio.open_connection(*proxy.address)
        writer.write(raw)
        data = await asyncio.wait_for(reader.read(), 10)
        writer.close()
    assert data.startswith(b"HTTP/1.1 " + status), data[:80]
    assert http_server.connections == 0  # nothing reached the upstream


async def test_chunked_upload_and_head_and_pipelined_bytes(http_server: RecordingServer) -> None:
    async with CredentialProxy(route(http_server), SECRET, MemorySink()) as proxy:
        reader, writer = await asyncio.open_connection(*proxy.address)
        writer.write(
            b"POST /up HTTP/1.1\r\nHost: p\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
            b"GET /smuggled HTTP/1.1\r\nHost: p\r\n\r\n"  # never forwarded
        )
        data = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        async with httpx.AsyncClient(trust_env=False) as c:
            head = await c.head(f"{base(proxy)}/h")
    assert data.startswith(b"HTTP/1.1 200") and b"Connection: close" in data
    up, h = http_server.requests
    assert (up.path, up.body) == ("/up", b"abcde")
    assert h.method == "HEAD" and head.status_code == 200 and head.content == b""


def test_secret_validation() -> None:
    for bad in ("", "a\nb"):
        with pytest.raises(ValueError, match="secret"):
            CredentialProxy(
                SidecarRoute(upstream="http://127.0.0.1:1", header="x-api-key"), bad, MemorySink()
            )


async def test_interim_response_then_body_then_final_response() -> None:
    got: list[bytes] = []

    async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        got.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(b"HTTP/1.1 100 Continue\r\nX-Hop: 1\r\n\r\n")
        await writer.drain()
        got.append(await reader.readexactly(5))
        writer.write(b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\nKeep-Alive: 5\r\n\r\nok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(upstream, "127.0.0.1", 0)
    r_ = SidecarRoute(upstream=f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", header="x-api-key")
    async with CredentialProxy(r_, SECRET, MemorySink()) as proxy:
        reader, writer = await asyncio.open_connection(*proxy.address)
        writer.write(b"POST /x HTTP/1.1\r\nHost: p\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
        interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        writer.write(b"hello")  # sent only once the interim response arrived
        final = await asyncio.wait_for(reader.read(), 10)
        writer.close()
    server.close()
    await server.wait_closed()
    assert interim.startswith(b"HTTP/1.1 100 Continue\r\n") and b"X-Hop: 1" in interim
    assert final.startswith(b"HTTP/1.1 201 Created\r\n") and final.endswith(b"\r\n\r\nok")
    assert b"Keep-Alive" not in final and b"Connection: close" in final  # hop-by-hop replaced
    assert b"expect: 100-continue" in got[0].lower() and got[1] == b"hello"
