"""TLS on the jobs API, over real gRPC: certificates from trustme, a real ControllerServer."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trustme

from airlock.config import load_config
from airlock.controller import AgentRunner, ControllerServer, JobService, ServerTls, SqliteJobStore
from airlock.jobs import ControllerClient, ControllerError, TlsFileError, client_tls, is_local_address
from airlock.state import SqliteStore

TOKEN = "t0ken"


class Pki:
    """A CA, the server's certificate for localhost/127.0.0.1, and the files of both."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ca = trustme.CA()
        self.server = self.ca.issue_cert("localhost", "127.0.0.1")
        self.ca_file = root / "ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_file))
        self.cert = root / "tls.crt"
        self.key = root / "tls.key"
        self.write_server(self.server)

    def write_server(self, issued: trustme.LeafCert) -> None:
        issued.private_key_pem.write_to_path(str(self.key))
        self.cert.write_bytes(b"".join(blob.bytes() for blob in issued.cert_chain_pems))

    def client_files(self, ca: trustme.CA, name: str) -> tuple[Path, Path]:
        issued = ca.issue_cert(name)
        cert, key = self.root / f"{name}.crt", self.root / f"{name}.key"
        cert.write_bytes(b"".join(blob.bytes() for blob in issued.cert_chain_pems))
        issued.private_key_pem.write_to_path(str(key))
        return cert, key


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path)


@pytest.fixture
def no_tls_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "AIRLOCK_TLS_CA",
        "AIRLOCK_TLS",
        "AIRLOCK_TLS_CERT",
        "AIRLOCK_TLS_KEY",
        "AIRLOCK_TLS_SERVER_NAME",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[JobService]:
    (tmp_path / "s.yaml").write_text("steps: []\n")
    config = tmp_path / "airlock.yaml"
    config.write_text(
        "version: 1\nagents:\n  a:\n    provider: {kind: scripted, script: s.yaml}\n    backend: process\n"
    )
    async with SqliteJobStore(tmp_path / "jobs.db") as store, SqliteStore(tmp_path / "state.db") as state:
        yield JobService(store, AgentRunner(load_config(config)), state)  # not started: no workers


async def _agents(address: str, **tls: object) -> list[str]:
    async with ControllerClient(address, TOKEN, **tls) as client:  # type: ignore[arg-type]
        return [str(a["name"]) for a in await client.agents()]


@pytest.mark.usefixtures("no_tls_env")
async def test_a_client_with_the_ca_is_served(service: JobService, pki: Pki) -> None:
    async with ControllerServer(service, TOKEN, "127.0.0.1:0", tls=ServerTls(pki.cert, pki.key)) as server:
        assert server.address is not None
        assert await _agents(server.address, tls_ca=pki.ca_file) == ["a"]
        assert await _agents(server.address, tls_ca=pki.ca.cert_pem.bytes()) == ["a"]


