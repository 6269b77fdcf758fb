"""The egress proxy over loopback: real sockets, an injected resolver, and test servers on 127.0.0.1.

``FakeNet`` is the test's DNS and routing table: it maps test names to addresses and
routes stand-in addresses to the loopback test servers. The stand-in addresses are never
connected to: the connector only ever opens 127.0.0.1, and records every attempt so tests
can assert that a denied destination got no connection at all.
"""

from __future__ import annotations

import asyncio
import ssl

import httpx
import pytest

from airlock.policy.plan import EgressPlan, compile_plan
from airlock.proxy import EgressEvent, EgressProxy, MemorySink
from layer0 import EnvironmentSpec

from .proxy_servers import Cert, RecordingServer

PUB_A = "93.184.216.34"  # stand-ins: routed to loopback servers by FakeNet, never contacted
PUB_B = "93.184.216.35"


class FakeNet:
    def __init__(self, names: dict[str, list[list[str]]], routes: dict[tuple[str, int], int]) -> None:
        self.names = names  # name -> successive answers (the last one repeats)
        self.routes = routes
        self.resolved: list[str] = []
        self.connects: list[tuple[str, int]] = []

    async def resolve(self, host: str, port: int) -> list[str]:
        n = sum(1 for h in self.resolved if h == host)
        self.resolved.append(host)
        answers = self.names.get(host)
        if not answers:
            raise OSError(f"unknown test name {host}")
        return answers[min(n, len(answers) - 1)]

    async def connect(self, ip: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        self.connects.append((ip, port))
        if ip == "127.0.0.1":
            return await asyncio.open_connection("127.0.0.1", port)
        target = self.routes.get((ip, port))
        if target is None:
            raise ConnectionRefusedError(f"no test route for {ip}:{port}")
        return await asyncio.open_connection("127.0.0.1", target)


def plan(*rules: tuple[str, int | None, str]) -> EgressPlan:
    spec = EnvironmentSpec.model_validate(
        {
            "network": {
                "default": "deny",
                "rules": [{"destination": d, "port": p, "action": a} for d, p, a in rules],
            }
        }
    )
    return compile_plan(spec).egress


def client(proxy: EgressProxy, verify: ssl.SSLContext | bool = False) -> httpx.AsyncClient:
    host, port = proxy.address
    return httpx.AsyncClient(proxy=f"http://{host}:{port}", verify=verify, trust_env=False, timeout=10)


def events(sink: MemorySink) -> list[EgressEvent]:
    return [e for e in sink.events if isinstance(e, EgressEvent)]


async def test_allowed_name_goes_through_while_another_stays_denied(
    http_server: RecordingServer, other_server: RecordingServer
) -> None:
    net = FakeNet(
        {"allowed.test": [[PUB_A]], "other.test": [[PUB_B]]},
        {(PUB_A, 8080): http_server.port, (PUB_B, 8080): other_server.port},
    )
    sink = MemorySink()
    async with (
        EgressProxy(
            plan(("allowed.test", None, "allow")), sink, resolver=net.resolve, connector=net.connect
        ) as proxy,
        client(proxy) as c,
    ):
        ok = await c.post("http://allowed.test:8080/hello?x=1", content=b"payload")
        denied = await c.get("http://other.test:8080/")
    assert ok.status_code == 200
    assert ok.json() == {
        "path": "/hello?x=1",
        "method": "POST",
        "host": "allowed.test:8080",
        "body": "payload",
    }
    assert denied.status_code == 403
    assert "default deny" in denied.text and "other.test:8080" in denied.text
    assert other_server.connections == 0 and other_server.requests == []
    assert net.connects == [(PUB_A, 8080)]  # connected to the checked IP only
    assert "other.test" not in net.resolved  # a name no rule allows is never resolved
    decision, closed, deny = events(sink)
    assert (decision.phase, decision.allowed, decision.ip, decision.method) == (
        "decision",
        True,
        PUB_A,
        "POST",
    )
    assert decision.rule == "allow allowed.test (spec.network.rules[0])"
    assert (
        closed.phase == "closed" and closed.bytes_up and closed.bytes_down and closed.duration_ms is not None
    )
    assert (deny.allowed, deny.host, deny.port, deny.rule, deny.bytes_up) == (
        False,
        "other.test",
        8080,
        "default deny",
        None,
    )
    assert deny.client.startswith("127.0.0.1:")


async def test_port_rule_is_honoured(http_server: RecordingServer) -> None:
    net = FakeNet(
        {"allowed.test": [[PUB_A]]}, {(PUB_A, 8080): http_server.port, (PUB_A, 8081): http_server.port}
    )
    sink = MemorySink()
    async with (
        EgressProxy(
            plan(("allowed.test", 8080, "allow")), sink, resolver=net.resolve, connector=net.connect
        ) as proxy,
        client(proxy) as c,
    ):
        assert (await c.get("http://allowed.test:8080/")).status_code == 200
        assert (await c.get("http://allowed.test:8081/")).status_code == 403
    assert net.connects == [(PUB_A, 8080)]
    assert len(http_server.requests) == 1


@pytest.mark.parametrize(
    "answers",
    [[["169.254.169.254"]], [["10.0.0.1"]], [[PUB_A, "127.0.0.1"]], [["::ffff:192.168.1.1"]], [["fe80::1"]]],
)
async def test_rebinding_to_special_address_refused_before_connecting(answers: list[list[str]]) -> None:
    net = FakeNet({"rebind.test": answers}, {})
    sink = MemorySink()
    async with (
        EgressProxy(
            plan(("rebind.test", None, "allow")), sink, resolver=net.resolve, connector=net.connect
        ) as proxy,
        client(proxy) as c,
    ):
        r = await c.get("http://rebind.test/")
    assert r.status_code == 403
    assert "only a CIDR rule inside that range" in r.text
    assert net.resolved == ["rebind.test"]  # the injected resolver answered
    assert net.connects == []  # and nothing was even attempted
    (ev,) = events(sink)
    assert not ev.allowed and ev.rule.startswith("deny special")


async def test_connect_tunnel_to_special_address_refused_before_connecting() -> None:
    net = FakeNet({"rebind.test": [["169.254.169.254"]]}, {})
    sink = MemorySink()
    async with EgressProxy(
        plan(("rebind.test", None, "allow")), sink, resolver=net.resolve, connector=net.connect
    ) as proxy:
        reply = await _connect(proxy, "rebind.test:443")
    assert reply.startswith(b"HTTP/1.1 403")
    assert b"link-local / cloud metadata" in reply
    assert net.connects == []


async def test_resolves_once_and_connects_to_the_checked_ip(http_server: RecordingServer) -> None:
    # A rebinding resolver: public on the first answer, loopback afterwards.
    net = FakeNet({"flip.test": [[PUB_A], ["127.0.0.1"]]}, {(PUB_A, 80): http_server.port})
    async with (
        EgressProxy(
            plan(("flip.test", None, "allow")), MemorySink(), resolver=net.resolve, connector=net.connect
        ) as proxy,
        client(proxy) as c,
    ):
        assert (await c.get("http://flip.test/")).status_code == 200
    assert net.resolved == ["flip.test"]
    assert net.connects == [(PUB_A, 80)]


async def test_loopback_needs_an_explicit_cidr_rule_real_connector(
    http_server: RecordingServer, other_server: RecordingServer
) -> None:
    net = FakeNet({"local.test": [["127.0.0.1"]]}, {})
    p = plan(("127.0.0.1", http_server.port, "allow"), ("local.test", None, "allow"))
    sink = MemorySink()
    async with EgressProxy(p, sink, resolver=net.resolve) as proxy, client(proxy) as c:
        ok = await c.get(f"http://127.0.0.1:{http_server.port}/direct")
        by_name = await c.get(f"http://local.test:{http_server.port}/named")
        wrong_port = await c.get(f"http://127.0.0.1:{other_server.port}/")
        name_only = await c.get(f"http://local.test:{other_server.port}/")
    assert ok.status_code == 200 and ok.json()["path"] == "/direct"
    assert by_name.status_code == 200  # the CIDR rule grants 127.0.0.1 on that port
    assert wrong_port.status_code == 403 and name_only.status_code == 403
    assert "loopback" in name_only.text
    assert other_server.connections == 0


async def test_connect_tls_with_matching_sni(cert: Cert, tls_server: RecordingServer) -> None:
    net = FakeNet({"allowed.test": [[PUB_A]]}, {(PUB_A, 443): tls_server.port})
    sink = MemorySink()
    async with (
        EgressProxy(
            plan(("allowed.test", 443, "allow")), sink, resolver=net.resolve, connector=net.connect
        ) as proxy,
        client(proxy, cert.client_context()) as c,
    ):
        r = await c.get("https://allowed.test/secure")
    assert r.status_code == 200 and r.json()["path"] == "/secure"
    decision, closed = events(sink)
    assert decision.method == "CONNECT" and decision.sni == "allowed.test" and decision.allowed
    assert closed.phase == "closed" and closed.bytes_up and closed.bytes_down and closed.bytes_down > 200


async def test_connect_with_sni_different_from_host_is_refused(
    cert: Cert, tls_server: RecordingServer
) -> None:
    net = FakeNet({"allowed.test": [[PUB_A]]}, {(PUB_A, 443): tls_server.port})
    sink = MemorySink()
    async with EgressProxy(
        plan(("allowed.test", 443, "allow")), sink, resolver=net.resolve, connector=net.connect
    ) as proxy:
        reader, writer = await asyncio.open_connection(*proxy.address)
        writer.write(b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            await asyncio.wait_for(writer.start_tls(cert.client_context(), server_hostname="other.test"), 10)
        writer.close()
    assert tls_server.connections == 0  # not one byte went upstream
    assert net.connects == []
    (ev,) = events(sink)
    assert not ev.allowed and ev.sni == "other.test"
    assert ev.reason == "sni mismatch: CONNECT allowed.test, TLS SNI other.test"


async def test_connect_to_name_without_tls_is_refused(tls_server: RecordingServer) -> None:
    net = FakeNet({"allowed.test": [[PUB_A]]}, {(PUB_A, 443): tls_server.port})
    sink = MemorySink()
    async with EgressProxy(
        plan(("allowed.test", 443, "allow")), sink, resolver=net.resolve, connector=net.connect
    ) as proxy:
        reply = await _connect(proxy, "allowed.test:443", then=b"GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b"\r\n\r\n")  # then closed, nothing more
    assert net.connects == [] and tls_server.connections == 0
    (ev,) = events(sink)
    assert not ev.allowed and ev.reason.startswith("no sni")


async def test_connect_to_allowed_ip_literal_without_sni(cert: Cert, tls_server: RecordingServer) -> None:
    sink = MemorySink()
    async with EgressProxy(plan(("127.0.0.1", tls_server.port, "allow")), sink) as proxy:
        reader, writer = await asyncio.open_connection(*proxy.address)
        target = f"127.0.0.1:{tls_server.port}"
        writer.write(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        # Python sends no SNI for an IP address; the certificate's IP SAN is verified.
        await asyncio.wait_for(writer.start_tls(cert.client_context(), server_hostname="127.0.0.1"), 10)
        writer.write(b"GET /ip HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        body = await asyncio.wait_for(reader.read(), 10)
        writer.close()
    assert b'"path": "/ip"' in body
    assert events(sink)[0].sni is None and events(sink)[0].allowed


async def test_chunked_request_body_is_streamed_and_bounded(http_server: RecordingServer) -> None:
    net = FakeNet({"allowed.test": [[PUB_A]]}, {(PUB_A, 80): http_server.port})
    async with EgressProxy(
        plan(("allowed.test", None, "allow")), MemorySink(), resolver=net.resolve, connector=net.connect
    ) as proxy:
        reader, writer = await asyncio.open_connection(*proxy.address)
        writer.write(
            b"POST http://allowed.test/up HTTP/1.1\r\nHost: fronted.test\r\nTransfer-Encoding: chunked\r\n"
            b"Proxy-Authorization: x\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
            b"GET http://allowed.test/smuggled HTTP/1.1\r\nHost: x\r\n\r\n"  # never forwarded
        )
        data = await asyncio.wait_for(reader.read(), 10)
        writer.close()
    assert b"HTTP/1.1 200" in data and b"Connection: close" in data
    (req,) = http_server.requests
    assert req.path == "/up" and req.body == b"hello world"
    assert req.headers["host"] == ["allowed.test"]  # Host comes from the URI, not the client's header
    assert "proxy-authorization" not in req.headers


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", b"400"),
        (b"GET https://allowed.test/ HTTP/1.1\r\n\r\n", b"400"),
        (b"CONNECT allowed.test HTTP/1.1\r\n\r\n", b"400"),
        (
            b"POST http://allowed.test/ HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"400",
        ),
        (b"GET http://u:p@allowed.test/ HTTP/1.1\r\n\r\n", b"400"),
        (b"GET http://allowed.test/ HTTP/1.1\r\n folded: x\r\n\r\n", b"400"),
        (b"GET http://allowed.test/ HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n", b"431"),
        # Request smuggling and what h11 would accept but the proxy refuses:
        (b"GET http://allowed.test/ HTTP/1.1\nHost: allowed.test\n\n", b"400"),  # bare LF
        (b"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\nX: 1\r\n\r\n", b"400"),
        (
            b"POST http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 2\r\n"
            b"Content-Length: 2\r\n\r\nab",
            b"400",
        ),
        (
            b"POST http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 2, 2\r\n\r\nab",
            b"400",
        ),
        (
            b"POST http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 2\r\n"
            b"Content-Length: 3\r\n\r\nabc",
            b"400",
        ),
        (b"POST http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: +2\r\n\r\nab", b"400"),
        (
            b"POST http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n"
            b"Transfer-Encoding: gzip, chunked\r\n\r\n",
            b"501",
        ),
        (
            b"POST http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            b"501",
        ),
        (b"GET http://allowed.test/ HTTP/1.1\r\n\r\n", b"400"),  # HTTP/1.1 without Host (RFC 9112 3.2)
        (b"CONNECT allowed.test:443 HTTP/1.1\r\n\r\n", b"400"),
    ],
)
async def test_malformed_requests_get_clear_errors(raw: bytes, status: bytes) -> None:
    net = FakeNet({"allowed.test": [[PUB_A]]}, {})
    async with EgressProxy(
        plan(("allowed.test", None, "allow")), MemorySink(), resolver=net.resolve, connector=net.connect
    ) as proxy:
        reader, writer = await asyncio.open_connection(*proxy.address)
        writer.write(raw)
        data = await asyncio.wait_for(reader.read(), 10)
        writer.close()
    assert data.startswith(b"HTTP/1.1 " + status), data[:80]
    assert net.connects == []


async def test_unresolvable_name_is_502_and_an_event() -> None:
    net = FakeNet({}, {})
    sink = MemorySink()
    async with (
        EgressProxy(
            plan(("*.test", None, "allow")), sink, resolver=net.resolve, connector=net.connect
        ) as proxy,
        client(proxy) as c,
    ):
        r = await c.get("http://nowhere.test/")
    assert r.status_code == 502
    (ev,) = events(sink)
    assert ev.rule == "resolution failed" and not ev.allowed


async def _connect(proxy: EgressProxy, target: str, then: bytes = b"") -> bytes:
    reader, writer = await asyncio.open_connection(*proxy.address)
    writer.write(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode() + then)
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return data
