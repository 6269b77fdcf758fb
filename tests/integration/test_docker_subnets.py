"""Internal networks on small subnets of a configured range, on the real engine.

* A range holding two /28s: two sandboxes with egress run at once; a third fails at once with
  ``provision_failed`` naming the range (nothing of it left: no container, network or
  directory), or, allowed to wait, waits and runs once one of the two has finished.
* With the default settings 40 internal networks are created at once (Docker's default
  address pools held about 30 on this kind of host).

The only server reached is one this module starts, on a network it creates; the tiny range
is a free /27 of 10.212.0.0/16 found at the start (nothing else on the host uses it).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import secrets
import time
from collections.abc import Iterator
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

import pytest

from airlock.build import build_turn
from airlock.policy import ResolvedCredentials
from airlock.policy.plan import compile_plan
from airlock.proxy import EgressEvent
from airlock.sandbox.docker import DockerEnvironment, DockerSettings
from airlock.sandbox.docker._egress import EgressWiring
from airlock.sandbox.docker._labels import LABEL_SANDBOX, owner_labels
from airlock.sandbox.docker._subnets import docker_subnets, host_networks, pick
from airlock.testing import bash_agent
from airlock.turn import ToolFinished
from layer0 import (
    Content,
    EnvError,
    EnvironmentSpec,
    NetworkAction,
    NetworkPolicy,
    NetworkRule,
    TriggerType,
    TurnInput,
)
from tests.support.containers import OWNER, assert_clean, my_containers

pytestmark = pytest.mark.docker

# Answers /release with "go" once /tmp/go exists in its container, "wait" before.
SERVER = """
import http.server, os, threading
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"go" if os.path.exists("/tmp/go") else b"wait"
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("0.0.0.0", 8080), H)
print("ready", flush=True)
s.serve_forever()
"""
# Asks the server through the egress proxy until it says go.
HOLD = (
    "python - <<'EOF'\n"
    "import time, urllib.request\n"
    "while True:\n"
    "    body = urllib.request.urlopen('http://{ip}:8080/release', timeout=10).read().decode()\n"
    "    if body == 'go':\n"
    "        print('released', flush=True)\n"
    "        break\n"
    "    time.sleep(0.2)\n"
    "EOF"
)


class Server:
    def __init__(self, network: str, subnet: str, ip: str, container: Any) -> None:
        self.network, self.subnet, self.ip, self.container = network, subnet, ip, container

    def release(self) -> None:
        assert self.container.exec_run(["touch", "/tmp/go"]).exit_code == 0


@pytest.fixture(scope="module")
def server(runner_image: str, docker_client: Any) -> Iterator[Server]:
    suffix = os.urandom(3).hex()
    labels = {"airlock.test": OWNER}
    network = docker_client.networks.create(f"altest-subnets-{suffix}", driver="bridge", labels=labels)
    container = None
    try:
        container = docker_client.containers.run(
            runner_image,
            entrypoint=["/opt/venv/bin/python", "-c", SERVER],
            name=f"altest-subnets-srv-{suffix}",
            user="65534:65534",
            labels=labels,
            detach=True,
            network=network.name,
        )
        deadline = time.monotonic() + 30
        while b"ready" not in container.logs():
            assert time.monotonic() < deadline, container.logs()
            time.sleep(0.05)
        container.reload()
        network.reload()
        ip = container.attrs["NetworkSettings"]["Networks"][network.name]["IPAddress"]
        yield Server(network.name, network.attrs["IPAM"]["Config"][0]["Subnet"], ip, container)
    finally:
        if container is not None:
            container.remove(force=True)
        network.remove()


@pytest.fixture
def tiny(docker_client: Any) -> IPv4Network:
    """A /27 (two /28s) of 10.212.0.0/16 that nothing on this host uses now."""
    used = [s.network for s in docker_subnets(docker_client)] + [c.network for c in host_networks()]
    found = pick(IPv4Network("10.212.0.0/16"), 27, used, index=secrets.randbelow(2048))
    assert found is not None, "10.212.0.0/16 is full on this host"
    return found


def my_networks(client: Any) -> list[Any]:
    return list(client.networks.list(filters={"label": f"airlock.owner={OWNER}"}))


def left_of(client: Any, state_dir: Path, sandbox_id: str) -> list[str]:
    """Whatever of sandbox ``sandbox_id`` exists: containers, networks, files in the state dir."""
    label = {"label": f"{LABEL_SANDBOX}={sandbox_id}"}
    return [
        *(f"container {c.name}" for c in client.containers.list(all=True, filters=label)),
        *(f"network {n.name}" for n in client.networks.list(filters=label)),
        *(str(p) for p in state_dir.iterdir() if p.name.startswith(sandbox_id)),
    ]


def subnets_of(networks: list[Any]) -> list[IPv4Network]:
    return [IPv4Network(n.attrs["IPAM"]["Config"][0]["Subnet"]) for n in networks]


async def test_a_full_range_fails_clearly_or_waits_for_a_freed_subnet(
    runner_image: str,
    docker_client: Any,
    server: Server,
    tiny: IPv4Network,
    state_dir: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = DockerSettings(internal_subnets=str(tiny), internal_prefix=28, internal_subnet_wait=0)
    env = DockerEnvironment(
        image=runner_image,
        state_dir=state_dir,
        sweep=False,
        settings=settings,
        egress_networks=[server.network],
    )
    spec = EnvironmentSpec(
        network=NetworkPolicy(
            default=NetworkAction.DENY,
            rules=[NetworkRule(destination=server.subnet, port=8080, action=NetworkAction.ALLOW)],
        )
    )
    agent = bash_agent(HOLD.format(ip=server.ip))

    async def job(name: str, holding: asyncio.Event | None = None) -> list[str]:
        stdout: list[str] = []

        async def sink(event: Any) -> None:
            if isinstance(event, EgressEvent) and event.allowed and holding is not None:
                holding.set()
            if isinstance(event, ToolFinished):
                stdout.append(event.output)

        workspace = tmp_path / name
        workspace.mkdir()
        output = await env.run(
            build_turn(agent, workspace=workspace),
            TurnInput(message=Content.text("hold"), trigger=TriggerType.user()),
            spec,
            events=sink,
        )
        assert output.exit_reason.kind == "complete", output
        return stdout

    held = [asyncio.Event(), asyncio.Event()]
    holders = [asyncio.ensure_future(job(f"h{i}", e)) for i, e in enumerate(held)]
    try:
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in held)), 120)
        networks = my_networks(docker_client)
        assert len(networks) == 2 and all(
            s.subnet_of(tiny) and s.prefixlen == 28 for s in subnets_of(networks)
        )

        # Not allowed to wait: fails at once, naming the range, and leaves nothing of itself.
        with pytest.raises(EnvError) as info:
            await job("failing")
        message = str(info.value.message)
        assert info.value.kind == "provision_failed"
        assert f"no free /28 left in {tiny} (2 in use); raise backends.docker.internal_subnets" in message
        match = re.search(r"sandbox (sb-[0-9a-f]+)", message)
        assert match is not None, message
        failed = match.group(1)
        assert await asyncio.to_thread(left_of, docker_client, state_dir, failed) == []
        assert len(my_containers(docker_client)) == 4  # the two holders and their proxies

        # Allowed to wait: waits while both are held, then runs once they are released.
        env.sandbox.settings = settings.model_copy(update={"internal_subnet_wait": 300.0})
        caplog.set_level(logging.INFO, logger="airlock.sandbox.docker.subnets")
        waiter = asyncio.ensure_future(job("waiting"))
        holders.append(waiter)
        while not any("waiting up to 300s" in r.getMessage() for r in caplog.records):
            assert not waiter.done(), waiter.exception()
            await asyncio.sleep(0.05)
        assert len(my_networks(docker_client)) == 2 and not waiter.done()
        await asyncio.to_thread(server.release)
        results = await asyncio.wait_for(asyncio.gather(*holders), 180)
    finally:
        await asyncio.to_thread(server.release)
        for task in holders:
            task.cancel()
        await asyncio.gather(*holders, return_exceptions=True)
    assert all("released" in out[0] for out in results), results
    assert my_networks(docker_client) == []
    assert_clean(docker_client, state_dir)


async def test_forty_internal_networks_at_once_with_the_default_settings(
    docker_client: Any, state_dir: Path
) -> None:
    settings = DockerSettings()
    spec = EnvironmentSpec(
        network=NetworkPolicy(
            default=NetworkAction.DENY,
            rules=[NetworkRule(destination="10.1.2.3", port=80, action=NetworkAction.ALLOW)],
        )
    )
    wirings = []
    for _ in range(40):
        sandbox_id = f"sb-{secrets.token_hex(8)}"
        wirings.append(
            EgressWiring(
                client=docker_client,
                sandbox_id=sandbox_id,
                state_dir=state_dir,
                labels=owner_labels(sandbox_id),
                user=(os.getuid(), os.getgid()),
                root=False,
                image="unused",
                plan=compile_plan(spec),
                credentials=ResolvedCredentials({}),
                egress_networks=(),
                events=None,
                settings=settings,
            )
        )
    began = time.monotonic()
    try:
        results = await asyncio.gather(
            *(asyncio.to_thread(w.create_network) for w in wirings), return_exceptions=True
        )
        took = time.monotonic() - began
        errors = [r for r in results if isinstance(r, BaseException)]
        assert errors == [], errors[:3]
        subnets = [IPv4Network(w.subnet) for w in wirings]
        assert len(set(subnets)) == 40
        assert all(s.prefixlen == 28 and s.subnet_of(settings.internal_range) for s in subnets)
        assert sorted(subnets_of(my_networks(docker_client))) == sorted(subnets)
        print(f"40 internal networks created at once in {took:.1f}s")
    finally:
        problems = await asyncio.gather(*(asyncio.to_thread(w.remove) for w in wirings))
    assert [p for p in problems if p] == []
    assert my_networks(docker_client) == []
