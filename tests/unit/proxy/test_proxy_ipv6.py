"""The proxies on IPv6 and on every address family: what a pod whose IP is IPv6 needs.

Every server here is started by the test on ``::1`` or 127.0.0.1; the tests skip (saying
why) where ``::1`` cannot be bound.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from airlock.policy.plan import EgressPlan, EgressRule, SidecarRoute
from airlock.proxy import CredentialProxy, CredentialProxyEvent, EgressEvent, EgressProxy, MemorySink
from airlock.proxy import _listen as listen
from airlock.proxy.__main__ import _listen as parse_listen
from airlock.proxy.bundle import EVERY_FAMILY, BundleConfig, CredentialListener
from tests.support.ipv6 import needs_ipv6_loopback

from .proxy_servers import RecordingServer, _start

SECRET = "sk-ant-api03-IPV6-SECRET-0123456789"


def cidr(destination: str, port: int) -> EgressRule:
    return EgressRule(destination=destination, kind="cidr", port=port, action="allow", source="test")


@pytest.fixture
def server6() -> Iterator[RecordingServer]:
    rec = _start(host="::1")
    yield rec
    rec.server.shutdown()
    rec.server.server_close()


@contextlib.asynccontextmanager
async def listening(proxy: EgressProxy, host: str) -> AsyncIterator[tuple[str, int]]:
    """``proxy`` listening on ``host`` (a free port) for the block."""
    try:
        yield await proxy.start(host, 0)
    finally:
        await proxy.aclose()


def families(sockets: list[socket.socket]) -> set[socket.AddressFamily]:
    return {s.family for s in sockets}


# --- binding --------------------------------------------------------------------------------


@needs_ipv6_loopback
async def test_egress_proxy_on_every_family_relays_to_an_ipv6_server(
    server6: RecordingServer, http_server: RecordingServer
) -> None:
    """A sandbox whose proxy URL is ``http://[v6]:3128`` reaches the proxy; IPv4 still does."""
    sink = MemorySink()
    plan = EgressPlan(rules=(cidr("::1/128", server6.port), cidr("127.0.0.1/32", http_server.port)))
    async with listening(EgressProxy(plan, sink), EVERY_FAMILY) as (host, port):
        assert host == "::"
        async with httpx.AsyncClient(proxy=f"http://[::1]:{port}", trust_env=False, timeout=10) as c:
            over_v6 = await c.get(f"http://[::1]:{server6.port}/over-v6")
        async with httpx.AsyncClient(proxy=f"http://127.0.0.1:{port}", trust_env=False, timeout=10) as c:
            over_v4 = await c.get(f"http://127.0.0.1:{http_server.port}/over-v4")
    assert (over_v6.status_code, over_v4.status_code) == (200, 200), over_v6.text
    assert [r.path for r in server6.requests] == ["/over-v6"]
    assert [r.path for r in http_server.requests] == ["/over-v4"]
    decisions = [e for e in sink.events if isinstance(e, EgressEvent) and e.phase == "decision"]
    assert [(e.host, e.ip, e.allowed) for e in decisions] == [
        ("::1", "::1", True),
        ("127.0.0.1", "127.0.0.1", True),
    ]
    # Each client as it connected: an IPv6 peer in brackets, an IPv4 one (a mapped peer of the
    # dual-stack socket) as plain IPv4.
    assert decisions[0].client.startswith("[::1]:")
    assert decisions[1].client.startswith("127.0.0.1:")
    assert decisions[0].reason.startswith(f"[::1]:{server6.port} allowed")
    assert decisions[1].reason.startswith(f"127.0.0.1:{http_server.port} allowed")


def test_the_run_view_prints_an_ipv6_destination_in_brackets() -> None:
    from airlock.cli._run import RunView

    view = RunView(None, cast(Any, None), local=False)
    for host in ("fd00:10:244::9", "api.example.org"):
        view._on_egress(
            EgressEvent(
                client="[fd00:10:244::3]:5555",
                phase="decision",
                method="CONNECT",
                host=host,
                port=443,
                allowed=True,
                rule="r",
                reason="allowed",
            )
        )
    assert view.destinations == {"[fd00:10:244::9]:443": True, "api.example.org:443": True}


