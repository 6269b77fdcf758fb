"""``python -m airlock.proxy bundle``: the egress proxy and a credential proxy in one real process."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import httpx
import pytest

from airlock.policy.plan import EgressPlan, EgressRule, SidecarRoute
from airlock.proxy import PROXY_EVENT, CredentialProxyEvent, EgressEvent, MemorySink
from airlock.proxy.bundle import BundleConfig, CredentialListener, ProxyBundle

from .proxy_servers import RecordingServer

SECRET = "sk-ant-api03-BUNDLE-SECRET-0123456789"


def allow(port: int) -> EgressRule:
    return EgressRule(destination="127.0.0.1/32", kind="cidr", port=port, action="allow", source="test")


async def test_bundle_process_runs_egress_and_credential_proxies(
    tmp_path: Path, http_server: RecordingServer, other_server: RecordingServer
) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text(SECRET + "\n")
    events = tmp_path / "events.jsonl"
    config = BundleConfig(
        host="127.0.0.1",
        egress_port=0,
        plan=EgressPlan(rules=(allow(http_server.port),)),
        credentials=(
            CredentialListener(
                credential="anthropic-api-key",
                route=SidecarRoute(upstream=f"http://127.0.0.1:{http_server.port}", header="x-api-key"),
                port=0,
                secret_file=str(secret_file),
            ),
        ),
        clients=("127.0.0.0/8",),
        events=(f"file:{events}",),
    )
    (tmp_path / "bundle.json").write_text(config.model_dump_json())
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "airlock.proxy", "bundle", "--config", str(tmp_path / "bundle.json"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    lines = [(await asyncio.wait_for(proc.stderr.readline(), 20)).decode() for _ in range(3)]
    assert lines[2].strip() == "airlock-proxy bundle ready", lines
    egress_addr = lines[0].rsplit(" ", 1)[1].strip()
    cred_addr = lines[1].rsplit(" ", 1)[1].strip()
    assert lines[0].startswith("airlock-proxy egress") and "credentials anthropic-api-key" in lines[1]
    try:
        async with httpx.AsyncClient(proxy=f"http://{egress_addr}", trust_env=False, timeout=10) as c:
            ok = await c.get(f"http://127.0.0.1:{http_server.port}/via-egress")
            denied = await c.get(f"http://127.0.0.1:{other_server.port}/")
        async with httpx.AsyncClient(trust_env=False, timeout=10) as c:
            sidecar = await c.post(
                f"http://{cred_addr}/v1/echo", json={"q": 1}, headers={"x-api-key": "sandbox-placeholder"}
            )
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 0, err
    assert ok.status_code == 200 and denied.status_code == 403
    assert sidecar.status_code == 200, sidecar.text
    assert other_server.connections == 0
    received = [r for r in http_server.requests if r.path == "/v1/echo"]
    assert len(received) == 1 and received[0].headers.get("x-api-key") == [SECRET]
    parsed = [PROXY_EVENT.validate_json(line) for line in events.read_text().splitlines()]
    assert {type(e) for e in parsed} == {EgressEvent, CredentialProxyEvent}
    assert SECRET not in events.read_text() + out.decode() + err.decode() + "".join(lines)


async def test_bundle_refuses_clients_outside_the_sandbox_network(http_server: RecordingServer) -> None:
    config = BundleConfig(
        host="127.0.0.1",
        egress_port=0,
        plan=EgressPlan(rules=(allow(http_server.port),)),
        clients=("10.9.0.0/16",),
    )
    sink = MemorySink()
    async with ProxyBundle(config, sink) as bundle:
        ((_, host, port),) = await bundle.start(())
        async with httpx.AsyncClient(proxy=f"http://{host}:{port}", trust_env=False, timeout=5) as c:
            with pytest.raises(httpx.HTTPError):
                await c.get(f"http://127.0.0.1:{http_server.port}/")
    assert http_server.connections == 0 and sink.events == []


async def test_credential_upstream_is_checked_against_the_plan(
    http_server: RecordingServer, tmp_path: Path
) -> None:
    secret_file = tmp_path / "s"
    secret_file.write_text(SECRET)
    config = BundleConfig(
        host="127.0.0.1",
        egress_port=None,
        plan=EgressPlan(rules=(allow(http_server.port + 1),)),  # not the upstream's port
        credentials=(
            CredentialListener(
                credential="k",
                route=SidecarRoute(upstream=f"http://127.0.0.1:{http_server.port}", header="x-api-key"),
                port=0,
                secret_file=str(secret_file),
            ),
        ),
    )
    sink = MemorySink()
    async with ProxyBundle(config, sink) as bundle:
        ((_, host, port),) = await bundle.start(ProxyBundle.read_secrets(config))
        async with httpx.AsyncClient(trust_env=False, timeout=5) as c:
            r = await c.get(f"http://{host}:{port}/v1/models")
    assert r.status_code == 403 and "egress denied the upstream" in r.text
    assert http_server.connections == 0


def test_bundle_secret_files_must_exist(tmp_path: Path) -> None:
    listener = CredentialListener(
        credential="k",
        route=SidecarRoute(upstream="https://api.example.test", header="x-api-key"),
        port=8081,
        secret_file=str(tmp_path / "missing"),
    )
    with pytest.raises(ValueError, match="cannot read the secret of k"):
        ProxyBundle.read_secrets(BundleConfig(credentials=(listener,)))
    (tmp_path / "missing").write_text("\n")
    with pytest.raises(ValueError, match="secret of k is empty"):
        ProxyBundle.read_secrets(BundleConfig(credentials=(listener,)))


async def test_a_waiting_bundle_starts_when_its_config_appears(
    tmp_path: Path, http_server: RecordingServer
) -> None:
    path = tmp_path / "bundle.json"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "airlock.proxy", "bundle", "--config", str(path), "--wait-config",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    try:
        waiting = await asyncio.wait_for(proc.stderr.readline(), 20)
        assert waiting.decode().strip() == "airlock-proxy bundle waiting for its configuration"
        config = BundleConfig(
            host="127.0.0.1",
            egress_port=0,
            plan=EgressPlan(rules=(allow(http_server.port),)),
            clients=("127.0.0.0/8",),
        )
        staged = tmp_path / "bundle.json.tmp"
        staged.write_text(config.model_dump_json())
        staged.rename(path)  # written whole, as the backend does
        lines = [(await asyncio.wait_for(proc.stderr.readline(), 20)).decode().strip() for _ in range(2)]
        assert lines[0].startswith("airlock-proxy egress listening on 127.0.0.1:")
        assert lines[1] == "airlock-proxy bundle ready"
        address = lines[0].rsplit(" ", 1)[1]
        async with httpx.AsyncClient(proxy=f"http://{address}", trust_env=False, timeout=10) as c:
            assert (await c.get(f"http://127.0.0.1:{http_server.port}/late")).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 0


async def test_a_waiting_bundle_stops_on_sigterm(tmp_path: Path) -> None:
    never = str(tmp_path / "never.json")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "airlock.proxy", "bundle", "--config", never, "--wait-config",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    await asyncio.wait_for(proc.stderr.readline(), 20)
    proc.send_signal(signal.SIGTERM)
    await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 0
