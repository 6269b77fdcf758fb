"""MCP servers in real Docker sandboxes (the runner image): a stdio server started inside the
sandbox by the runner, and a streamable-HTTP server this test starts on the host, reached
through the sandbox's egress proxy when the agent's network policy allows its address, and
refused (the proxy's denial an event) when it does not; a server that wants a bearer token gets
it from the sandbox's credential proxy (a sidecar credential), and the sandbox never sees it,
even when the server reflects it back.

Topology of the HTTP tests: a Docker network this module creates, on ``11.91.0.0/24`` (a
public-looking range inside the test's own network, so only an explicit rule grants it); the
host carries the gateway address ``11.91.0.1``, where the MCP server listens; the egress
proxy joins the network (``DockerEnvironment(egress_networks=...)``). Nothing else is reached.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airlock.build import build_turn
from airlock.policy.plan import SidecarRoute
from airlock.policy.secrets import EnvSecretResolver
from airlock.proxy import CredentialProxyEvent, EgressEvent
from airlock.sandbox.docker import DockerEnvironment, DockerSettings
from airlock.spec import AgentSpec
from airlock.testing import scripted_agent, text_step, tool_step
from airlock.turn import InferenceStarted, ToolFinished
from layer0 import (
    CredentialInjection,
    CredentialRef,
    EnvError,
    EnvironmentSpec,
    ExitReason,
    NetworkAction,
    NetworkPolicy,
    NetworkRule,
    TurnInput,
)
from tests.support.containers import OWNER, assert_clean
from tests.support.mcp_servers import serving_http, stdio_command

pytestmark = pytest.mark.docker

SUBNET = "11.91.0.0/24"
GATEWAY = "11.91.0.1"
#: The runner image's interpreter (it has the mcp SDK).
PYTHON = "/opt/venv/bin/python"


def tool_results(events: list[Any]) -> list[Any]:
    return [json.loads(e.output) for e in events if isinstance(e, ToolFinished)]


async def run(
    env: DockerEnvironment, agent: AgentSpec, spec: EnvironmentSpec, tmp_path: Path
) -> tuple[Any, list[Any]]:
    events: list[Any] = []

    async def sink(event: Any) -> None:
        events.append(event)

    workspace = tmp_path / "host-workspace"
    workspace.mkdir(exist_ok=True)
    output = await env.run(build_turn(agent, workspace=workspace), TurnInput.new("go"), spec, events=sink)
    return output, events


async def test_a_stdio_server_runs_inside_the_sandbox(
    env: DockerEnvironment, tmp_path: Path, docker_client: Any
) -> None:
    agent = scripted_agent(
        [
            tool_step("srv.where", {}, id="t1", match={"tools": ["bash", "srv.echo", "srv.where"]}),
            # The runner sweeps orphans after each bash call: the server is no orphan of it.
            tool_step("bash", {"command": "echo swept"}, id="t2"),
            tool_step("srv.echo", {"text": "from inside"}, id="t3"),
            text_step("done"),
        ],
        name="mcp-stdio",
        tools=["bash"],
        mcp_servers=[
            {
                "name": "srv",
                "transport": "stdio",
                "command": stdio_command(python=PYTHON),
                "env": {"MCP_TEST_VAR": "set by the spec"},
                "allowed_tools": ["echo", "where"],
            }
        ],
    )
    output, events = await run(env, agent, EnvironmentSpec(), tmp_path)
    assert output.exit_reason == ExitReason.complete(), output
    where, swept, echo = tool_results(events)
    assert swept["stdout"] == "swept\n"
    assert where["cwd"] == "/workspace"  # the sandbox's workspace
    assert where["pgid"] == where["pid"]  # a process group of its own
    assert where["MCP_TEST_VAR"] == "set by the spec" and where["AIRLOCK_RUNNER_TOKEN"] == ""
    assert echo == {"result": "from inside"}
    assert_clean(docker_client, env.sandbox.state_dir)


@pytest.fixture(scope="module")
def mcp_network(docker_client: Any) -> Iterator[str]:
    import docker

    ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=SUBNET, gateway=GATEWAY)])
    network = docker_client.networks.create(
        f"altest-mcp-{os.urandom(3).hex()}", driver="bridge", ipam=ipam, labels={"airlock.test": OWNER}
    )
    try:
        yield network.name
    finally:
        network.remove()


@pytest.fixture(scope="module")
def mcp_http(mcp_network: str) -> Iterator[int]:
    """The test MCP server on the host, listening on the test network's gateway address."""
    with serving_http(GATEWAY) as (_, port):
        yield port