@pytest.mark.usefixtures("no_tls_env")
async def test_the_ca_can_come_from_the_environment(
    service: JobService, pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRLOCK_TLS_CA", str(pki.ca_file))
    async with ControllerServer(service, TOKEN, "127.0.0.1:0", tls=ServerTls(pki.cert, pki.key)) as server:
        assert server.address is not None
        assert await _agents(server.address) == ["a"]


@pytest.mark.usefixtures("no_tls_env")
async def test_a_client_without_the_ca_is_refused(service: JobService, pki: Pki, tmp_path: Path) -> None:
    other = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    async with ControllerServer(service, TOKEN, "127.0.0.1:0", tls=ServerTls(pki.cert, pki.key)) as server:
        assert server.address is not None
        with pytest.raises(ControllerError) as refused:
            await _agents(server.address, tls_ca=other)
    assert refused.value.code == "UNAVAILABLE"
    assert "not trusted" in str(refused.value) and "--tls-ca" in str(refused.value)


@pytest.mark.usefixtures("no_tls_env")
async def test_a_plaintext_client_cannot_talk_to_a_tls_server(service: JobService, pki: Pki) -> None:
    async with ControllerServer(service, TOKEN, "127.0.0.1:0", tls=ServerTls(pki.cert, pki.key)) as server:
        assert server.address is not None
        with pytest.raises(ControllerError) as refused:
            await _agents(server.address)  # loopback: plaintext by default
    assert refused.value.code == "UNAVAILABLE"


@pytest.mark.usefixtures("no_tls_env")
async def test_mutual_tls_refuses_a_client_without_a_certificate(service: JobService, pki: Pki) -> None:
    clients = trustme.CA()
    client_ca = pki.root / "client-ca.pem"
    clients.cert_pem.write_to_path(str(client_ca))
    good_cert, good_key = pki.client_files(clients, "alice")
    bad_cert, bad_key = pki.client_files(trustme.CA(), "mallory")
    tls = ServerTls(pki.cert, pki.key, client_ca=client_ca)
    async with ControllerServer(service, TOKEN, "127.0.0.1:0", tls=tls) as server:
        assert server.address is not None
        with pytest.raises(ControllerError) as no_cert:
            await _agents(server.address, tls_ca=pki.ca_file)
        with pytest.raises(ControllerError) as wrong_cert:
            await _agents(server.address, tls_ca=pki.ca_file, client_cert=bad_cert, client_key=bad_key)
        served = await _agents(server.address, tls_ca=pki.ca_file, client_cert=good_cert, client_key=good_key)
    assert no_cert.value.code == wrong_cert.value.code == "UNAVAILABLE"
    assert served == ["a"]


@pytest.mark.usefixtures("no_tls_env")
async def test_a_rotated_certificate_is_served_without_a_restart(service: JobService, pki: Pki) -> None:
    async with ControllerServer(service, TOKEN, "127.0.0.1:0", tls=ServerTls(pki.cert, pki.key)) as server:
        assert server.address is not None
        assert await _agents(server.address, tls_ca=pki.ca_file) == ["a"]
        rotated = trustme.CA()
        pki.write_server(rotated.issue_cert("localhost", "127.0.0.1"))
        stamp = pki.cert.stat().st_mtime_ns + 10**9  # a distinct mtime however coarse the clock
        for path in (pki.cert, pki.key):
            os.utime(path, ns=(stamp, stamp))
        assert await _agents(server.address, tls_ca=rotated.cert_pem.bytes()) == ["a"]
        with pytest.raises(ControllerError):
            await _agents(server.address, tls_ca=pki.ca_file)


@pytest.mark.usefixtures("no_tls_env")
async def test_the_server_name_can_differ_from_the_address(
    service: JobService, pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A certificate for the Service's name, reached through a port-forward on 127.0.0.1."""
    pki.write_server(pki.ca.issue_cert("rel-airlock.airlock.svc"))
    async with ControllerServer(service, TOKEN, "127.0.0.1:0", tls=ServerTls(pki.cert, pki.key)) as server:
        assert server.address is not None
        with pytest.raises(ControllerError):
            await _agents(server.address, tls_ca=pki.ca_file)
        named = await _agents(server.address, tls_ca=pki.ca_file, tls_server_name="rel-airlock.airlock.svc")
        monkeypatch.setenv("AIRLOCK_TLS_SERVER_NAME", "rel-airlock.airlock.svc")
        from_env = await _agents(server.address, tls_ca=pki.ca_file)
    assert named == from_env == ["a"]


@pytest.mark.usefixtures("no_tls_env")
async def test_loopback_stays_plaintext_by_default(service: JobService) -> None:
    async with ControllerServer(service, TOKEN, "127.0.0.1:0") as server:
        assert server.address is not None
        assert client_tls(server.address) is None
        assert await _agents(server.address) == ["a"]


@pytest.mark.parametrize(
    ("address", "local"),
    [
        ("127.0.0.1:7878", True),
        ("127.1.2.3:1", True),
        ("localhost:7878", True),
        ("[::1]:7878", True),
        ("unix:/run/airlock.sock", True),
        ("dns:///localhost:7878", True),
        ("0.0.0.0:7878", False),
        ("[::]:7878", False),
        ("10.0.0.5:7878", False),
        ("airlock.example.com:443", False),
        ("localhost.example.com:443", False),
    ],
)
def test_which_addresses_are_local(address: str, local: bool) -> None:
    assert is_local_address(address) is local


@pytest.mark.usefixtures("no_tls_env")
def test_a_remote_address_requires_tls_against_the_system_roots_by_default() -> None:
    decided = client_tls("airlock.example.com:443")
    assert decided is not None
    assert decided.root_certificates is None  # the system roots: verified, never unverified
    assert decided.certificate_chain is None


@pytest.mark.usefixtures("no_tls_env")
def test_plaintext_to_a_remote_address_only_when_asked_and_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="airlock.jobs"):
        assert client_tls("10.0.0.5:7878", tls=False) is None
        monkeypatch.setenv("AIRLOCK_TLS", "0")
        assert client_tls("10.0.0.5:7878") is None
    assert sum("in clear" in r.getMessage() for r in caplog.records) == 2
    monkeypatch.setenv("AIRLOCK_TLS", "1")
    assert client_tls("127.0.0.1:7878") is not None
    monkeypatch.setenv("AIRLOCK_TLS", "maybe")
    with pytest.raises(TlsFileError, match="AIRLOCK_TLS"):
        client_tls("127.0.0.1:7878")


@pytest.mark.usefixtures("no_tls_env")
def test_bad_client_tls_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(TlsFileError, match=r"missing\.pem"):
        client_tls("127.0.0.1:1", tls_ca=tmp_path / "missing.pem")
    (tmp_path / "junk.pem").write_text("not a certificate")
    with pytest.raises(TlsFileError, match=r"junk\.pem is not PEM"):
        client_tls("127.0.0.1:1", tls_ca=tmp_path / "junk.pem")
    with pytest.raises(TlsFileError, match="go together"):
        client_tls("127.0.0.1:1", client_cert=tmp_path / "junk.pem")


async def test_bad_server_tls_files_are_named_at_start(service: JobService, pki: Pki, tmp_path: Path) -> None:
    missing = ServerTls(tmp_path / "nope.crt", pki.key)
    with pytest.raises(TlsFileError, match=r"nope\.crt"):
        await ControllerServer(service, TOKEN, "127.0.0.1:0", tls=missing).start()
    not_a_key = ServerTls(pki.cert, pki.cert)
    with pytest.raises(TlsFileError, match="no PEM private key"):
        await ControllerServer(service, TOKEN, "127.0.0.1:0", tls=not_a_key).start()


@pytest.mark.parametrize(("listen", "warned"), [("0.0.0.0:0", True), ("127.0.0.1:0", False)])
async def test_plaintext_off_loopback_warns_at_every_start(
    service: JobService, caplog: pytest.LogCaptureFixture, listen: str, warned: bool
) -> None:
    with caplog.at_level(logging.WARNING, logger="airlock.controller"):
        for _ in range(2):
            async with ControllerServer(service, TOKEN, listen):
                pass
    warnings = [r.getMessage() for r in caplog.records if "WITHOUT TLS" in r.getMessage()]
    assert len(warnings) == (2 if warned else 0)
    if warned:
        assert "in clear" in warnings[0] and "--tls-cert" in warnings[0]


async def test_tls_off_loopback_does_not_warn(
    service: JobService, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="airlock.controller"):
        async with ControllerServer(service, TOKEN, "0.0.0.0:0", tls=ServerTls(pki.cert, pki.key)):
            pass
    assert not [r for r in caplog.records if "WITHOUT TLS" in r.getMessage()]
