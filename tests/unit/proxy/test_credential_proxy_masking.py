"""The credential proxy never hands a reflected secret to the sandbox.

The upstream here (tests.support.echo's ReflectingUpstream, on 127.0.0.1) echoes the request
head it got (which carries the injected secret) back in the reason phrase, in a response
header and in the body: raw, JSON-escaped the way httpbin or PHP would, percent-encoded, one byte per
chunk, gzip-compressed, and as a server-sent event stream. The client reads the proxy's
raw bytes from its socket, so nothing is decoded or hidden on the way to the assertion.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from urllib.parse import quote

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airlock.policy.plan import SidecarRoute
from airlock.proxy import CredentialProxy, CredentialProxyEvent, MemorySink
from airlock.proxy._redact import SecretPatterns, StreamRedactor
from tests.support.echo import ReflectingUpstream, reflecting_upstream

SECRET = "sk-live/Zq+8w=K3y_0123456789abcdef"
PREFIX = "Bearer "


def forms(secret: str = SECRET, prefix: str = PREFIX) -> list[bytes]:
    """Every encoding of the secret an echo would use."""
    out = []
    for value in (secret, prefix + secret):
        escaped = json.dumps(value)[1:-1]
        out += [value, escaped, escaped.replace("/", "\\/"), quote(value, safe=""), quote(value)]
    return sorted({f.encode() for f in out})


@pytest.fixture
async def echo() -> AsyncIterator[ReflectingUpstream]:
    async with reflecting_upstream() as upstream:
        yield upstream


def proxy_for(echo: ReflectingUpstream, sink: MemorySink) -> CredentialProxy:
    r = SidecarRoute(upstream=f"http://127.0.0.1:{echo.port}", header="Authorization", value_prefix=PREFIX)
    return CredentialProxy(r, SECRET, sink, credential="api")


async def raw_get(proxy: CredentialProxy, path: str) -> bytes:
    reader, writer = await asyncio.open_connection(*proxy.address)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: sandbox\r\nAccept-Encoding: gzip, br\r\n\r\n".encode())
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return data


def assert_clean(data: bytes) -> None:
    leaked = [f for f in forms() if f in data]
    assert not leaked, (leaked, data[:400])


@pytest.mark.parametrize("path", ["/raw", "/json", "/bytewise", "/gzip"])
async def test_reflected_secret_is_masked(echo: ReflectingUpstream, path: str) -> None:
    sink = MemorySink()
    async with proxy_for(echo, sink) as proxy:
        data = await raw_get(proxy, path)
    (head,) = echo.heads
    assert f"authorization: {PREFIX}{SECRET}".encode() in head  # the upstream got the key
    assert_clean(data)
    assert data.startswith(b"HTTP/1.1 200 OK ") and b"X-Echo: " in data
    assert b"Accept-Encoding: identity\r\n" in head and b"br" not in head  # not what the sandbox asked
    (ev,) = sink.events
    assert isinstance(ev, CredentialProxyEvent) and ev.status == 200
    assert ev.redacted >= 3  # reason phrase, header, body
    assert SECRET not in ev.model_dump_json()


async def test_masked_body_keeps_its_length_and_the_rest_of_the_text(echo: ReflectingUpstream) -> None:
    async with proxy_for(echo, MemorySink()) as proxy, httpx.AsyncClient(trust_env=False) as c:
        r = await c.get(f"http://{proxy.address[0]}:{proxy.address[1]}/raw")
    (head,) = echo.heads
    assert int(r.headers["content-length"]) == len(r.content) == len(head)
    value = (PREFIX + SECRET).encode()
    assert r.content == head.replace(value, b"*" * len(value))  # the header value as sent
    assert r.headers["x-echo"] == "*" * len(value)


async def test_uncheckable_content_coding_is_refused(echo: ReflectingUpstream) -> None:
    sink = MemorySink()
    async with proxy_for(echo, sink) as proxy:
        data = await raw_get(proxy, "/br")
    assert data.startswith(b"HTTP/1.1 502") and b"Content-Encoding br" in data
    assert_clean(data)
    (ev,) = sink.events
    assert isinstance(ev, CredentialProxyEvent) and ev.status == 502 and "br" in ev.reason


async def test_event_stream_is_masked_and_still_streams(echo: ReflectingUpstream) -> None:
    async with (
        proxy_for(echo, MemorySink()) as proxy,
        httpx.AsyncClient(trust_env=False, timeout=10) as c,
        c.stream("GET", f"http://{proxy.address[0]}:{proxy.address[1]}/sse") as r,
    ):
        assert r.headers["content-type"] == "text/event-stream"
        assert_clean(str(r.headers).encode())
        chunks = r.aiter_raw()
        first = b""
        while not first.endswith(b"\n\n"):  # the upstream holds event b until we have event a
            first += await asyncio.wait_for(chunks.__anext__(), 5)
        echo.gate.set()
        rest = b"".join([c async for c in chunks])
    assert first == b"event: a\ndata: " + b"*" * len(PREFIX + SECRET) + b"\n\n"
    assert rest == b"event: b\ndata: second\n\n"


def test_patterns_cover_the_encodings() -> None:
    patterns = SecretPatterns(SECRET, PREFIX).patterns
    assert set(forms()) <= set(patterns)


_ALPHABET = "ab/+=%\\-_0"


@settings(max_examples=300, deadline=None)
@given(
    secret=st.text(alphabet=_ALPHABET, min_size=1, max_size=12),
    filler=st.lists(st.binary(max_size=30), min_size=1, max_size=6),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=40),
    prefix=st.sampled_from(["", "Bearer "]),
)
def test_stream_redactor_property(secret: str, filler: list[bytes], cuts: list[int], prefix: str) -> None:
    patterns = SecretPatterns(secret, prefix)
    encoded = patterns.patterns
    data = b""
    for i, piece in enumerate(filler):  # the secret's forms inserted between random bytes
        data += piece + encoded[i % len(encoded)]
    bounds = sorted({c for c in cuts if c < len(data)} | {0, len(data)})
    redactor = StreamRedactor(patterns)
    out = b"".join(redactor.feed(data[a:b]) for a, b in itertools.pairwise(bounds))
    out += redactor.flush()
    assert len(out) == len(data)
    assert not [p for p in encoded if p in out]
    one_shot, found = patterns.mask(data)
    assert out == one_shot  # chunking changes nothing
    assert redactor.found >= 1 and found >= 1
    kept = [i for i in range(len(data)) if out[i] != patterns.mask_byte]
    assert all(out[i] == data[i] for i in kept)  # equal to the input outside the masks