@pytest.fixture
def penv(
    runner_image: str, state_dir: Path, docker_settings: DockerSettings, mcp_network: str, docker_client: Any
) -> Iterator[DockerEnvironment]:
    yield DockerEnvironment(
        image=runner_image,
        state_dir=state_dir,
        sweep=False,
        settings=docker_settings,
        egress_networks=[mcp_network],
    )


def allowing(port: int) -> EnvironmentSpec:
    return EnvironmentSpec(
        network=NetworkPolicy(
            default=NetworkAction.DENY,
            rules=[NetworkRule(destination=f"{GATEWAY}/32", port=port, action=NetworkAction.ALLOW)],
        )
    )


def remote(port: int, *tools: str) -> dict[str, Any]:
    """The test server on ``port`` of the gateway as the agent's http MCP server ``remote``."""
    return {
        "name": "remote",
        "transport": "http",
        "url": f"http://{GATEWAY}:{port}/mcp",
        "allowed_tools": list(tools),
    }


def http_agent(port: int) -> AgentSpec:
    return scripted_agent(
        [
            tool_step("remote.add", {"a": 20, "b": 22}, match={"tools": ["remote.add", "remote.echo"]}),
            text_step("42"),
        ],
        name="mcp-http",
        mcp_servers=[remote(port, "add", "echo")],
    )


def decisions(events: list[Any], port: int) -> list[EgressEvent]:
    return [
        e
        for e in events
        if isinstance(e, EgressEvent) and e.phase == "decision" and (e.host, e.port) == (GATEWAY, port)
    ]


async def test_an_http_server_is_reached_through_the_egress_proxy(
    penv: DockerEnvironment, mcp_http: int, tmp_path: Path, state_dir: Path, docker_client: Any
) -> None:
    output, events = await run(penv, http_agent(mcp_http), allowing(mcp_http), tmp_path)
    assert output.exit_reason == ExitReason.complete(), output
    assert tool_results(events) == [{"result": 42}]
    allowed = decisions(events, mcp_http)
    assert allowed and all(e.allowed for e in allowed)
    assert "spec.network.rules[0]" in allowed[0].rule
    assert_clean(docker_client, state_dir)


async def test_an_http_server_outside_the_allow_list_is_denied_and_the_denial_is_an_event(
    penv: DockerEnvironment, mcp_http: int, tmp_path: Path, state_dir: Path, docker_client: Any
) -> None:
    events: list[Any] = []

    async def sink(event: Any) -> None:
        events.append(event)

    workspace = tmp_path / "host-workspace"
    workspace.mkdir()
    # The policy allows the host, on another port only: the server's address is not allowed.
    with pytest.raises(EnvError) as e:
        await penv.run(
            build_turn(http_agent(mcp_http), workspace=workspace),
            TurnInput.new("go"),
            allowing(mcp_http + 1),
            events=sink,
        )
    message = str(e.value)
    assert not [e for e in events if isinstance(e, InferenceStarted)]  # refused before any model call
    assert f"MCP server 'remote' (http: http://{GATEWAY}:{mcp_http}/mcp) did not start" in message
    assert "did not start: the server answered HTTP 403 Forbidden: airlock egress denied: " in message
    denied = decisions(events, mcp_http)
    assert denied and not any(d.allowed for d in denied)
    assert denied[0].rule == "default deny" and denied[0].reason in message
    assert_clean(docker_client, state_dir)


