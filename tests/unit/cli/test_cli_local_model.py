"""``airlock run`` with the ``local-model`` placeholder, wired without Docker or a model.

A DockerBackend whose host address and ``run`` are stand-ins, and a stand-in
LocalModelServer, show the wiring: the server listens on the egress gateway, its key is a
sidecar credential resolved on the controller (never in the spec the sandbox gets), the
provider URL is rewritten to the credential proxy, and the server is stopped afterwards
only when this command started it.
"""

from __future__ import annotations

import dataclasses
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import airlock.localmodel
from airlock.cli import app
from airlock.controller import _execute
from airlock.localmodel import ServerInfo
from airlock.policy.plan import SidecarRoute
from airlock.proxy import CredentialProxyEvent
from airlock.sandbox import SandboxRequest, docker
from airlock.sandbox.docker import DockerBackend
from airlock.sandbox.docker._egress import proxy_urls
from airlock.turn import InferenceFinished
from layer0 import EnvironmentSpec, ExitReason, TurnOutput

from .clihelp import EXAMPLE

GATEWAY = "172.31.0.1"
KEY = "sk-local-test-key-0123456789"
QUESTION = "What is 17 * 23? Use the calculator."


class FakeServer:
    """Stands in for LocalModelServer (records what the command asked of it)."""

    instances: list[FakeServer] = []
    reuse = False

    def __init__(self, *, host: str = "127.0.0.1", port: int = 8765, **_: Any) -> None:
        self.host, self.port = host, port
        self.started_here = False
        self.ready = self.stopped = False
        self.start_port: int | None = -1
        self.info: ServerInfo | None = None
        FakeServer.instances.append(self)

    def _info(self, port: int) -> ServerInfo:
        return ServerInfo(
            pid=4242,
            host=self.host,
            port=port,
            model_id="qwen-test",
            model_sha256="0" * 64,
            api_key=KEY,
            log_path="/dev/null",
            started_at=0.0,
        )

    async def running(self) -> ServerInfo | None:
        return self._info(self.port) if FakeServer.reuse else None

    async def ensure_ready(self, progress: Any = None) -> None:
        self.ready = True

    async def start(self, host: str | None = None, port: int | None = None) -> ServerInfo:
        self.start_port = port
        self.started_here = not FakeServer.reuse
        self.info = self._info(self.port if port is None else 40001)
        return self.info

    async def stop(self) -> None:
        self.stopped = True


class FakeDocker(DockerBackend):
    """A DockerBackend that never talks to an engine."""

    seen: dict[str, Any] = {}
    made: dict[str, Any] = {}

    async def host_address(self) -> str:
        return GATEWAY

    async def run(self, request: SandboxRequest) -> TurnOutput:
        plan = request.plan
        names = [c.name for c in plan.sidecars]
        assert self.secrets is not None
        assert request.events is not None
        FakeDocker.seen = {
            "spec": request.environment,
            "routes": {c.name: c.route for c in plan.sidecars},
            "agent": request.agent.spec,
            "in_sandbox": request.agent.with_sidecar_routes(
                plan, proxy_urls(dict.fromkeys(names, 9100))
            ).final(),
            "key": await self.secrets.get("local-model-key"),
            "other": await self.secrets.get("anthropic-api-key"),
        }
        await request.events(
            InferenceFinished(
                iteration=1,
                stop_reason="end_turn",
                tokens_in=900,
                tokens_out=12,
                cost=None,  # a local model's calls carry no price
                total_tokens_in=900,
                total_tokens_out=12,
                total_cost=Decimal(0),
                duration_ms=4000,
            )
        )
        for c in plan.sidecars:
            assert c.route is not None
            await request.events(
                CredentialProxyEvent(
                    client="10.200.0.2:41000",
                    credential="local-model-key",
                    method="POST",
                    path="/v1/chat/completions",
                    upstream=c.route.upstream,
                    status=200,
                )
            )
        return TurnOutput.new("391", ExitReason.complete())


def fake_docker(**options: Any) -> FakeDocker:
    FakeDocker.made = dict(options)
    assert options.pop("settings") is None  # the Docker backend takes no settings
    return FakeDocker(client=object(), **{**options, "sweep": False})  # never sweep a real engine


@pytest.fixture(autouse=True)
def fakes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    FakeServer.instances = []
    FakeServer.reuse = False
    FakeDocker.seen = {}
    monkeypatch.setattr(airlock.localmodel, "LocalModelServer", FakeServer)
    FakeDocker.made = {}
    fake = dataclasses.replace(docker.BACKEND, factory=fake_docker)
    monkeypatch.setattr(_execute, "backend", lambda name: fake)

    async def free(host: str, port: int) -> bool:
        return True

    monkeypatch.setattr(_execute, "_bindable", free)
    monkeypatch.setenv("AIRLOCK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-not-for-the-demo")


