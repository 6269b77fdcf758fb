"""The CLI's TLS options reach the client and the server: ``airlock --tls-ca … jobs ls``
against a real TLS controller (its own thread and loop), and ``serve --tls-*`` plumbing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from typer.testing import CliRunner

from airlock.cli import _serve as serve_module
from airlock.cli import app
from airlock.controller import ServerTls
from tests.unit.cli.test_cli_jobs import BackgroundController

CONFIG = """\
version: 1
agents:
  calc:
    provider: {kind: scripted, script: calc.yaml}
    backend: process
"""
#: Each invocation starts without the TLS variables and leaves none behind (the options set them).
CLEAN = {
    "AIRLOCK_TLS_CA": None,
    "AIRLOCK_TLS_CERT": None,
    "AIRLOCK_TLS_KEY": None,
    "AIRLOCK_TLS": None,
    "AIRLOCK_TLS_SERVER_NAME": None,
}


class Files:
    """A server CA and certificate, and a client CA with one client's certificate."""

    def __init__(self, root: Path) -> None:
        ca, clients = trustme.CA(), trustme.CA()
        self.ca, self.client_ca = root / "ca.pem", root / "client-ca.pem"
        ca.cert_pem.write_to_path(str(self.ca))
        clients.cert_pem.write_to_path(str(self.client_ca))
        self.cert, self.key = self._leaf(ca.issue_cert("127.0.0.1"), root / "tls")
        self.client_cert, self.client_key = self._leaf(clients.issue_cert("alice"), root / "alice")

    @staticmethod
    def _leaf(issued: trustme.LeafCert, stem: Path) -> tuple[Path, Path]:
        cert, key = stem.with_suffix(".crt"), stem.with_suffix(".key")
        cert.write_bytes(b"".join(blob.bytes() for blob in issued.cert_chain_pems))
        issued.private_key_pem.write_to_path(str(key))
        return cert, key


@pytest.fixture
def files(tmp_path: Path) -> Files:
    return Files(tmp_path)


def _serve(write_config: Any, data_dir: Path, tls: ServerTls) -> BackgroundController:
    config = write_config(CONFIG, calc__yaml="steps: []\n")
    return BackgroundController(config, data_dir, tls)


def invoke(runner: CliRunner, *args: str, **env: str) -> Any:
    return runner.invoke(app, list(args), env={**CLEAN, "COLUMNS": "200", **env})


@pytest.fixture
def controller(write_config: Any, data_dir: Path, files: Files) -> Iterator[BackgroundController]:
    with _serve(write_config, data_dir, ServerTls(files.cert, files.key)) as served:
        yield served


def test_tls_ca_reaches_the_client(runner: CliRunner, controller: BackgroundController, files: Files) -> None:
    address = controller.controller.address
    refused = invoke(runner, "jobs", "ls", "--address", address, "--json")
    assert refused.exit_code == 3, refused.output
    assert "--tls-ca" in refused.output  # loopback without a CA is plaintext: the server hangs up
    served = invoke(runner, "--tls-ca", str(files.ca), "jobs", "ls", "--address", address, "--json")
    assert served.exit_code == 0, served.output
    assert json.loads(served.stdout)["jobs"] == []
    from_env = invoke(runner, "jobs", "ls", "--address", address, "--json", AIRLOCK_TLS_CA=str(files.ca))
    assert from_env.exit_code == 0, from_env.output


def test_client_certificate_reaches_the_client(
    runner: CliRunner, write_config: Any, data_dir: Path, files: Files
) -> None:
    tls = ServerTls(files.cert, files.key, client_ca=files.client_ca)
    with _serve(write_config, data_dir, tls) as served:
        address = served.controller.address
        base = ("--tls-ca", str(files.ca))
        without = invoke(runner, *base, "jobs", "ls", "--address", address, "--json")
        mutual = ("--tls-cert", str(files.client_cert), "--tls-key", str(files.client_key))
        with_cert = invoke(runner, *base, *mutual, "jobs", "ls", "--address", address, "--json")
    assert without.exit_code == 3, without.output
    assert with_cert.exit_code == 0, with_cert.output


def test_a_client_certificate_needs_its_key(runner: CliRunner, files: Files) -> None:
    result = invoke(runner, "--tls-cert", str(files.client_cert), "jobs", "ls")
    assert result.exit_code == 2
    assert "go together" in result.output


def test_serve_flags_reach_the_server_options(
    runner: CliRunner, write_config: Any, files: Files, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[serve_module.ServeOptions] = []
    monkeypatch.setattr(serve_module, "serve", lambda config, opts: seen.append(opts))
    config = write_config(CONFIG, calc__yaml="steps: []\n")
    tls = (
        "--tls-cert",
        str(files.cert),
        "--tls-key",
        str(files.key),
        "--tls-client-ca",
        str(files.client_ca),
    )
    result = invoke(runner, "serve", "--config", str(config), *tls)
    assert result.exit_code == 0, result.output
    assert serve_module._server_tls(seen[0]) == ServerTls(files.cert, files.key, files.client_ca)
    plain = serve_module.ServeOptions(address="127.0.0.1:0")
    assert serve_module._server_tls(plain) is None


@pytest.mark.parametrize(
    "given",
    [{"tls_cert": Path("c")}, {"tls_key": Path("k")}, {"tls_client_ca": Path("ca")}],
)
def test_serve_refuses_half_a_tls_configuration(given: dict[str, Path]) -> None:
    from airlock.errors import ConfigError

    with pytest.raises(ConfigError):
        serve_module._server_tls(serve_module.ServeOptions(address="127.0.0.1:0", **given))  # type: ignore[arg-type]
