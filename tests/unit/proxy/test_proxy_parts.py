"""Proxy building blocks: ClientHello parsing (real ClientHellos from ``ssl``), raw head checks, sinks."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from airlock.proxy import PROXY_EVENT, EgressEvent, LineSink
from airlock.proxy._http import HttpError, check_raw_head
from airlock.proxy._tls import parse_client_hello


def client_hello(server_hostname: str | None) -> bytes:
    ctx = ssl.create_default_context()
    if server_hostname is None:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname=server_hostname)
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    return outgoing.read()


def test_sni_from_a_real_client_hello() -> None:
    hello = client_hello("Api.Example.COM")
    assert parse_client_hello(hello).status == "ok"
    assert parse_client_hello(hello).sni == "api.example.com"
    for cut in (1, 5, 20, len(hello) - 1):
        assert parse_client_hello(hello[:cut]).status == "need_more"


def test_client_hello_split_across_records() -> None:
    hello = client_hello("split.test")
    body = hello[5:]
    a, b = body[:40], body[40:]
    rec = lambda part: b"\x16\x03\x01" + len(part).to_bytes(2, "big") + part  # noqa: E731
    assert parse_client_hello(rec(a) + rec(b)).sni == "split.test"
    assert parse_client_hello(rec(a)).status == "need_more"


def test_no_sni_not_tls_and_malformed() -> None:
    assert parse_client_hello(client_hello(None)).sni is None
    assert parse_client_hello(client_hello("127.0.0.1")).sni is None  # IP: no SNI sent
    assert parse_client_hello(b"GET / HTTP/1.1\r\n").status == "not_tls"
    assert parse_client_hello(b"\x16\x03\x01\x00\x05\x02\x00\x00\x01\x00").status == "malformed"
    assert parse_client_hello(b"\x16\x09\x01\x00\x05abcde").status == "malformed"
    hello = bytearray(client_hello("x.test"))
    hello[6] = 0xFF  # a ClientHello length far beyond 64 KiB
    assert parse_client_hello(bytes(hello)).status == "malformed"
    assert parse_client_hello(b"").status == "need_more"


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"GET / HTTP/1.1\nHost: a\n\n", "bare LF"),
        (b"GET / HTTP/1.1\r\nHost: a\nX: 1\r\n\r\n", "bare LF"),
        (b"GET / HTTP/1.1\r\nHost: a\r\n folded: x\r\n\r\n", "folding"),
        (b"POST / HTTP/1.1\r\nContent-Length: 3\r\ntransfer-encoding: chunked\r\n\r\n", "both"),
        (b"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", "repeated"),
        (b"POST / HTTP/1.1\r\ncontent-length: 5, 5\r\n\r\n", "repeated"),
    ],
)
def test_raw_head_refusals(raw: bytes, why: str) -> None:
    with pytest.raises(HttpError, match=why) as e:
        check_raw_head(raw, 400)
    assert e.value.status == 400


def test_raw_head_accepts_ordinary_heads() -> None:
    check_raw_head(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nX: a, b\r\n\r\n", 400)
    check_raw_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 502)


def _event(host: str) -> EgressEvent:
    return EgressEvent(client="c", phase="decision", method="GET", host=host, port=80, allowed=False,
                       rule="default deny", reason=f"{host} denied")  # fmt: skip


async def test_unix_socket_sink_delivers_redacted_lines(tmp_path: Path) -> None:
    path = str(tmp_path / "events.sock")
    received: list[bytes] = []
    done = asyncio.Event()

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while line := await reader.readline():
            received.append(line)
            if len(received) == 2:
                done.set()
        writer.close()

    server = await asyncio.start_unix_server(on_conn, path)
    sink = LineSink(f"unix:{path}", secrets=["topsecret-value"])
    sink.emit(_event("a.test"))
    sink.emit(_event("topsecret-value.test"))
    await asyncio.wait_for(done.wait(), 5)
    await sink.aclose()
    server.close()
    await server.wait_closed()
    events = [PROXY_EVENT.validate_json(x) for x in received]
    assert [e.host for e in events if isinstance(e, EgressEvent)] == ["a.test", "[REDACTED].test"]


async def test_unix_sink_unavailable_warns_once_and_counts(tmp_path: Path) -> None:
    warnings: list[str] = []
    sink = LineSink(f"unix:{tmp_path / 'absent.sock'}", warn=warnings.append)
    for _ in range(3):
        sink.emit(_event("x.test"))
    await sink.aclose()
    assert sink.dropped == 3 and len(warnings) == 1


async def test_file_sink_appends(tmp_path: Path) -> None:
    path = tmp_path / "ev.jsonl"
    for _ in range(2):
        sink = LineSink(str(path))
        sink.emit(_event("x.test"))
        await sink.aclose()
    assert len(path.read_text().splitlines()) == 2