@needs_ipv6_loopback
async def test_credential_proxy_on_ipv6_reaches_an_ipv6_upstream(server6: RecordingServer) -> None:
    sink = MemorySink()
    route = SidecarRoute(upstream=f"http://[::1]:{server6.port}", header="x-api-key")
    proxy = CredentialProxy(route, SECRET, sink, credential="anthropic-api-key")
    _, port = await proxy.start(EVERY_FAMILY, 0)
    try:
        async with httpx.AsyncClient(trust_env=False, timeout=10) as c:
            r = await c.post(f"http://[::1]:{port}/v1/echo", content=b"{}")
    finally:
        await proxy.aclose()
    assert r.status_code == 200
    (req,) = server6.requests
    assert req.headers["x-api-key"] == [SECRET]
    assert req.headers["host"] == [f"[::1]:{server6.port}"]
    (ev,) = [e for e in sink.events if isinstance(e, CredentialProxyEvent)]
    assert ev.status == 200


@needs_ipv6_loopback
def test_every_family_is_one_dual_stack_socket_on_linux() -> None:
    sockets = listen.bind_every_family(0)
    try:
        [sock] = sockets
        assert sock.family == socket.AF_INET6
        assert sock.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY) == 0
        port = sock.getsockname()[1]
        for host in ("::1", "127.0.0.1"):
            socket.create_connection((host, port), timeout=5).close()
    finally:
        for s in sockets:
            s.close()


@needs_ipv6_loopback
def test_without_dual_stack_every_family_is_two_sockets_on_one_port(monkeypatch: pytest.MonkeyPatch) -> None:
    """An OS that keeps IPv6 sockets IPv6-only gets ``::`` and ``0.0.0.0`` on the same port."""

    def v6_only(sock: socket.socket) -> bool:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        return False

    monkeypatch.setattr(listen, "_dual_stack", v6_only)
    sockets = listen.bind_every_family(0)
    try:
        assert [s.family for s in sockets] == [socket.AF_INET6, socket.AF_INET]
        [port] = {s.getsockname()[1] for s in sockets}
        for host in ("::1", "127.0.0.1"):
            socket.create_connection((host, port), timeout=5).close()
    finally:
        for s in sockets:
            s.close()


