"""Network policy and credentials on the real engine, against servers this module starts.

Topology the module creates (and removes):

* network A, subnet ``11.87.0.0/24`` (a public-looking range *inside a Docker network this
  test creates*, so that a name rule can allow a server there: private ranges are refused to
  name rules by design). Servers ``srv-a`` and ``srv-b`` answer HTTP on 8080 and 8081 with
  their own name. The host's address on that bridge (11.87.0.1) carries the fake Anthropic
  API for the sidecar test.
* network B, a private subnet Docker picks. Server ``srv-private``, also reachable under the
  alias ``rebind.test`` — a name this test's own resolver (Docker's DNS on B) maps to a
  private address.

The egress proxy joins A and B (``DockerEnvironment(egress_networks=...)``). No traffic goes
anywhere else: 169.254.169.254 is refused by the proxy before it connects to anything.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import secrets
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from airlock.build import build_turn
from airlock.policy.secrets import EnvSecretResolver
from airlock.proxy import CredentialProxyEvent, EgressEvent
from airlock.sandbox import PoolSettings, WarmPool, compile_sandbox_plan
from airlock.sandbox.docker import DockerEnvironment, DockerSettings
from airlock.spec import AgentSpec, ProviderSpec
from airlock.testing import FakeAnthropicServer, bash_agent, text_block, tool_use_block
from airlock.turn import ToolFinished, ToolStarted
from layer0 import (
    Content,
    CredentialInjection,
    CredentialRef,
    EnvError,
    EnvironmentSpec,
    NetworkAction,
    NetworkPolicy,
    NetworkRule,
    TriggerType,
    TurnInput,
)
from tests.support.containers import OWNER, assert_clean, assert_none_left, my_containers

pytestmark = [pytest.mark.docker, pytest.mark.attack("network")]

SUBNET_A = "11.87.0.0/24"
GATEWAY_A = "11.87.0.1"
SERVER = """
import http.server, sys, threading
name = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"{name}:{self.server.server_port}:{self.path}".encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        print("request", *a, flush=True)
for port in (8080, 8081):
    s = http.server.ThreadingHTTPServer(("0.0.0.0", port), H)
    threading.Thread(target=s.serve_forever, daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"""
# Fetches each URL through the environment's proxy settings; prints "URL -> body | ERR ...".
FETCH = (
    "python - {urls} <<'EOF'\n"
    "import sys, urllib.request\n"
    "for u in sys.argv[1:]:\n"
    "    try:\n"
    "        print(u, '->', urllib.request.urlopen(u, timeout=10).read().decode())\n"
    "    except Exception as e:\n"
    "        print(u, '-> ERR', e)\n"
    "EOF"
)
# Connects directly (ignoring any proxy) and resolves names; prints one line per attempt.
DIRECT = (
    "python - {targets} <<'EOF'\n"
    "import socket, sys\n"
    "for t in sys.argv[1:]:\n"
    "    host, port = t.rsplit(':', 1)\n"
    "    try:\n"
    "        socket.getaddrinfo(host, None)\n"
    "        resolved = 'resolved'\n"
    "    except OSError:\n"
    "        resolved = 'unresolved'\n"
    "    s = socket.socket(); s.settimeout(3)\n"
    "    try:\n"
    "        s.connect((host, int(port))); print(t, resolved, 'CONNECTED')\n"
    "    except OSError as e:\n"
    "        print(t, resolved, 'FAILED', type(e).__name__)\n"
    "EOF"
)
# A CONNECT tunnel whose TLS ClientHello names {sni}.
CONNECT_SNI = (
    "python - <<'EOF'\n"
    "import socket, ssl\n"
    "s = socket.create_connection(('airlock-proxy', 3128), timeout=10)\n"
    "s.sendall(b'CONNECT {host}:{port} HTTP/1.1\\r\\nHost: {host}:{port}\\r\\n\\r\\n')\n"
    "print('proxy:', s.recv(200).split(b'\\r\\n')[0].decode())\n"
    "ctx = ssl.create_default_context()\n"
    "try:\n"
    "    ctx.wrap_socket(s, server_hostname='{sni}')\n"
    "    print('tls: handshake completed')\n"
    "except (OSError, ssl.SSLError) as e:\n"
    "    print('tls: failed', type(e).__name__)\n"
    "EOF"
)


class Net:
    def __init__(self, a: str, b: str, private_subnet: str, ips: dict[str, str]) -> None:
        self.a, self.b, self.private_subnet, self.ips = a, b, private_subnet, ips


@pytest.fixture(scope="module")
def nets(runner_image: str, docker_client: Any) -> Iterator[Net]:
    import docker

    suffix = os.urandom(3).hex()
    labels = {"airlock.test": OWNER}
    ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=SUBNET_A, gateway=GATEWAY_A)])
    net_a = docker_client.networks.create(f"altest-a-{suffix}", driver="bridge", ipam=ipam, labels=labels)
    net_b = docker_client.networks.create(f"altest-b-{suffix}", driver="bridge", labels=labels)
    servers: list[Any] = []
    try:
        for name, net, aliases in (
            ("srv-a", net_a, []),
            ("srv-b", net_a, []),
            ("srv-private", net_b, ["rebind.test"]),
        ):
            c = docker_client.containers.create(
                runner_image,
                entrypoint=["/opt/venv/bin/python", "-c", SERVER],
                command=[name],
                name=f"{name}-{suffix}",
                user="65534:65534",
                labels=labels,
                detach=True,
                network=net.name,
            )
            # The bare name as an alias: rules and URLs say srv-a, not srv-a-<suffix>.
            net.disconnect(c)
            net.connect(c, aliases=[name, *aliases])
            c.start()
            servers.append(c)
        deadline = time.monotonic() + 30
        for c in servers:
            while b"ready" not in c.logs():
                assert time.monotonic() < deadline, c.logs()
                time.sleep(0.05)
        net_b.reload()
        ips = {}
        for c in servers:
            c.reload()
            for n in c.attrs["NetworkSettings"]["Networks"].values():
                ips[c.name.rsplit("-", 1)[0]] = n["IPAddress"]
        subnet_b = net_b.attrs["IPAM"]["Config"][0]["Subnet"]
        yield Net(net_a.name, net_b.name, subnet_b, ips)
    finally:
        for c in servers:
            c.remove(force=True)
        net_a.remove()
        net_b.remove()


@pytest.fixture(params=["cold", "warm"])
def penv(
    request: pytest.FixtureRequest,
    runner_image: str,
    state_dir: Path,
    docker_client: Any,
    nets: Net,
    docker_settings: DockerSettings,
) -> Iterator[tuple[DockerEnvironment, dict[str, str]]]:
    """The environment, and the secrets it resolves; ``warm``: each :func:`run` claims a
    sandbox a warm pool started before the job's rules and secrets were known."""
    values: dict[str, str] = {}
    env = DockerEnvironment(
        image=runner_image,
        state_dir=state_dir,
        sweep=False,
        settings=docker_settings,
        egress_networks=[nets.a, nets.b],
        secrets=EnvSecretResolver(values),
    )
    WARM[id(env)] = request.param == "warm"
    yield env, values
    WARM.pop(id(env))
    assert_none_left(docker_client)
    assert docker_client.networks.list(filters={"label": f"airlock.owner={OWNER}"}) == []


def spec_allowing(*rules: tuple[str, int | None], **kw: Any) -> EnvironmentSpec:
    return EnvironmentSpec(
        network=NetworkPolicy(
            default=NetworkAction.DENY,
            rules=[NetworkRule(destination=d, port=p, action=NetworkAction.ALLOW) for d, p in rules],
        ),
        **kw,
    )


#: Whether each environment of :func:`penv` runs its jobs in warm sandboxes.
WARM: dict[int, bool] = {}


async def warmed(env: DockerEnvironment, spec: EnvironmentSpec, routes: Any) -> WarmPool[Any] | None:
    """A pool holding one started sandbox of ``spec``'s shape, no rule or secret bound yet
    (None for a cold environment, or a spec no sandbox can have)."""
    if not WARM.get(id(env)):
        return None
    try:
        plan = compile_sandbox_plan(spec, {**env.sidecar_routes, **(routes or {})})
    except EnvError:
        return None  # the run refuses it
    pool: WarmPool[Any] = WarmPool(PoolSettings(size=1))
    env.sandbox.pool = pool
    assert await env.sandbox.warm(spec, plan)
    assert await pool.wait_ready(60), pool.stats()
    return pool


async def run(
    env: DockerEnvironment,
    agent: AgentSpec,
    spec: EnvironmentSpec,
    tmp_path: Path,
    watch: Callable[[Any], Awaitable[None]] | None = None,
    **kw: Any,
) -> tuple[Any, list[Any]]:
    events: list[Any] = []
    pool = await warmed(env, spec, kw.get("sidecar_routes"))
    closing: list[asyncio.Future[None]] = []

    async def sink(event: Any) -> None:
        if pool is not None:  # the job holds its sandbox: no refill for the test to see
            if not closing:
                closing.append(asyncio.ensure_future(pool.aclose()))
            await asyncio.shield(closing[0])
        events.append(event)
        if watch is not None:
            await watch(event)

    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    turn = build_turn(agent, workspace=workspace)
    try:
        output = await env.run(
            turn, TurnInput(message=Content.text("go"), trigger=TriggerType.user()), spec, events=sink, **kw
        )
    finally:
        if pool is not None:
            await pool.aclose()
            await pool.settle()
            env.sandbox.pool = None
    assert pool is None or pool.stats().hits == 1, "the warm run started cold"
    return output, events


def stdout_of(events: list[Any]) -> list[str]:
    return [json.loads(e.output)["stdout"] for e in events if isinstance(e, ToolFinished)]


def egress(events: list[Any], phase: str = "decision") -> list[EgressEvent]:
    return [e for e in events if isinstance(e, EgressEvent) and e.phase == phase]


def fetch(*urls: str) -> str:
    return FETCH.format(urls=" ".join(urls))


async def test_no_network_by_default(
    penv: Any, docker_client: Any, nets: Net, tmp_path: Path, state_dir: Path
) -> None:
    env, _ = penv
    agent = bash_agent(
        DIRECT.format(targets=f"srv-a:8080 {nets.ips['srv-a']}:8080"),
        "env | grep -ci proxy; "
        "/opt/venv/bin/python -c 'import socket; print(*[n for _, n in socket.if_nameindex()])'",
    )
    output, events = await run(env, agent, EnvironmentSpec(), tmp_path)
    direct, netinfo = stdout_of(events)
    assert output.exit_reason.kind == "complete"
    assert "srv-a:8080 unresolved FAILED" in direct
    assert f"{nets.ips['srv-a']}:8080 resolved FAILED" in direct  # an IP literal: no route
    assert netinfo.split() == ["0", "lo"]  # no proxy variables, only loopback
    assert egress(events) == []
    assert_clean(docker_client, state_dir)


async def test_allow_list_by_name_and_port(
    penv: Any, docker_client: Any, nets: Net, tmp_path: Path, state_dir: Path
) -> None:
    env, _ = penv
    ip_a = nets.ips["srv-a"]
    agent = bash_agent(
        fetch(
            "http://srv-a:8080/hello",
            "http://srv-a:8081/port",
            "http://srv-b:8080/other",
            f"http://{ip_a}:8080/ip",
        ),
        DIRECT.format(targets=f"{ip_a}:8080 srv-a:8080 srv-b:8080"),
    )
    output, events = await run(env, agent, spec_allowing(("srv-a", 8080)), tmp_path)
    fetched, direct = stdout_of(events)
    assert output.exit_reason.kind == "complete"
    assert "http://srv-a:8080/hello -> srv-a:8080:/hello" in fetched
    assert "http://srv-a:8081/port -> ERR HTTP Error 403" in fetched
    assert "http://srv-b:8080/other -> ERR HTTP Error 403" in fetched
    assert f"http://{ip_a}:8080/ip -> ERR HTTP Error 403" in fetched
    # Traffic that ignores the proxy has no route and no DNS.
    assert f"{ip_a}:8080 resolved FAILED" in direct  # an IP literal: no route
    assert "srv-a:8080 unresolved FAILED" in direct and "srv-b:8080 unresolved FAILED" in direct
    assert "CONNECTED" not in direct
    decisions = {(e.host, e.port): e for e in egress(events)}
    assert decisions[("srv-a", 8080)].allowed and decisions[("srv-a", 8080)].ip == ip_a
    assert "spec.network.rules[0]" in decisions[("srv-a", 8080)].rule
    assert not decisions[("srv-a", 8081)].allowed and decisions[("srv-a", 8081)].rule == "default deny"
    assert not decisions[("srv-b", 8080)].allowed
    assert not decisions[(ip_a, 8080)].allowed
    # DNS exfiltration under a name rule: a name no rule allows is refused unresolved (its
    # query would carry the data), whatever the port; srv-b is one Docker's DNS on the test's
    # own network answers, so even a wrong lookup would have stayed on this machine.
    for refused in (("srv-a", 8081), ("srv-b", 8080)):
        assert decisions[refused].ip is None, decisions[refused]
        assert decisions[refused].reason.endswith("not resolved)"), decisions[refused].reason
    closed = egress(events, "closed")
    assert closed and closed[0].bytes_down and closed[0].bytes_down > 0
    assert_clean(docker_client, state_dir)


async def test_private_metadata_and_rebinding_refused_unless_named(
    penv: Any, docker_client: Any, nets: Net, tmp_path: Path
) -> None:
    env, _ = penv
    agent = bash_agent(
        fetch(
            "http://srv-private:8080/by-name",
            "http://rebind.test:8080/rebound",
            "http://169.254.169.254/latest/meta-data/",
        )
    )
    spec = spec_allowing(("srv-private", 8080), ("rebind.test", 8080), ("srv-a", 8080))
    output, events = await run(env, agent, spec, tmp_path)
    (fetched,) = stdout_of(events)
    assert output.exit_reason.kind == "complete"
    assert fetched.count("ERR HTTP Error 403") == 3, fetched
    by_host = {e.host: e for e in egress(events)}
    assert "private" in by_host["srv-private"].reason
    assert "private" in by_host["rebind.test"].reason  # allowed name, denied resolved address
    assert by_host["169.254.169.254"].ip is None and not by_host["169.254.169.254"].allowed

    # Naming the private range explicitly (a CIDR rule) grants its addresses, requested by IP.
    agent = bash_agent(fetch(f"http://{nets.ips['srv-private']}:8080/named"))
    spec = spec_allowing((nets.private_subnet, 8080))
    output, events = await run(env, agent, spec, tmp_path)
    assert "-> srv-private:8080:/named" in stdout_of(events)[0]


async def test_a_cidr_rule_never_gets_a_name_resolved(
    penv: Any, docker_client: Any, nets: Net, tmp_path: Path
) -> None:
    """DNS exfiltration: with a CIDR rule whose port matches, ``CONNECT <data>.<name>:<port>``
    used to make the proxy resolve the name (the data leaving in the query) before any
    decision. ``srv-private`` is the name here: Docker's DNS on the test's own network B
    answers it, so nothing is sent anywhere else, and the decision shows whether the proxy
    looked it up (an ``ip`` on the event) or refused it unresolved. The proxy container of a
    plan without name rules has no DNS at all."""
    env, _ = penv
    agent = bash_agent(
        CONNECT_SNI.format(host="srv-private", port=8080, sni="srv-private"),
        fetch("http://srv-private:8080/by-name", f"http://{nets.ips['srv-private']}:8080/by-ip"),
    )
    proxy_dns: list[Any] = []

    async def look(event: Any) -> None:
        if isinstance(event, EgressEvent) and not proxy_dns:
            (proxy,) = await asyncio.to_thread(
                docker_client.containers.list,
                filters={"label": ["airlock.role=proxy", f"airlock.owner={OWNER}"]},
            )
            proxy_dns.append(proxy.attrs["HostConfig"]["Dns"])

    output, events = await run(env, agent, spec_allowing((nets.private_subnet, 8080)), tmp_path, look)
    assert proxy_dns == [["127.0.0.1"]]
    tunnel, fetched = stdout_of(events)
    assert output.exit_reason.kind == "complete"
    assert "proxy: HTTP/1.1 403" in tunnel
    assert "by-name -> ERR HTTP Error 403" in fetched and "-> srv-private:8080:/by-ip" in fetched
    by_name = [e for e in egress(events) if e.host == "srv-private"]
    assert len(by_name) == 2
    for e in by_name:
        assert not e.allowed and e.ip is None, e
        assert e.reason.endswith("(default deny; not resolved)"), e.reason


async def test_connect_sni_must_match_the_host(penv: Any, docker_client: Any, tmp_path: Path) -> None:
    env, _ = penv
    agent = bash_agent(
        CONNECT_SNI.format(host="srv-a", port=8080, sni="srv-b"),
        CONNECT_SNI.format(host="srv-a", port=8080, sni="srv-a"),
    )
    output, events = await run(env, agent, spec_allowing(("srv-a", 8080)), tmp_path)
    assert output.exit_reason.kind == "complete"
    fronted, honest = stdout_of(events)
    assert "proxy: HTTP/1.1 200" in fronted and "tls: failed" in fronted
    decisions = [e for e in egress(events) if e.method == "CONNECT"]
    mismatch = [e for e in decisions if not e.allowed]
    assert len(mismatch) == 1 and mismatch[0].sni == "srv-b" and "sni" in mismatch[0].reason.lower()
    # The honest tunnel is let through (the plain-HTTP server then rejects the TLS bytes).
    assert any(e.allowed and e.sni == "srv-a" for e in decisions)
    assert "tls: failed" in honest  # srv-a speaks no TLS; what matters is the decision above


async def test_env_var_and_file_credentials(
    penv: Any, docker_client: Any, tmp_path: Path, state_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    env, values = penv
    token, key = "tok-" + secrets.token_hex(16), "key-" + secrets.token_hex(16)
    values.update({"API_TOKEN": token, "DEPLOY_KEY": key})
    spec = EnvironmentSpec(
        credentials=[
            CredentialRef(name="api-token", injection=CredentialInjection.env_var("API_TOKEN")),
            CredentialRef(name="deploy-key", injection=CredentialInjection.file("/run/secrets/deploy-key")),
        ]
    )
    agent = bash_agent(
        'printf %s "$API_TOKEN" | sha256sum; sha256sum < /run/secrets/deploy-key; '
        "stat -c '%a %u' /run/secrets/deploy-key; id -u",
        "cat /run/secrets/deploy-key",  # an agent printing its secret: redacted on the way out
    )
    caplog.set_level(logging.DEBUG)
    output, events = await run(env, agent, spec, tmp_path)
    hashes, printed = stdout_of(events)
    lines = hashes.split("\n")
    assert lines[0].split()[0] == hashlib.sha256(token.encode()).hexdigest()
    assert lines[1].split()[0] == hashlib.sha256(key.encode()).hexdigest()
    uid = lines[3].strip()
    assert lines[2] == f"400 {uid}"
    assert printed == "[REDACTED]"
    everything = output.model_dump_json() + "".join(repr(e) for e in events) + caplog.text
    assert token not in everything and key not in everything
    assert_clean(docker_client, state_dir)  # credential files gone with the sandbox


async def test_missing_secret_is_credential_failed(
    penv: Any, docker_client: Any, tmp_path: Path, state_dir: Path
) -> None:
    env, _ = penv
    spec = EnvironmentSpec(
        credentials=[CredentialRef(name="nowhere", injection=CredentialInjection.env_var("NOWHERE"))]
    )
    with pytest.raises(EnvError) as e:
        await run(env, bash_agent("true"), spec, tmp_path)
    assert e.value.kind == "credential_failed" and "nowhere" in str(e.value)
    assert_clean(docker_client, state_dir)


async def test_unsafe_policy_is_refused_before_provisioning(
    penv: Any, docker_client: Any, tmp_path: Path
) -> None:
    env, _ = penv
    spec = EnvironmentSpec(
        network=NetworkPolicy(default=NetworkAction.ALLOW, rules=[]),
        credentials=[CredentialRef(name="anthropic-api-key", injection=CredentialInjection.sidecar())],
    )
    with pytest.raises(EnvError) as e:
        await run(env, bash_agent("true"), spec, tmp_path)
    assert e.value.kind == "isolation_violation" and "allow" in str(e.value)


async def test_sidecar_secret_never_enters_the_sandbox(
    penv: Any, docker_client: Any, tmp_path: Path, state_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from airlock.policy.plan import SidecarRoute

    env, values = penv
    secret = "sk-ant-test-" + secrets.token_hex(20)
    values["ANTHROPIC_API_KEY"] = secret
    probe = (
        "env; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done; "
        "grep -rl sk-ant-test- /run /tmp /workspace /etc /home 2>/dev/null; echo probe-done"
    )
    async with FakeAnthropicServer(require_api_key=secret, host=GATEWAY_A) as api:
        api.reply([tool_use_block("t1", "bash", {"command": probe})], stop_reason="tool_use")
        api.reply([text_block("all clear")])
        agent = AgentSpec(
            name="claude-in-a-box",
            provider=ProviderSpec(kind="anthropic", model="claude-haiku-4-5-20251001", base_url=api.base_url),
            tools=["bash"],
        )
        spec = spec_allowing(
            (f"{GATEWAY_A}/32", api.port),
            credentials=[CredentialRef(name="anthropic-api-key", injection=CredentialInjection.sidecar())],
        )
        route = SidecarRoute(upstream=api.base_url, header="x-api-key")
        inspected: list[str] = []

        async def look(event: Any) -> None:
            if isinstance(event, ToolStarted):  # the sandbox and its proxy, mid-turn
                for c in await asyncio.to_thread(my_containers, docker_client):
                    inspected.append(
                        json.dumps(await asyncio.to_thread(docker_client.api.inspect_container, c.id))
                    )
                    inspected.append((await asyncio.to_thread(c.logs)).decode(errors="replace"))

        caplog.set_level(logging.DEBUG)
        output, events = await run(
            env, agent, spec, tmp_path, look, sidecar_routes={"anthropic-api-key": route}
        )
        requests = list(api.requests)
    assert output.exit_reason.kind == "complete", output
    assert output.message.as_text() == "all clear"
    (probe_out,) = stdout_of(events)
    assert probe_out.rstrip().endswith("probe-done")
    assert "sk-ant-test-" not in probe_out  # not in env, /proc/*/environ, or any file
    assert len(inspected) == 4 and all(secret not in text for text in inspected)
    # The API received the key on every request, injected by the credential proxy.
    assert len(requests) == 2 and all(r.headers.get("x-api-key") == secret for r in requests)
    proxied = [e for e in events if isinstance(e, CredentialProxyEvent)]
    assert [e.status for e in proxied] == [200, 200] and proxied[0].credential == "anthropic-api-key"
    everything = output.model_dump_json() + "".join(repr(e) for e in events) + caplog.text
    assert secret not in everything
    assert_clean(docker_client, state_dir)