def run_demo(runner: CliRunner) -> dict[str, Any]:
    result = runner.invoke(app, ["run", "--config", str(EXAMPLE), "demo", QUESTION, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_the_server_listens_on_the_egress_gateway_and_is_stopped(runner: CliRunner) -> None:
    data = run_demo(runner)
    (server,) = FakeServer.instances
    assert server.host == GATEWAY
    assert server.ready and server.started_here and server.stopped
    assert server.start_port is None  # the default port
    assert data["summary"]["local_model"] == {
        "model_id": "qwen-test",
        "base_url": f"http://{GATEWAY}:8765/v1",
        "pid": 4242,
        "started": True,
    }


def test_the_key_is_a_sidecar_credential_and_never_in_the_spec(runner: CliRunner) -> None:
    data = run_demo(runner)
    seen = FakeDocker.seen
    spec: EnvironmentSpec = seen["spec"]
    assert [(c.name, c.injection.kind) for c in spec.credentials] == [("local-model-key", "sidecar")]
    assert seen["routes"]["local-model-key"] == SidecarRoute(
        upstream=f"http://{GATEWAY}:8765", header="authorization", value_prefix="Bearer "
    )
    assert seen["key"] == KEY  # resolved on the controller, for the credential proxy
    assert seen["other"] is None  # the demo declares no other secret… and the chain still works
    assert spec.network is not None
    assert [(r.destination, r.port) for r in spec.network.rules] == [(f"{GATEWAY}/32", 8765)]
    assert seen["agent"].provider.base_url == f"http://{GATEWAY}:8765/v1"
    in_sandbox = seen["in_sandbox"].provider
    assert in_sandbox.base_url.endswith(":9100/v1") and GATEWAY not in in_sandbox.base_url
    assert in_sandbox.api_key_env is None
    assert KEY not in json.dumps(data)
    network = data["summary"]["network"]
    assert network["credential_proxy"] == [
        {
            "credential": "local-model-key",
            "method": "POST",
            "upstream": f"http://{GATEWAY}:8765",
            "path": "/v1/chat/completions",
            "status": 200,
        }
    ]


def test_a_local_models_costs_read_the_same_on_the_live_line_and_in_the_summary(runner: CliRunner) -> None:
    result = runner.invoke(app, ["run", "--config", str(EXAMPLE), "demo", QUESTION])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    line = "model call 1: 900 in / 12 out tokens, $0 (local) (4000 ms, end_turn); so far 900 in / 12 out"
    assert f"{line}, $0 (local)" in out
    assert "cost $0 (local)" in out


def test_a_running_server_on_the_gateway_is_reused_and_left_running(runner: CliRunner) -> None:
    FakeServer.reuse = True
    data = run_demo(runner)
    (server,) = FakeServer.instances
    assert not server.ready  # no set-up check for a running server
    assert not server.stopped
    assert data["summary"]["local_model"]["started"] is False


def test_a_busy_default_port_lets_the_server_pick_one(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def busy(host: str, port: int) -> bool:
        return False

    monkeypatch.setattr(_execute, "_bindable", busy)
    data = run_demo(runner)
    (server,) = FakeServer.instances
    assert server.start_port == 0
    assert data["summary"]["local_model"]["base_url"] == f"http://{GATEWAY}:40001/v1"
    assert FakeDocker.seen["routes"]["local-model-key"].upstream == f"http://{GATEWAY}:40001"


def test_the_configured_secrets_resolve_through_the_chain(runner: CliRunner) -> None:
    result = runner.invoke(app, ["run", "--config", str(EXAMPLE), "coder", "hi", "--json"])
    # The coder agent needs Anthropic; the fake sandbox answers without calling it.
    assert result.exit_code == 0, result.output
    assert FakeDocker.seen["other"] == "sk-ant-not-for-the-demo"
    assert FakeDocker.seen["key"] is None  # no local model: nothing under that name
    assert set(FakeDocker.made) == {"secrets", "state_dir", "image", "sweep", "settings", "pool"}
    assert FakeDocker.made["sweep"] is True  # a one-shot run sweeps what dead owners left
    assert FakeServer.instances == []


async def test_bindable_probe(unused_tcp_port: int) -> None:
    assert await _execute._bindable("127.0.0.1", unused_tcp_port)