def test_without_ipv6_every_family_is_ipv4(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host (or pod) whose kernel has no IPv6 still gets its IPv4 listener, not an error."""
    real = socket.socket

    def no_ipv6(family: int = socket.AF_INET, *args: object) -> socket.socket:
        if family == socket.AF_INET6:
            raise OSError(errno.EAFNOSUPPORT, "Address family not supported by protocol")
        return real(family, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(listen.socket, "socket", no_ipv6)
    sockets = listen.bind_every_family(0)
    try:
        assert families(sockets) == {socket.AF_INET}
        assert sockets[0].getsockname()[0] == "0.0.0.0"
    finally:
        for s in sockets:
            s.close()


@needs_ipv6_loopback
def test_a_taken_port_is_an_error_not_a_silent_ipv4_fallback() -> None:
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as taken:
        taken.bind(("::", 0))
        taken.listen(1)
        with pytest.raises(OSError) as caught:
            listen.bind_every_family(taken.getsockname()[1])
    assert caught.value.errno == errno.EADDRINUSE


# --- addresses as text ----------------------------------------------------------------------


def test_peers_print_with_brackets_and_mapped_peers_as_ipv4() -> None:
    assert listen.peer_text(("fd00:10:244::5", 41234, 0, 0)) == "[fd00:10:244::5]:41234"
    assert listen.peer_text(("::ffff:10.244.0.9", 41234, 0, 0)) == "10.244.0.9:41234"
    assert listen.peer_text(("10.244.0.9", 41234)) == "10.244.0.9:41234"
    assert listen.peer_text(None) == "?"
    assert listen.host_port_text("::", 3128) == "[::]:3128"


def test_cli_listen_takes_bracketed_ipv6_and_every_family() -> None:
    assert parse_listen("[::1]:3128") == ("::1", 3128)
    assert parse_listen("*:3128") == (EVERY_FAMILY, 3128)
    assert parse_listen(":3128") == (EVERY_FAMILY, 3128)
    assert parse_listen("0.0.0.0:3128") == ("0.0.0.0", 3128)
    for bad in ("::1:3128", "[10.0.0.1]:3128", "fd00::5"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_listen(bad)


# --- the bundle process, as the proxy pod runs it -----------------------------------------


@needs_ipv6_loopback
async def test_bundle_process_on_every_family_serves_ipv6_clients(
    tmp_path: Path, server6: RecordingServer
) -> None:
    """The proxy pod's bundle: ``host: "*"``, an IPv6 sandbox reaches both of its proxies."""
    secret_file = tmp_path / "secret"
    secret_file.write_text(SECRET)
    config = BundleConfig(
        host=EVERY_FAMILY,
        egress_port=0,
        plan=EgressPlan(rules=(cidr("::1/128", server6.port),)),
        credentials=(
            CredentialListener(
                credential="anthropic-api-key",
                route=SidecarRoute(upstream=f"http://[::1]:{server6.port}", header="x-api-key"),
                port=0,
                secret_file=str(secret_file),
            ),
        ),
        events=(f"file:{tmp_path / 'events.jsonl'}",),
    )
    (tmp_path / "bundle.json").write_text(config.model_dump_json())
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "airlock.proxy", "bundle", "--config", str(tmp_path / "bundle.json"),
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    try:
        lines = [(await asyncio.wait_for(proc.stderr.readline(), 20)).decode().strip() for _ in range(3)]
        assert lines[2] == "airlock-proxy bundle ready", lines
        egress, cred = (int(line.rsplit(":", 1)[1]) for line in lines[:2])
        assert lines[0] == f"airlock-proxy egress listening on [::]:{egress}"
        async with httpx.AsyncClient(proxy=f"http://[::1]:{egress}", trust_env=False, timeout=10) as c:
            via_egress = await c.get(f"http://[::1]:{server6.port}/via-egress")
        async with httpx.AsyncClient(trust_env=False, timeout=10) as c:
            via_cred = await c.get(f"http://[::1]:{cred}/via-credentials")
    finally:
        proc.terminate()
        await proc.wait()
    assert (via_egress.status_code, via_cred.status_code) == (200, 200)
    keys = {r.path: r.headers.get("x-api-key") for r in server6.requests}
    assert keys == {"/via-egress": None, "/via-credentials": [SECRET]}


@needs_ipv6_loopback
@pytest.mark.parametrize(
    ("target", "host_header", "status"),
    [
        ("http://[::1]:{port}/rfc", "[::1]:{port}", 200),  # RFC 3986, as curl sends it
        ("http://::1:{port}/httpx", "[::1]:{port}", 200),  # httpx/httpcore 1.x drops the brackets
        ("http://::1:{port}/ambiguous", "elsewhere.test", 400),  # nothing tells address from port
    ],
)
async def test_egress_proxy_reads_ipv6_request_targets(
    server6: RecordingServer, target: str, host_header: str, status: int
) -> None:
    plan = EgressPlan(rules=(cidr("::1/128", server6.port),))
    async with listening(EgressProxy(plan, MemorySink()), "::1") as (_, port):
        reader, writer = await asyncio.open_connection("::1", port)
        line = target.format(port=server6.port)
        writer.write(f"GET {line} HTTP/1.1\r\nHost: {host_header.format(port=server6.port)}\r\n\r\n".encode())
        await writer.drain()
        response = await reader.read()
        writer.close()
    assert response.startswith(f"HTTP/1.1 {status} ".encode()), response[:200]
    path = "/" + line.rsplit("/", 1)[1]
    assert [r.path for r in server6.requests] == ([path] if status == 200 else [])
