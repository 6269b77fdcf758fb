"""Fixtures: loopback test servers (see proxy_servers.py); nothing else is ever contacted."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator

import pytest

from .proxy_servers import Cert, RecordingServer, _start


@pytest.fixture
def http_server() -> Iterator[RecordingServer]:
    rec = _start()
    yield rec
    rec.sse_gate.set()
    rec.server.shutdown()
    rec.server.server_close()


@pytest.fixture
def other_server() -> Iterator[RecordingServer]:
    rec = _start()
    yield rec
    rec.server.shutdown()
    rec.server.server_close()


@pytest.fixture(scope="session")
def cert(tmp_path_factory: pytest.TempPathFactory) -> Cert:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.fail("the openssl CLI is needed to make the test certificate")
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            str(d / "key.pem"),
            "-out",
            str(d / "cert.pem"),
            "-days",
            "1",
            "-subj",
            "/CN=allowed.test",
            "-addext",
            "subjectAltName=DNS:allowed.test,DNS:other.test,IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return Cert(d / "cert.pem", d / "key.pem")


@pytest.fixture
def tls_server(cert: Cert) -> Iterator[RecordingServer]:
    rec = _start(cert.server_context())
    yield rec
    rec.server.shutdown()
    rec.server.server_close()
