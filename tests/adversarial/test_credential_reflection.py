"""A sidecar credential's upstream echoes the injected key: the sandbox still never sees it.

Real path: a Docker sandbox, its proxy container (the credential proxy of a sidecar
credential), and an upstream this test starts on the host's address on the egress network.
The upstream (``ReflectingUpstream``, path ``/json``) reflects the request head it receives
(with the ``Authorization: Bearer <key>`` the proxy injected) in its reason phrase, a
response header and the body, JSON-escaped and percent-encoded. Inside the sandbox, a bash
tool calls the credential proxy and prints what it received hex-encoded, so that the
controller's own redaction of tool output cannot hide a leak from this test: the bytes are
decoded here and searched for the key in every form.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from airlock.build import build_turn
from airlock.policy.plan import SidecarRoute
from airlock.policy.secrets import EnvSecretResolver
from airlock.proxy import CredentialProxyEvent
from airlock.sandbox.docker import DockerEnvironment, DockerSettings
from airlock.sandbox.docker._egress import CREDENTIAL_PORT_BASE, PROXY_ALIAS
from airlock.testing import bash_agent
from airlock.turn import ToolFinished
from layer0 import (
    Content,
    CredentialInjection,
    CredentialRef,
    EnvironmentSpec,
    NetworkAction,
    NetworkPolicy,
    NetworkRule,
    TriggerType,
    TurnInput,
)
from tests.support.containers import assert_clean, assert_none_left
from tests.support.echo import ReflectingUpstream, reflecting_upstream

pytestmark = [pytest.mark.docker, pytest.mark.attack("secrets")]

# Runs inside the sandbox: one request to the credential proxy, the raw reply as hex.
CALL = (
    "python - <<'EOF'\n"
    "import socket\n"
    "s = socket.create_connection(('{host}', {port}), timeout=20)\n"
    "s.sendall(b'GET /json HTTP/1.1\\r\\nHost: sidecar\\r\\nAuthorization: Bearer placeholder\\r\\n\\r\\n')\n"
    "data = b''\n"
    "while chunk := s.recv(65536):\n"
    "    data += chunk\n"
    "print('reply', data.hex())\n"
    "EOF"
)


@pytest.fixture
async def echo_env(
    runner_image: str, state_dir: Path, docker_client: Any, docker_settings: DockerSettings
) -> AsyncIterator[tuple[DockerEnvironment, dict[str, str], ReflectingUpstream, str]]:
    values: dict[str, str] = {}
    env = DockerEnvironment(
        image=runner_image,
        state_dir=state_dir,
        sweep=False,
        secrets=EnvSecretResolver(values),
        settings=docker_settings,
    )
    gateway = await env.host_address()
    assert gateway is not None
    async with reflecting_upstream(gateway) as echo:
        yield env, values, echo, gateway
    assert_none_left(docker_client)


def forms(value: str) -> list[bytes]:
    escaped = json.dumps(value)[1:-1]
    return [f.encode() for f in {value, escaped, escaped.replace("/", "\\/"), quote(value, safe="")}]


async def test_an_echoing_upstream_does_not_hand_the_key_to_the_sandbox(
    echo_env: Any, docker_client: Any, tmp_path: Path, state_dir: Path
) -> None:
    env, values, echo, gateway = echo_env
    port = echo.port
    secret = "sk-echo/" + secrets.token_hex(16)  # a "/" so that the JSON-escaped forms differ
    values["ECHO_KEY"] = secret
    spec = EnvironmentSpec(
        network=NetworkPolicy(
            default=NetworkAction.DENY,
            rules=[NetworkRule(destination=f"{gateway}/32", port=port, action=NetworkAction.ALLOW)],
        ),
        credentials=[CredentialRef(name="echo-key", injection=CredentialInjection.sidecar())],
    )
    route = SidecarRoute(upstream=f"http://{gateway}:{port}", header="authorization", value_prefix="Bearer ")
    events: list[Any] = []

    async def sink(event: Any) -> None:
        events.append(event)

    workspace = tmp_path / "ws"
    workspace.mkdir()
    agent = bash_agent(CALL.format(host=PROXY_ALIAS, port=CREDENTIAL_PORT_BASE))
    output = await env.run(
        build_turn(agent, workspace=workspace),
        TurnInput(message=Content.text("go"), trigger=TriggerType.user()),
        spec,
        events=sink,
        sidecar_routes={"echo-key": route},
    )
    assert output.exit_reason.kind == "complete", output
    (finished,) = [e for e in events if isinstance(e, ToolFinished)]
    stdout = json.loads(finished.output)["stdout"]
    received = bytes.fromhex(stdout.split("reply ", 1)[1].split()[0])
    # The upstream got the key, injected by the credential proxy, and echoed it.
    (head,) = echo.heads
    assert f"authorization: Bearer {secret}".encode() in head
    # What reached the sandbox carries it in no form: masked in the head and the body.
    leaked = [f for f in forms(secret) + forms(f"Bearer {secret}") if f in received]
    assert not leaked, received[:300]
    mask = b"*" * len(f"Bearer {secret}")
    assert received.startswith(b"HTTP/1.1 200 OK " + mask) and b"X-Echo: " + mask in received
    (call,) = [e for e in events if isinstance(e, CredentialProxyEvent)]
    assert call.status == 200 and call.redacted >= 4
    assert secret not in output.model_dump_json() + "".join(repr(e) for e in events)
    assert_clean(docker_client, state_dir)
