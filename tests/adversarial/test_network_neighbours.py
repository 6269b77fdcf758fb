"""A sandbox against its neighbours, under runc and gVisor: sandbox A (with egress, so it
has an internal network and a proxy) listens; sandbox B (the same) tries to reach A, A's
proxy on both of its networks, and this host through each gateway address of the networks
involved (a listener this test starts on the host), directly and through its own proxy. It
must reach none of them, A's listener and the host's must see nobody, and B must have no
IPv6 address but loopback. Every target is on this machine, on networks the run created."""

from __future__ import annotations

import asyncio
import ipaddress
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from airlock.turn import ToolStarted
from layer0 import EnvironmentSpec, NetworkAction, NetworkPolicy, NetworkRule
from tests.support.containers import OWNER
from tests.support.hostile import Hostile, run_hostile_async

pytestmark = [pytest.mark.docker, pytest.mark.attack("network")]

#: An allow rule never used: each sandbox gets its internal network and its egress proxy.
WITH_EGRESS = EnvironmentSpec(
    network=NetworkPolicy(
        default=NetworkAction.DENY,
        rules=[NetworkRule(destination="model.airlock.test", port=443, action=NetworkAction.ALLOW)],
    )
)
LISTEN_PORT = 7070
#: Sandbox A: listen on every address for a while, then print who connected.
LISTEN = f"""/opt/venv/bin/python - <<'EOF'
import json, socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", {LISTEN_PORT})); s.listen(8); s.settimeout(0.5)
peers, end = [], time.monotonic() + 25
while time.monotonic() < end:
    try:
        conn, peer = s.accept(); peers.append(peer[0]); conn.close()
    except OSError:
        pass
print(json.dumps(peers))
EOF"""
IPV6 = "cat /proc/net/if_inet6 2>/dev/null; echo end"


@dataclass
class HostListener:
    port: int
    peers: list[str]


@pytest.fixture
async def host_listener() -> AsyncIterator[HostListener]:
    peers: list[str] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peers.append(str(writer.get_extra_info("peername")))
        writer.close()

    server = await asyncio.start_server(on_connect, "0.0.0.0", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield HostListener(port, peers)


def addresses(client: Any) -> dict[str, str]:
    """A's sandbox and proxy addresses and the gateways of their networks."""
    found: dict[str, str] = {}
    for c in client.containers.list(filters={"label": f"airlock.owner={OWNER}"}):
        role = c.labels.get("airlock.role", "sandbox")
        for name, net in (c.attrs["NetworkSettings"]["Networks"] or {}).items():
            where = "egress" if name == "airlock-egress" else "internal"
            if net.get("IPAddress"):
                found[f"{role}_{where}"] = net["IPAddress"]
            for cfg in (client.networks.get(name).attrs.get("IPAM") or {}).get("Config") or []:
                subnet = ipaddress.ip_network(cfg["Subnet"])
                gateway = cfg.get("Gateway") or str(next(subnet.hosts()))
                found[f"gateway_{where}"] = gateway
    return found


async def test_a_sandbox_reaches_no_neighbour_and_not_the_host(
    boundary: str, runner_image: str, host_listener: HostListener
) -> None:
    import docker

    client = docker.from_env()
    known: dict[str, str] = {}
    listening = asyncio.Event()

    async def watch(event: Any) -> None:
        if isinstance(event, ToolStarted) and not listening.is_set():
            await asyncio.sleep(1.0)  # A's listener is up
            known.update(await asyncio.to_thread(addresses, client))
            listening.set()

    a_task = asyncio.create_task(
        run_hostile_async([LISTEN], isolation=boundary, image=runner_image, spec=WITH_EGRESS, watch=watch)
    )
    await asyncio.wait_for(listening.wait(), 60)
    assert {"sandbox_internal", "proxy_internal", "proxy_egress", "gateway_egress"} <= set(known), known
    port = host_listener.port
    probe = {
        "tcp": {
            "sandbox_a": f"{known['sandbox_internal']}:{LISTEN_PORT}",
            "proxy_a_internal": f"{known['proxy_internal']}:3128",
            "proxy_a_egress": f"{known['proxy_egress']}:3128",
            "host_via_egress_gateway": f"{known['gateway_egress']}:{port}",
            "host_via_internal_gateway_of_a": f"{known['gateway_internal']}:{port}",
        },
        "http": {
            "via_proxy_to_sandbox_a": f"http://{known['sandbox_internal']}:{LISTEN_PORT}/",
            "via_proxy_to_proxy_a": f"http://{known['proxy_egress']}:3128/",
            "via_proxy_to_host": f"http://{known['gateway_egress']}:{port}/",
        },
    }
    b = await run_hostile_async(
        [f"/opt/venv/bin/python -m airlock.probe.sandbox '{json.dumps(probe)}'", IPV6],
        isolation=boundary,
        image=runner_image,
        spec=WITH_EGRESS,
    )
    a: Hostile = await a_task
    client.close()
    assert a.error is None and b.error is None, (a.error, b.error)
    report = b.json(0)
    assert all(v != "reachable" for v in report["tcp"].values()), report["tcp"]
    assert all(v["status"] == 403 for v in report["http"].values()), report["http"]  # its proxy refused
    assert json.loads(a.results[0]["stdout"]) == []  # A's listener saw nobody
    assert host_listener.peers == []  # nor did the host's
    v6 = [line.split()[-1] for line in b.results[1]["stdout"].splitlines() if line != "end"]
    assert set(v6) <= {"lo"}, v6