# --- a sidecar credential for an HTTP server ------------------------------------------------------

#: The HTTP server's bearer token; the sandbox must never hold it.
TOKEN = "mcp-tok/" + secrets.token_hex(16)


@pytest.fixture(scope="module")
def mcp_http_token(mcp_network: str) -> Iterator[int]:
    """The test MCP server on the host, answering 401 to any request without ``TOKEN``."""
    with serving_http(GATEWAY, token=TOKEN) as (_, port):
        yield port


@pytest.fixture
def senv(
    runner_image: str, state_dir: Path, docker_settings: DockerSettings, mcp_network: str
) -> Iterator[DockerEnvironment]:
    """A Docker environment that resolves the credential ``mcp-key`` to ``TOKEN``."""
    yield DockerEnvironment(
        image=runner_image,
        state_dir=state_dir,
        sweep=False,
        settings=docker_settings,
        egress_networks=[mcp_network],
        secrets=EnvSecretResolver({"MCP_KEY": TOKEN}),
    )


def token_agent(port: int) -> AgentSpec:
    return scripted_agent(
        [
            tool_step("remote.authorization", {}, id="a1"),
            tool_step("remote.add", {"a": 1, "b": 2}, id="a2"),
            text_step("done"),
        ],
        name="mcp-token",
        mcp_servers=[remote(port, "authorization", "add")],
    )


async def test_an_http_servers_sidecar_credential_is_added_outside_the_sandbox(
    senv: DockerEnvironment, mcp_http_token: int, tmp_path: Path, state_dir: Path, docker_client: Any
) -> None:
    port = mcp_http_token
    spec = allowing(port).model_copy(
        update={"credentials": [CredentialRef(name="mcp-key", injection=CredentialInjection.sidecar())]}
    )
    route = SidecarRoute(upstream=f"http://{GATEWAY}:{port}", header="authorization", value_prefix="Bearer ")
    events: list[Any] = []

    async def sink(event: Any) -> None:
        events.append(event)

    workspace = tmp_path / "host-workspace"
    workspace.mkdir()
    output = await senv.run(
        build_turn(token_agent(port), workspace=workspace),
        TurnInput.new("go"),
        spec,
        events=sink,
        sidecar_routes={"mcp-key": route},
    )
    assert output.exit_reason == ExitReason.complete(), output
    reflected, added = tool_results(events)
    assert added == {"result": 3}
    # The server got the token (it answers nothing without it) and reflected it: what reached
    # the sandbox is masked.
    assert reflected == {"result": "*" * len(f"Bearer {TOKEN}")}
    calls = [e for e in events if isinstance(e, CredentialProxyEvent)]
    assert calls and {e.credential for e in calls} == {"mcp-key"}
    assert all(e.path == "/mcp" for e in calls)
    assert any(e.method == "POST" and e.status == 200 for e in calls)
    assert sum(e.redacted for e in calls) >= 1
    # The MCP traffic went to the credential proxy, not out through the egress proxy.
    assert not decisions(events, port)
    assert TOKEN not in output.model_dump_json() + "".join(repr(e) for e in events)
    assert_clean(docker_client, state_dir)


async def test_without_its_credential_the_http_server_refuses_and_the_job_says_why(
    penv: DockerEnvironment, mcp_http_token: int, tmp_path: Path, state_dir: Path, docker_client: Any
) -> None:
    workspace = tmp_path / "host-workspace"
    workspace.mkdir()
    with pytest.raises(EnvError) as e:
        await penv.run(
            build_turn(token_agent(mcp_http_token), workspace=workspace),
            TurnInput.new("go"),
            allowing(mcp_http_token),
        )
    assert "MCP server 'remote'" in str(e.value) and "401" in str(e.value)
    assert_clean(docker_client, state_dir)
