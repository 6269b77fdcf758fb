"""The HTTP API over TLS (``WebTls``): HTTPS with the controller's certificate, the login
cookie then Secure; with a client CA, a client without a certificate is refused."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
import pytest
import trustme
from starlette.responses import PlainTextResponse
from starlette.types import Receive, Scope, Send

from airlock.web import LOGIN_COOKIE, WebServer, WebTls

from .world import token, world

pytestmark = pytest.mark.timeout(60)


def issue(tmp_path: Path) -> tuple[trustme.CA, Path, Path, Path]:
    ca = trustme.CA()
    ca_file, cert, key = tmp_path / "ca.pem", tmp_path / "tls.crt", tmp_path / "tls.key"
    ca.cert_pem.write_to_path(str(ca_file))
    leaf = ca.issue_cert("127.0.0.1")
    cert.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    leaf.private_key_pem.write_to_path(str(key))
    return ca, ca_file, cert, key


async def test_https_sets_a_secure_login_cookie(tmp_path: Path) -> None:
    _, ca_file, cert, key = issue(tmp_path)
    async with world(tmp_path) as w, WebServer(w.app, "127.0.0.1:0", tls=WebTls(cert, key)) as web:
        assert web.url.startswith("https://127.0.0.1:")
        verify = ssl.create_default_context(cafile=str(ca_file))
        async with httpx.AsyncClient(base_url=web.url, verify=verify) as browser:
            response = await browser.post("/login", data={"token": token("carol")})
            assert response.status_code == 200
            cookie = next(c for c in response.headers.get_list("set-cookie") if c.startswith(LOGIN_COOKIE))
            assert "secure" in cookie.lower()
            assert (await browser.get("/api/v1/jobs")).status_code == 200


async def hello(scope: Scope, receive: Receive, send: Send) -> None:
    await PlainTextResponse("hello")(scope, receive, send)


async def test_a_client_ca_refuses_a_client_without_a_certificate(tmp_path: Path) -> None:
    ca, ca_file, cert, key = issue(tmp_path)
    client_ca = tmp_path / "clients.pem"
    ca.cert_pem.write_to_path(str(client_ca))
    async with WebServer(hello, "127.0.0.1:0", tls=WebTls(cert, key, client_ca)) as web:
        verify = ssl.create_default_context(cafile=str(ca_file))
        async with httpx.AsyncClient(base_url=web.url, verify=verify) as anonymous:
            with pytest.raises(httpx.TransportError):
                await anonymous.get("/")
        leaf = ca.issue_cert("alice")
        leaf.configure_cert(verify)
        async with httpx.AsyncClient(base_url=web.url, verify=verify) as alice:
            assert (await alice.get("/")).text == "hello"
